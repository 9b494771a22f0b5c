"""NodeUnschedulable's independent verifier check: a cordoned node takes only a pod tolerating
the unschedulable taint (``nodeunschedulable`` Filter). Imports only ``kubeplace.kube`` and the
other rules' verifier checks."""

from __future__ import annotations

from collections.abc import Iterator

from kubeplace.kube.objects import NO_SCHEDULE, Node, Pod, Snapshot
from kubeplace.models.plugins.taint_toleration.verify import tolerates

UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


def check_pair(pod: Pod, node: Node, _snapshot: Snapshot, _args: object) -> Iterator[str]:
    if node.unschedulable and not tolerates(pod, UNSCHEDULABLE_TAINT_KEY, "", NO_SCHEDULE):
        yield "node is unschedulable (cordoned)"
