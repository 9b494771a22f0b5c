"""InterPodAntiAffinity: a running pod's required anti-affinity keeps the pods it matches
out of its topology domain (its node's value of the term's topology key).

A pending pod with required (anti-)affinity of its own is left to the default scheduler
(not modelled), so only running pods' terms bind the pods kubeplace places.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.objects import Node, Pod, PodAffinityTerm, SpecRule
from kubeplace.kube.pod_affinity import term_matches
from kubeplace.models.framework import RunContext
from kubeplace.models.problem import BoolArray

NAME = "InterPodAntiAffinity"
REQUIRED_POD_AFFINITY = "required inter-pod affinity"
REQUIRED_POD_ANTI_AFFINITY = "required inter-pod anti-affinity"
UNMODELLED = {SpecRule.REQUIRED_POD_AFFINITY: REQUIRED_POD_AFFINITY,
              SpecRule.REQUIRED_POD_ANTI_AFFINITY: REQUIRED_POD_ANTI_AFFINITY}
"""A pending pod's own required (anti-)affinity: it constrains the other pods of the batch,
which the model does not express."""


@dataclass(frozen=True)
class Forbidden:
    """Pods matching ``term`` (seen from ``namespace``) may not run where ``key`` = ``value``."""

    term: PodAffinityTerm
    namespace: str
    key: str
    value: str

    def applies_to(self, pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        return term_matches(self.term, self.namespace, pod, namespace_labels)


@dataclass(frozen=True)
class InterPodAntiAffinity:
    forbidden: tuple[Forbidden, ...]
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Labels of the snapshot's Namespace objects, for the terms' namespaceSelectors."""
    name: str = NAME
    reason: str = "node(s) didn't satisfy existing pods anti-affinity rules"

    def pod_key(self, pod: Pod) -> Hashable:
        return tuple(i for i, f in enumerate(self.forbidden) if f.applies_to(pod, self.namespace_labels))

    def node_key(self, node: Node) -> Hashable:
        return tuple(node.labels.get(f.key) for f in self.forbidden)

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        mask = np.ones(len(nodes), dtype=np.bool_)
        for f in self.forbidden:
            if f.applies_to(pod, self.namespace_labels):
                mask &= np.array([n.labels.get(f.key) != f.value for n in nodes], dtype=np.bool_)
        return mask

    def unmodelled(self, pod: Pod) -> tuple[str, ...]:
        return tuple(reason for rule, reason in UNMODELLED.items() if rule in pod.spec_rules)


def build(_args: None, ctx: RunContext) -> InterPodAntiAffinity:
    nodes = {n.name: n for n in ctx.snapshot.nodes}
    found: dict[Forbidden, None] = {}
    for pod in ctx.snapshot.bound:
        node = nodes.get(pod.node_name)
        for term in pod.anti_affinity:
            value = node.labels.get(term.topology_key) if node is not None else None
            if value is not None:  # a node without the key is in no domain of this term
                found[Forbidden(term, pod.namespace, term.topology_key, value)] = None
    return InterPodAntiAffinity(tuple(found), ctx.snapshot.namespace_labels)
