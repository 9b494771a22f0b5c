"""The pods of each node as the kube-scheduler emulation (``solver.emulate``) sees them between
two pods, indexed for the stateful rules' checks (``models/plugins/<rule>/emulate.py``) and the
emulation's scores; the emulation's cluster (``solver.emulate.node_state.Cluster``) adds capacity.

Pods are grouped into label classes (namespace, labels, terminating); a :class:`PodCounter` is
the number of pods per node whose class a predicate selects (the pods an affinity term or a
spread selector matches), built on first use and kept up to date as pods are placed. Carriers
of rules that bind *other* pods (required anti-affinity, and the affinity terms the
InterPodAffinity score reads) are indexed by term.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, overload

import numpy as np

from kubeplace.kube.objects import Pod, PodAffinityTerm, Snapshot
from kubeplace.kube.pod_affinity import in_scope, selects
from kubeplace.models.problem import BoolArray, IntArray

HARD_POD_AFFINITY_WEIGHT = 1
"""InterPodAffinityArgs.hardPodAffinityWeight default: an existing pod's required affinity
term matching the incoming pod counts this much in the score."""

LabelClass = tuple[str, Mapping[str, str], bool]
"""(namespace, labels, terminating)"""
ClassPredicate = Callable[[LabelClass], bool]
K = TypeVar("K", bound=Hashable)


def label_class(pod: Pod) -> LabelClass:
    return pod.namespace, pod.labels, pod.deleting


@dataclass
class PodCounter:
    """Pods per node (bound and placed) whose label class ``selects``."""

    selects: ClassPredicate
    counts: IntArray
    memo: dict[int, bool] = field(default_factory=dict)

    def matches(self, cls: int, classes: list[LabelClass]) -> bool:
        if cls not in self.memo:
            self.memo[cls] = self.selects(classes[cls])
        return self.memo[cls]


@dataclass
class TermCarriers:
    """Running pods carrying one term (with their namespace and the term's weight, negative for
    anti-affinity in scores): how many per node, and which incoming classes the term reaches."""

    term: PodAffinityTerm
    owner_namespace: str
    weight: int
    per_node: IntArray
    memo: dict[int, bool] = field(default_factory=dict)

    def reaches(self, cls: int, pods: EmulatedPods) -> bool:
        """``AffinityTerm.Matches(incoming, nsLabels(incoming))``."""
        if cls not in self.memo:
            namespace, labels, _ = pods.classes[cls]
            self.memo[cls] = in_scope(self.term, self.owner_namespace, namespace, pods.namespace_labels) and selects(
                self.term.selector, labels)
        return self.memo[cls]


class EmulatedPods:
    def __init__(self, snapshot: Snapshot) -> None:
        self.nodes = snapshot.nodes
        self.n = len(self.nodes)
        self.index = {node.name: i for i, node in enumerate(self.nodes)}
        self.namespace_labels = snapshot.namespace_labels
        self.nominated = snapshot.nominated
        self.pods_on: list[list[Pod]] = [[] for _ in self.nodes]
        """The pods on each node (bound, then placed), for the stateful rules' checks."""
        self.domains: dict[str, tuple[IntArray, int]] = {}
        self.classes: list[LabelClass] = []
        self.class_ids: dict[tuple[str, frozenset[tuple[str, str]], bool], int] = {}
        self.class_nodes: list[dict[int, int]] = []
        self.counters: dict[Hashable, PodCounter] = {}
        self.anti_affinity: dict[tuple[str, PodAffinityTerm], TermCarriers] = {}
        self.scored_terms: dict[tuple[str, PodAffinityTerm, int], TermCarriers] = {}
        self.node_masks: dict[Hashable, BoolArray] = {}
        """Per-node answers that depend on the pod's spec only (eligibility, static scores)."""
        self.node_scores: dict[Hashable, IntArray] = {}

    def with_nominated(self, pod: Pod) -> Sequence[Sequence[Pod]]:
        """Per node, its pods and those nominated to it with the pod's priority or more."""
        held: list[list[Pod]] = [[] for _ in range(self.n)]
        for other in self.nominated:
            if other.priority >= pod.priority and other.nominated_node in self.index:
                held[self.index[other.nominated_node]].append(other)
        return _NodePods(self.pods_on, held)

    def node_mask(self, key: Hashable, compute: Callable[[], BoolArray]) -> BoolArray:
        if key not in self.node_masks:
            self.node_masks[key] = compute()
        return self.node_masks[key]

    def node_score(self, key: Hashable, compute: Callable[[], IntArray]) -> IntArray:
        if key not in self.node_scores:
            self.node_scores[key] = compute()
        return self.node_scores[key]

    def domain(self, key: str) -> tuple[IntArray, int]:
        """Each node's domain of ``key`` as an index (-1 without the label), and how many."""
        if key not in self.domains:
            values: dict[str, int] = {}
            ids = [values.setdefault(v, len(values)) if (v := node.labels.get(key)) is not None else -1
                   for node in self.nodes]
            self.domains[key] = (np.array(ids, dtype=np.int64), len(values))
        return self.domains[key]

    def per_domain(self, key: str, per_node: IntArray, nodes: BoolArray | None = None) -> IntArray:
        """Sums of ``per_node`` by domain of ``key`` (over ``nodes`` only, if given)."""
        dom, size = self.domain(key)
        take = dom >= 0 if nodes is None else (dom >= 0) & nodes
        return np.bincount(dom[take], weights=per_node[take], minlength=size).astype(np.int64)

    def in_domain(self, key: str, per_node: IntArray, nodes: BoolArray | None = None) -> IntArray:
        """For each node, the sum of ``per_node`` over its domain of ``key`` (over ``nodes``
        only, if given); 0 for a node without the label."""
        dom = self.domain(key)[0]
        sums = self.per_domain(key, per_node, nodes)
        return np.where(dom >= 0, sums[np.maximum(dom, 0)] if len(sums) else 0, 0)

    def class_of(self, pod: Pod) -> int:
        key = (pod.namespace, frozenset(pod.labels.items()), pod.deleting)
        if key not in self.class_ids:
            self.class_ids[key] = len(self.classes)
            self.classes.append(label_class(pod))
            self.class_nodes.append({})
        return self.class_ids[key]

    def counter(self, key: Hashable, selects_class: ClassPredicate) -> PodCounter:
        """The pods per node that ``selects_class``, under a key naming that predicate."""
        if key not in self.counters:
            counter = PodCounter(selects_class, np.zeros(self.n, dtype=np.int64))
            for cls, on_nodes in enumerate(self.class_nodes):
                if on_nodes and counter.matches(cls, self.classes):
                    for i, count in on_nodes.items():
                        counter.counts[i] += count
            self.counters[key] = counter
        return self.counters[key]

    def commit(self, pod: Pod, i: int) -> None:
        self.pods_on[i].append(pod)
        cls = self.class_of(pod)
        self.class_nodes[cls][i] = self.class_nodes[cls].get(i, 0) + 1
        for counter in self.counters.values():
            if counter.matches(cls, self.classes):
                counter.counts[i] += 1
        for term in pod.anti_affinity:
            self._carrier(self.anti_affinity, (pod.namespace, term), term, pod.namespace, 1).per_node[i] += 1
        weighted = [(t, HARD_POD_AFFINITY_WEIGHT) for t in pod.affinity]
        weighted += [(t, t.weight) for t in pod.preferred_affinity]
        weighted += [(t, -t.weight) for t in pod.preferred_anti_affinity]
        for term, weight in weighted:
            carriers = self._carrier(self.scored_terms, (pod.namespace, term, weight), term, pod.namespace, weight)
            carriers.per_node[i] += 1

    def _carrier(self, registry: dict[K, TermCarriers], key: K, term: PodAffinityTerm, namespace: str,
                 weight: int) -> TermCarriers:
        if key not in registry:
            registry[key] = TermCarriers(term, namespace, weight, np.zeros(self.n, dtype=np.int64))
        return registry[key]


class _NodePods(Sequence[Sequence[Pod]]):
    """Per node, its pods and those nominated to it, joined only for the nodes a check reads."""

    def __init__(self, on: Sequence[Sequence[Pod]], held: Sequence[Sequence[Pod]]) -> None:
        self.on, self.held = on, held

    def __len__(self) -> int:
        return len(self.on)

    @overload
    def __getitem__(self, i: int) -> Sequence[Pod]: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Sequence[Pod]]: ...

    def __getitem__(self, i: int | slice) -> Sequence[Pod] | Sequence[Sequence[Pod]]:
        if isinstance(i, slice):
            return [self[k] for k in range(len(self))[i]]
        return [*self.on[i], *self.held[i]]
