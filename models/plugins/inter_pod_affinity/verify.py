"""InterPodAffinity's independent verifier check, in the plan's replay (``kube.replay``): each
pod's required affinity and anti-affinity, and the running pods' anti-affinity, against the pods
placed before it; and the order in which the affinity carriers replay: first the *starters*
(the first pod of a self-affine group, which the kube-scheduler lets through when nothing
matching its terms runs yet), last the other carriers, supporters' groups first.

Semantics (k8s.io/kubernetes v1.36 ``interpodaffinity/filtering.go``): counts per (topology key,
value) of existing pods matching the incoming pod's affinity terms (a pod must match ALL of
them), its anti-affinity terms, and existing pods' anti-affinity terms matching the incoming pod.
A node lacking an affinity key fails; the first pod of a group passes when nothing matches
anywhere and it matches its own terms. Anti-affinity is symmetric, affinity is not. Written apart
from the model on purpose: imports only ``kubeplace.kube`` and the node-affinity verifier check
(label selectors); namespace scopes are re-implemented here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubeplace.kube.objects import Node, Pod, PodAffinityTerm, Requirement, Snapshot
from kubeplace.kube.replay import Failure, Indexes, Item, Placed, ReplayCheck
from kubeplace.models.plugins.node_affinity.verify import selector_matches

NAME = "InterPodAffinity"
AFFINITY_MISMATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_MISMATCH = "node(s) didn't satisfy existing pods anti-affinity rules"


@dataclass(frozen=True)
class _OwnTerm:
    """An incoming pod's term with its namespaces resolved as PreFilter does
    (``mergeAffinityTermNamespacesIfNotEmpty``): the named namespaces plus the Namespace objects
    a non-empty namespaceSelector selects; ``{}`` selects every namespace."""

    selector: tuple[Requirement, ...] | None
    namespaces: frozenset[str]
    every_namespace: bool
    key: str

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return (self.every_namespace or namespace in self.namespaces) and selector_matches(self.selector, labels)

    def describe(self) -> str:
        selector = "null selector" if self.selector is None else _describe(self.selector)
        return f"{selector} on {self.key}"


class _Matched:
    """Existing pods matching ALL of ``terms``, counted per (key, value) of their node, one
    count per term (the kube-scheduler's ``topologyToMatchedTermCount``)."""

    def __init__(self, terms: tuple[_OwnTerm, ...]) -> None:
        self.terms = terms
        self.pairs: dict[tuple[str, str], int] = {}
        self.memo: dict[int, bool] = {}

    def selects(self, cls: int, placed: Placed) -> bool:
        if cls not in self.memo:
            namespace, labels = placed.classes[cls]
            self.memo[cls] = all(t.matches(namespace, labels) for t in self.terms)
        return self.memo[cls]

    def add(self, node: Node, count: int = 1) -> None:
        for term in self.terms:
            value = node.labels.get(term.key)
            if value is not None:
                self.pairs[(term.key, value)] = self.pairs.get((term.key, value), 0) + count


@dataclass
class _Forbidden:
    """One existing pod's anti-affinity term (owner's namespace included): the values of its
    key where carriers run, each with the first carrier's name."""

    term: PodAffinityTerm
    owner_namespace: str
    values: dict[str, str] = field(default_factory=dict)
    memo: dict[int, bool] = field(default_factory=dict)

    def reaches(self, cls: int, placed: Placed) -> bool:
        """``AffinityTerm.Matches(incoming, nsLabels(incoming))``."""
        if cls not in self.memo:
            namespace, labels = placed.classes[cls]
            term = self.term
            if not term.namespaces and term.namespace_selector is None:
                in_scope = namespace == self.owner_namespace
            else:
                namespace_labels = placed.namespace_labels.get(namespace, {})
                in_scope = namespace in term.namespaces or selector_matches(term.namespace_selector, namespace_labels)
            self.memo[cls] = in_scope and selector_matches(term.selector, labels)
        return self.memo[cls]


class AffinityReplay:
    """The pods matching each term, and the running pods' anti-affinity, as the replay leaves them."""

    name = NAME

    def __init__(self, placed: Placed) -> None:
        self.placed = placed
        self.matched: Indexes[_Matched] = Indexes(lambda matched, cls: matched.selects(cls, placed))
        self.forbidden: dict[tuple[str, PodAffinityTerm], _Forbidden] = {}
        self.own_terms_of: dict[str, tuple[tuple[_OwnTerm, ...], tuple[_OwnTerm, ...]]] = {}

    def check(self, pod: Pod, node: Node, count: int) -> Failure | None:
        affinity, anti_affinity = self.own_terms(pod)
        if affinity:
            matched = self.matched_by(affinity)
            missing = [t.key for t in affinity if t.key not in node.labels]
            if missing:
                return AFFINITY_MISMATCH, f"{AFFINITY_MISMATCH}: node has no label {missing[0]}"
            unmet = [t for t in affinity if matched.pairs.get((t.key, node.labels[t.key]), 0) <= 0]
            first_pod = not matched.pairs and matched.selects(self.placed.class_of(pod), self.placed)
            if unmet and not first_pod:
                t = unmet[0]
                return AFFINITY_MISMATCH, (
                    f"{AFFINITY_MISMATCH}: no pod matching all its terms in {t.key}={node.labels[t.key]} "
                    f"(term {t.describe()})")
        for term in anti_affinity:
            value = node.labels.get(term.key)
            if value is not None and self.matched_by((term,)).pairs.get((term.key, value), 0) > 0:
                return ANTI_AFFINITY_MISMATCH, (
                    f"{ANTI_AFFINITY_MISMATCH}: a pod matching {term.describe()} runs in {term.key}={value}")
        cls = self.placed.class_of(pod)
        for forbidden in self.forbidden.values():
            value = node.labels.get(forbidden.term.topology_key)
            if value is not None and value in forbidden.values and forbidden.reaches(cls, self.placed):
                return EXISTING_ANTI_AFFINITY_MISMATCH, (
                    f"{EXISTING_ANTI_AFFINITY_MISMATCH}: {forbidden.values[value]} forbids "
                    f"{forbidden.term.topology_key}={value} to pods like this one")
        return None

    def commit(self, pod: Pod, node: Node, count: int) -> None:
        for matched in self.matched.counting(self.placed.class_of(pod)):
            matched.add(node, count)
        for term in pod.anti_affinity:
            forbidden = self.forbidden.setdefault((pod.namespace, term), _Forbidden(term, pod.namespace))
            value = node.labels.get(term.topology_key)
            if value is not None:
                forbidden.values.setdefault(value, pod.key)

    def first_and_last(self, ranked: list[Item]) -> tuple[list[Item], list[Item]]:
        """The starters first; the other carriers last, by group."""
        carriers = [item for item in ranked if item[0].affinity]
        free = [item for item in ranked if not item[0].affinity]
        starters = self._starters(carriers, free)
        groups = self._group_order(carriers)
        started = {placement for _, _, placement in starters}
        later = [item for item in carriers if item[2] not in started]
        later.sort(key=lambda item: groups[self.own_terms(item[0])[0]])
        return starters, later

    def arrange(self, middle: list[Item]) -> list[Item]:
        return middle

    def own_terms(self, pod: Pod) -> tuple[tuple[_OwnTerm, ...], tuple[_OwnTerm, ...]]:
        if pod.key not in self.own_terms_of:
            self.own_terms_of[pod.key] = (tuple(self._resolve(t, pod.namespace) for t in pod.affinity),
                                          tuple(self._resolve(t, pod.namespace) for t in pod.anti_affinity))
        return self.own_terms_of[pod.key]

    def _resolve(self, term: PodAffinityTerm, namespace: str) -> _OwnTerm:
        names = set(term.namespaces) if term.namespaces or term.namespace_selector is not None else {namespace}
        if term.namespace_selector:
            names |= {n for n, labels in self.placed.namespace_labels.items()
                      if selector_matches(term.namespace_selector, labels)}
        return _OwnTerm(term.selector, frozenset(names), term.namespace_selector == (), term.topology_key)

    def matched_by(self, terms: tuple[_OwnTerm, ...]) -> _Matched:
        by_key = self.matched.by_key
        if terms not in by_key:
            matched = _Matched(terms)
            for cls, where in self.placed.placed_on.items():
                if matched.selects(cls, self.placed):
                    for node_name, _, count in where:
                        matched.add(self.placed.nodes[node_name], count)
            by_key[terms] = matched
        return by_key[terms]

    def _starters(self, carriers: list[Item], free: list[Item]) -> list[Item]:
        """Per group of carriers with the same terms, the first carrier (queue order) in a domain
        that neither a bound pod nor a pod without required affinity supports, when the group can
        have a first pod at all (it matches its own terms, nothing matching runs yet). A starter
        goes before the starters whose terms it matches (else they would not be first)."""
        placed = self.placed
        starters = []
        free_by_class: dict[int, list[Node]] = {}
        for pod, node, _ in free:
            free_by_class.setdefault(placed.class_of(pod), []).append(node)
        by_group: dict[tuple[_OwnTerm, ...], list[Item]] = {}
        for item in carriers:
            by_group.setdefault(self.own_terms(item[0])[0], []).append(item)
        for terms, members in by_group.items():
            matched = self.matched_by(terms)
            if matched.pairs:
                continue
            supported = {(t.key, value) for cls, nodes in free_by_class.items() if matched.selects(cls, placed)
                         for node in nodes for t in terms if (value := node.labels.get(t.key)) is not None}
            for pod, node, placement in members:
                unsupported = any((t.key, node.labels.get(t.key)) not in supported for t in terms)
                if unsupported and matched.selects(placed.class_of(pod), placed):
                    starters.append((pod, node, placement))
                    break
        before = {(j, i) for i, a in enumerate(starters) for j, b in enumerate(starters)
                  if i != j and self.matched_by(self.own_terms(b[0])[0]).selects(placed.class_of(a[0]), placed)}
        return [starters[i] for i in _topological(len(starters), before)]

    def _group_order(self, carriers: list[Item]) -> dict[tuple[_OwnTerm, ...], int]:
        """Groups of carriers ranked so that a group whose pods support another's terms comes first
        (the retries would find that order too; this keeps them few)."""
        groups: dict[tuple[_OwnTerm, ...], list[Pod]] = {}
        for pod, _, _ in carriers:
            groups.setdefault(self.own_terms(pod)[0], []).append(pod)
        keys = list(groups)
        before = {(i, j) for i, g in enumerate(keys) for j, h in enumerate(keys)
                  if i != j and any(self.matched_by(h).selects(self.placed.class_of(p), self.placed)
                                    for p in groups[g])}
        return {keys[i]: rank for rank, i in enumerate(_topological(len(keys), before))}


def _topological(count: int, before: set[tuple[int, int]]) -> list[int]:
    """0..count-1 so that i comes before j for each (i, j) in ``before`` where it can (Kahn's
    algorithm, lowest index first); a cycle is broken at its lowest index."""
    waiting = {j: {i for i, k in before if k == j} for j in range(count)}
    out: list[int] = []
    while waiting:
        ready = min((j for j, preds in waiting.items() if not preds), default=min(waiting))
        out.append(ready)
        del waiting[ready]
        for preds in waiting.values():
            preds.discard(ready)
    return out


def _describe(selector: Sequence[Requirement]) -> str:
    if not selector:
        return "every pod"
    return ",".join(f"{r.key} {r.operator} [{','.join(r.values)}]" if r.values else f"{r.key} {r.operator}"
                    for r in selector)


def applies(snapshot: Snapshot) -> bool:
    """Some pending pod has a pod (anti-)affinity term, or some running pod an anti-affinity term
    (the only rule of a running pod that reaches a new one); else every placement passes."""
    return (any(pod.affinity or pod.anti_affinity for pod in snapshot.pending)
            or any(pod.anti_affinity for pod in snapshot.bound))


CHECK = ReplayCheck(applies, AffinityReplay)
