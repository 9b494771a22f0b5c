"""NodeAffinity's score part: the weights of the pod's preferred node affinity terms a node
matches (``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go`` Score)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.objects import Node, Pod, PreferredNodeTerm
from kubeplace.models.framework import ClassView, ObjectiveTerm, RunContext
from kubeplace.models.plugins.node_affinity.args import NodeAffinityArgs
from kubeplace.models.plugins.node_affinity.plugin import NAME, NodeAffinity, build, term_mask
from kubeplace.models.plugins.score_parts import class_groups, node_preference, preference_terms
from kubeplace.models.preferences import DEFAULT
from kubeplace.models.problem import IntArray, Problem, Rule


@dataclass(frozen=True)
class NodeAffinityScore:
    weight: int
    name: str = NAME

    def pod_key(self, pod: Pod) -> Hashable:
        return pod.preferred_node_terms

    def constraints(self, view: ClassView) -> Sequence[Rule]:
        groups = class_groups([p.preferred_node_terms for p in view.class_pods])
        raw = {key: preferred_weights(key, view.nodes) for key in groups if key}  # type: ignore[arg-type]
        return node_preference(raw, {k: v for k, v in groups.items() if k}, DEFAULT)

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return preference_terms(self.name, self.weight, problem)

def preferred_weights(terms: Sequence[PreferredNodeTerm], nodes: Sequence[Node]) -> IntArray:
    """NodeAffinity's raw score: the weights of the preferred terms each node matches."""
    raw = np.zeros(len(nodes), dtype=np.int64)
    for preferred in terms:
        raw += preferred.weight * term_mask(preferred.term, nodes)
    return raw


def build_node_affinity(args: NodeAffinityArgs, ctx: RunContext) -> tuple[NodeAffinity,
                                                                          NodeAffinityScore]:
    """NodeAffinity: the filter (nodeSelector, required terms) and the preferred terms' score."""
    return build(None, ctx), NodeAffinityScore(args.weight)

