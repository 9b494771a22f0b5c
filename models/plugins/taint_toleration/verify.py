"""TaintToleration's independent verifier check: every NoSchedule and NoExecute taint of the node
tolerated (``tainttoleration`` Filter, core/v1 ``Toleration.ToleratesTaint``). Written apart from
the plugin on purpose; imports only ``kubeplace.kube``."""

from __future__ import annotations

from collections.abc import Iterator

from kubeplace.kube.objects import NO_EXECUTE, NO_SCHEDULE, Node, Pod, Snapshot


def tolerates(pod: Pod, key: str, value: str, effect: str) -> bool:
    """toleration.go ToleratesTaint, for any of the pod's tolerations."""
    for toleration in pod.tolerations:
        if toleration.effect and toleration.effect != effect:
            continue
        if not toleration.key:
            if toleration.operator == "Exists":
                return True
            continue
        if toleration.key != key:
            continue
        if toleration.operator == "Exists":
            return True
        if toleration.operator in ("Equal", "") and toleration.value == value:
            return True
    return False


def check_pair(pod: Pod, node: Node, _snapshot: Snapshot, _args: object) -> Iterator[str]:
    for taint in node.taints:
        hard = taint.effect in (NO_SCHEDULE, NO_EXECUTE)
        if hard and not tolerates(pod, taint.key, taint.value, taint.effect):
            yield f"untolerated taint {taint.key}={taint.value}:{taint.effect}"
