"""Topology domains and the canonical identities of the rules that count pods in them.

A domain is one value of a node label (a topology key); a node without the label is in no
domain of it. The inter-pod rules are identified by what they read, so that pods carrying the
same rule share one identity whatever else differs:

- :class:`TermId`: a pod (anti-)affinity term with its namespace scope resolved against the
  carrier's namespace (selector, namespaces, namespaceSelector, topology key);
- :class:`SpreadId`: a DoNotSchedule spread constraint as the kube-scheduler counts it (the
  carrier's namespace, selector, key, maxSkew, minDomains and the inputs of its eligible nodes).

:class:`Matcher` evaluates which pods an identity selects, memoised per distinct
(namespace, labels), so the cost grows with label sets x identities, not pods x identities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.objects import HONOR, Node, Pod, PodAffinityTerm, Requirement, SelectorTerm, Toleration
from kubeplace.kube.pod_affinity import selects
from kubeplace.kube.selectors import matches
from kubeplace.models.problem import BoolArray, IntArray

Selector = tuple[Requirement, ...] | None


def label_domains(label: str, nodes: Sequence[Node], unlabelled_apart: bool = False,
                  mask: BoolArray | None = None) -> IntArray:
    """Each node's index among the sorted values of ``label`` (over the nodes of ``mask``);
    nodes without it (or outside ``mask``) get -1, or with ``unlabelled_apart`` one more
    index of their own."""
    inside = [True] * len(nodes) if mask is None else [bool(m) for m in mask]
    values = sorted({n.labels[label] for n, keep in zip(nodes, inside, strict=True) if keep and label in n.labels})
    index = {v: d for d, v in enumerate(values)}
    missing = len(values) if unlabelled_apart else -1
    return np.array([index[n.labels[label]] if keep and label in n.labels else missing
                     for n, keep in zip(nodes, inside, strict=True)], dtype=np.int64)


def n_domains(domain: IntArray) -> int:
    return int(domain.max()) + 1 if len(domain) and domain.max() >= 0 else 0


def canonical(selector: Selector) -> Selector:
    """The same requirements in one order (a selector ANDs them)."""
    if selector is None:
        return None
    return tuple(sorted(set(selector), key=lambda r: (r.key, r.operator, r.values)))


@dataclass(frozen=True)
class TermId:
    """A pod (anti-)affinity term as it selects pods: the namespace scope is the carrier's
    namespace when the term names none (``namespaces`` empty, no namespaceSelector)."""

    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Selector
    topology_key: str
    hashed: int = field(default=0, compare=False, repr=False)
    """The hash, computed once (terms are dictionary keys in the hot loops)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "hashed", hash((self.selector, self.namespaces, self.namespace_selector,
                                                 self.topology_key)))

    def __hash__(self) -> int:
        return self.hashed

    @staticmethod
    def of(term: PodAffinityTerm, owner_namespace: str) -> TermId:
        default = not term.namespaces and term.namespace_selector is None
        return TermId(canonical(term.selector), frozenset((owner_namespace,) if default else term.namespaces),
                      canonical(term.namespace_selector), term.topology_key)

    def in_scope(self, namespace: str, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        if namespace in self.namespaces:
            return True
        return self.namespace_selector is not None and matches(self.namespace_selector,
                                                               namespace_labels.get(namespace, {}))

    def describe(self) -> str:
        if self.selector is None:
            return f"null selector on {self.topology_key}"
        text = ",".join(f"{r.key} {r.operator} [{','.join(r.values)}]" if r.values else f"{r.key} {r.operator}"
                        for r in self.selector) or "every pod"
        return f"{text} on {self.topology_key}"


GroupId = tuple[TermId, ...]
"""The required affinity terms of a pod, sorted: carriers with equal ones form one group."""


def group_id(pod: Pod) -> GroupId:
    return tuple(sorted({TermId.of(t, pod.namespace) for t in pod.affinity}, key=repr))


@dataclass(frozen=True)
class SpreadId:
    """A DoNotSchedule spread constraint as the kube-scheduler counts it for one carrier:
    pods of ``namespace`` that the (merged) selector matches, not terminating, on the eligible
    nodes (every hard key of the carrier, its node affinity under nodeAffinityPolicy Honor,
    its tolerations under nodeTaintsPolicy Honor)."""

    namespace: str
    selector: Selector
    topology_key: str
    max_skew: int
    min_domains: int
    hard_keys: tuple[str, ...]
    node_affinity: tuple[tuple[tuple[str, str], ...], tuple[SelectorTerm, ...] | None] | None
    tolerations: tuple[Toleration, ...] | None

    def counts(self, pod: Pod) -> bool:
        """``countPodsMatchSelector``: same namespace, not terminating, a selector with requirements."""
        return pod.namespace == self.namespace and not pod.deleting and bool(self.selector) and selects(
            self.selector, pod.labels)

    def describe(self) -> str:
        selector = "null selector" if self.selector is None else ",".join(
            f"{r.key} {r.operator} [{','.join(r.values)}]" if r.values else f"{r.key} {r.operator}"
            for r in self.selector) or "every pod"
        return f"{selector} on {self.topology_key} maxSkew {self.max_skew}"


def spread_ids(pod: Pod) -> tuple[SpreadId, ...]:
    """The pod's DoNotSchedule constraints (selectors already merged with matchLabelKeys)."""
    if not pod.spread:
        return ()
    hard = [c for c in pod.spread if c.hard]
    keys = tuple(sorted({c.topology_key for c in hard}))
    affinity = (tuple(sorted(pod.node_selector.items())), pod.required_terms)
    return tuple(SpreadId(pod.namespace, canonical(c.selector), c.topology_key, c.max_skew, c.min_domains, keys,
                          affinity if c.node_affinity_policy == HONOR else None,
                          pod.tolerations if c.node_taints_policy == HONOR else None) for c in hard)


@dataclass
class Matcher:
    """Which pods a term selects (``AffinityTerm.Matches``), memoised per label class (a distinct
    namespace and label set) and term: the cost grows with label classes x terms, not pods."""

    namespace_labels: Mapping[str, Mapping[str, str]]
    classes: dict[tuple[str, frozenset[tuple[str, str]]], int] = field(default_factory=dict)
    by_pod: dict[int, int] = field(default_factory=dict)
    """id(pod) -> its label class; ``seen`` keeps those pods alive, so an id is never reused."""
    seen: list[Pod] = field(default_factory=list)
    memo: dict[tuple[TermId, int], bool] = field(default_factory=dict)

    def label_class(self, pod: Pod) -> int:
        found = self.by_pod.get(id(pod))
        if found is None:
            found = self.classes.setdefault((pod.namespace, frozenset(pod.labels.items())), len(self.classes))
            self.by_pod[id(pod)] = found
            self.seen.append(pod)
        return found

    def matches(self, term: TermId, pod: Pod) -> bool:
        key = (term, self.label_class(pod))
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = term.in_scope(pod.namespace, self.namespace_labels) and selects(
                term.selector, pod.labels)
        return found

    def matches_all(self, terms: Sequence[TermId], pod: Pod) -> bool:
        """A pod supports a group when it matches every term (``podMatchesAllAffinityTerms``,
        false for no terms)."""
        return bool(terms) and all(self.matches(t, pod) for t in terms)
