"""Kueue: pods sharing the annotation ``kueue.x-k8s.io/workload`` (the admitted Workload's name, set on
the pod template when Kueue starts the job) were admitted together, their capacity promised: one gang
of all its pending pods (``kube.gangs.kueue_groups``), whose pods weigh a tier above every other pod
(``kube.gangs.is_admitted``). With topology-aware scheduling Kueue pins each pod to its node(s) by a
nodeSelector once it lifts the ``kueue.x-k8s.io/topology`` gate; gated pods are not pending and wait
(``kube.kueue``); its Workloads are read for the room promised to pods still gated."""

from __future__ import annotations

from kubeplace.kube.gang_sources.source import GangSource, annotation_member
from kubeplace.kube.kueue import API, KUEUE_WORKLOAD

GROUP = "kueue.x-k8s.io"

SOURCE = GangSource(GROUP, annotation_member(KUEUE_WORKLOAD), reads=(API,))
