"""The names of the schedulers a simulation compares (light: the command line's choices)."""

KUBEPLACE = "kubeplace"
KUBE_SCHEDULER = "kube-scheduler"
BEST_FIT = "best-fit"
FGD = "fgd"
SCHEDULERS = (KUBEPLACE, KUBE_SCHEDULER, BEST_FIT, FGD)
