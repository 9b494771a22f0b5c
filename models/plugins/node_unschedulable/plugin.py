"""NodeUnschedulable: cordoned nodes take only pods tolerating the unschedulable taint."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.objects import NO_SCHEDULE, Node, Pod, Taint
from kubeplace.models.framework import RunContext
from kubeplace.models.plugins.taint_toleration import tolerates
from kubeplace.models.problem import BoolArray

NAME = "NodeUnschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)


@dataclass(frozen=True)
class NodeUnschedulable:
    name: str = NAME
    reason: str = "node(s) were unschedulable"

    def pod_key(self, pod: Pod) -> Hashable:
        return any(tolerates(t, UNSCHEDULABLE_TAINT) for t in pod.tolerations)

    def node_key(self, node: Node) -> Hashable:
        return node.unschedulable

    def node_key_basis(self) -> object:
        return ()

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        if self.pod_key(pod):
            return np.ones(len(nodes), dtype=np.bool_)
        return np.array([not n.unschedulable for n in nodes], dtype=np.bool_)


def build(_args: None, _ctx: RunContext) -> NodeUnschedulable:
    return NodeUnschedulable()
