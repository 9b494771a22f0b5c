"""The cluster as the kube-scheduler emulation sees it between two pods: free capacity, the pods on
each node (for the stateful rules' own checks, NodePorts'), and those pods indexed for the rules
that count them.

Pods are grouped into label classes (namespace, labels, terminating); a :class:`PodCounter` is
the number of pods per node whose class a predicate selects (the pods an affinity term or a
spread selector matches), built on first use and kept up to date as pods are placed. Carriers
of rules that bind *other* pods (required anti-affinity, and the affinity terms the
InterPodAffinity score reads) are indexed by term.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from kubeplace.kube.nominated import held_room
from kubeplace.kube.objects import (
    CPU,
    HONOR,
    MEMORY,
    Pod,
    PodAffinityTerm,
    Requirement,
    Snapshot,
    SpreadConstraint,
)
from kubeplace.kube.pod_affinity import in_scope, selects
from kubeplace.models.plugins import node_affinity, taint_toleration
from kubeplace.models.problem import BoolArray, IntArray

NON_ZERO_CPU = 100
"""milli-CPU the scheduler's scores assume for a pod without a CPU request (``schedutil``)."""
NON_ZERO_MEMORY = 200 * 1024 * 1024
HARD_POD_AFFINITY_WEIGHT = 1
"""InterPodAffinityArgs.hardPodAffinityWeight default: an existing pod's required affinity
term matching the incoming pod counts this much in the score."""

LabelClass = tuple[str, Mapping[str, str], bool]
"""(namespace, labels, terminating)"""
ClassPredicate = Callable[[LabelClass], bool]
K = TypeVar("K", bound=Hashable)


def spread_counted(namespace: str, selector: tuple[Requirement, ...] | None) -> ClassPredicate:
    """countPodsMatchSelector: same namespace, not terminating, a selector that is not empty."""
    def counted(cls: LabelClass) -> bool:
        return cls[0] == namespace and not cls[2] and bool(selector) and selects(selector, cls[1])
    return counted


def affinity_selects(pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]],
                     terms: Sequence[PodAffinityTerm] | None = None) -> ClassPredicate:
    """``AffinityTerm.Matches`` for every one of the pod's terms (default: its required
    affinity); namespaceSelectors against the namespaces' labels."""
    chosen = pod.affinity if terms is None else terms

    def matched(cls: LabelClass) -> bool:
        return all(in_scope(t, pod.namespace, cls[0], namespace_labels) and selects(t.selector, cls[1])
                   for t in chosen)
    return matched


def spread_eligible(cluster: Cluster, pod: Pod, constraint: SpreadConstraint) -> BoolArray:
    """The nodes a constraint's inclusion policies keep: the pod's nodeSelector and required
    node affinity (nodeAffinityPolicy Honor), its tolerations of NoSchedule/NoExecute taints
    (nodeTaintsPolicy Honor). The topology keys are checked apart."""
    mask = np.ones(cluster.n, dtype=np.bool_)
    if constraint.node_affinity_policy == HONOR:
        affinity = node_affinity.NodeAffinity((), True)
        mask &= cluster.node_mask(("NodeAffinity", affinity.pod_key(pod)), lambda: affinity.filter(pod, cluster.nodes))
    if constraint.node_taints_policy == HONOR:
        taints = taint_toleration.TaintToleration()
        mask &= cluster.node_mask(("TaintToleration", taints.pod_key(pod)), lambda: taints.filter(pod, cluster.nodes))
    return mask


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

    def reaches(self, cls: int, cluster: Cluster) -> bool:
        """``AffinityTerm.Matches(incoming, nsLabels(incoming))``."""
        if cls not in self.memo:
            namespace, labels, _ = cluster.classes[cls]
            self.memo[cls] = in_scope(self.term, self.owner_namespace, namespace, cluster.namespace_labels) and selects(
                self.term.selector, labels)
        return self.memo[cls]


class Cluster:
    def __init__(self, snapshot: Snapshot, pods: tuple[Pod, ...]) -> None:
        self.nodes = snapshot.nodes
        self.n = len(self.nodes)
        self.index = {node.name: i for i, node in enumerate(self.nodes)}
        self.namespace_labels = snapshot.namespace_labels
        names = {r for node in self.nodes for r in node.allocatable}
        names |= {r for pod in (*pods, *snapshot.bound, *snapshot.nominated) for r in pod.requests}
        self.nominated = snapshot.nominated
        self._held: dict[int, IntArray] = {}
        self.resources = tuple(sorted(names))
        self.allocatable = np.array([[node.allocatable.get(r, 0) for r in self.resources] for node in self.nodes],
                                    dtype=np.int64).reshape(self.n, len(self.resources))
        self.used = np.zeros_like(self.allocatable)
        self.cpu_memory = np.array([self.resources.index(CPU) if CPU in self.resources else -1,
                                    self.resources.index(MEMORY) if MEMORY in self.resources else -1])
        self.non_zero_used = np.zeros((self.n, 2), dtype=np.int64)
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
        for pod in snapshot.bound:
            if pod.node_name in self.index:
                self.commit(pod, self.index[pod.node_name])

    def requests(self, pod: Pod) -> IntArray:
        return np.array([pod.requests.get(r, 0) for r in self.resources], dtype=np.int64)

    def held(self, priority: int) -> IntArray:
        """(N, R) the requests of the pods nominated to each node with ``priority`` or more."""
        if priority not in self._held:
            rows = np.zeros_like(self.allocatable)
            for name, room in held_room(self.nominated, priority).items():
                if name in self.index:
                    rows[self.index[name]] = [room.get(r, 0) for r in self.resources]
            self._held[priority] = rows
        return self._held[priority]

    def non_zero_requests(self, pod: Pod) -> IntArray:
        """CPU and memory as the scores count them: a pod without a request counts the
        scheduler's defaults (per pod here, per container in the kube-scheduler)."""
        return np.array([pod.requests.get(CPU, 0) or NON_ZERO_CPU, pod.requests.get(MEMORY, 0) or NON_ZERO_MEMORY],
                        dtype=np.int64)

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
            self.classes.append((pod.namespace, pod.labels, pod.deleting))
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
        self.used[i] += self.requests(pod)
        self.non_zero_used[i] += self.non_zero_requests(pod)
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
