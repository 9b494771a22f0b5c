"""The names of the schedulers a simulation compares, and its defaults (light: the command
line's choices)."""

from kubeplace.simulate.policies import POLICIES

KUBEPLACE = "kubeplace"
KUBE_SCHEDULER = "kube-scheduler"
SCHEDULERS = (KUBEPLACE, KUBE_SCHEDULER, *POLICIES)
"""kubeplace's ``serve`` cycle, the kube-scheduler emulation, then the FGD authors' policies of
``simulate.policies`` (the simulate command's and the bench's ``--scheduler`` choices)."""

API_LATENCY = 0.04
"""Seconds from a binding decided to the pod counted as started, its run ending its duration
after that. Live a departure reaches the scheduler about 50 ms after the instant the simulation
would give it (the binding lands 20-40 ms after its cycle's instant, the deletion comes through
the watch) and an arrival about 10 ms after its instant, so the two are about 40 ms further apart
than in a simulation without latency (measured on the fidelity runs, bench simulate-fidelity).
Without it, a departure a few milliseconds before a batch closes leaves before that batch in the
simulation and after it live."""

MAX_TRACE_PODS = 200_000
"""The most pods a trace may hold (its items' counts summed), 25 times the whole openb trace:
its manifests are built before the replay (at the bound, 4 s of CPU and 384 MB peak, measured)
and a replay costs some milliseconds per pod. A bigger trace is refused with one line before
anything is built."""
MAX_SECONDS = 1e9
"""The latest simulated second a trace's times, durations and ``until`` may give (about 31
years): past it a float no longer holds the API latency's milliseconds, and creation times leave
the calendar."""
MAX_NODES = 100_000
"""The most nodes the what-if edits (``--add``, ``--scale-pool``) may leave: far above the
largest clusters Kubernetes vendors run (GKE: 65,000 nodes)."""
