"""GPUModel: a pod's accepted GPU models (annotation, ``|``-separated) must include the
node's model label. Model constraints written as node affinity on the same label are
handled by NodeAffinity already; this covers the annotation form used by GPU traces."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.objects import Node, Pod
from kubeplace.models.framework import RunContext
from kubeplace.models.plugins.gpu_model.args import GPUModelArgs
from kubeplace.models.problem import BoolArray

NAME = "GPUModel"


@dataclass(frozen=True)
class GPUModel:
    args: GPUModelArgs
    name: str = NAME
    reason: str = "node(s) had a GPU model the pod does not accept"

    def accepted(self, pod: Pod) -> frozenset[str] | None:
        text = pod.annotations.get(self.args.podAnnotation, "").strip()
        if not text:
            return None
        return frozenset(m.strip() for m in text.split("|") if m.strip())

    def pod_key(self, pod: Pod) -> Hashable:
        models = self.accepted(pod)
        return None if models is None else tuple(sorted(models))

    def node_key(self, node: Node) -> Hashable:
        return node.labels.get(self.args.nodeLabel)

    def node_key_basis(self) -> object:
        return self.args.nodeLabel

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        models = self.accepted(pod)
        if models is None:
            return np.ones(len(nodes), dtype=np.bool_)
        return np.array([n.labels.get(self.args.nodeLabel) in models for n in nodes], dtype=np.bool_)


def build(args: GPUModelArgs, _ctx: RunContext) -> GPUModel:
    return GPUModel(args)
