"""TaintToleration: every NoSchedule / NoExecute taint must be tolerated."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.memo import IdentityMemo
from kubeplace.kube.objects import NO_EXECUTE, NO_SCHEDULE, Node, Pod, Taint, Toleration
from kubeplace.models.framework import RunContext
from kubeplace.models.problem import BoolArray

NAME = "TaintToleration"


def tolerates(tol: Toleration, taint: Taint) -> bool:
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if not tol.key and tol.operator != "Exists":
        return False
    if tol.operator == "Exists":
        return True
    return tol.value == taint.value


def hard_taints(node: Node) -> tuple[Taint, ...]:
    """The node's NoSchedule and NoExecute taints, in order; once per node object."""
    return _HARD_TAINTS(node)


def _hard_taints(node: Node) -> tuple[Taint, ...]:
    return tuple(sorted((t for t in node.taints if t.effect in (NO_SCHEDULE, NO_EXECUTE)),
                        key=lambda t: (t.key, t.value, t.effect)))


_HARD_TAINTS: IdentityMemo[Node, tuple[Taint, ...]] = IdentityMemo(_hard_taints)


@dataclass(frozen=True)
class TaintToleration:
    name: str = NAME
    reason: str = "node(s) had untolerated taint"

    def pod_key(self, pod: Pod) -> Hashable:
        return pod.tolerations

    def node_key(self, node: Node) -> Hashable:
        return hard_taints(node)

    def node_key_basis(self) -> object:
        return ()

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        return np.array([all(any(tolerates(tol, t) for tol in pod.tolerations) for t in hard_taints(n))
                         for n in nodes], dtype=np.bool_)


def build(_args: None, _ctx: RunContext) -> TaintToleration:
    return TaintToleration()
