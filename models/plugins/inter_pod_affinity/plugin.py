"""InterPodAffinity: required pod affinity and anti-affinity, with running pods and within the batch.

The kube-scheduler's filter (``interpodaffinity/filtering.go``) checks, in this order, the
pod's own affinity (a supporter, a pod matching all its terms, in each term's domain; the first
pod of a self-affine group passes when nothing matching runs yet), its own anti-affinity
(no matching pod in the term's domain) and the running pods' anti-affinity terms that match it
(symmetry). What depends on the running pods only is three filters here, each with the
kube-scheduler's reason; what depends on other pods of the batch is rules over classes and
domains:

- anti-affinity between pending pods: an :class:`~models.problem.Exclusion` per term, or a
  :class:`~models.problem.GroupCap` of one per domain when the carriers are exactly the pods
  the term matches (replicas keeping apart);
- affinity: an :class:`~models.problem.Attraction` per group of carriers with the same terms.

Anti-affinity is symmetric and affinity is not: a running pod's required affinity binds no one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from kubeplace.kube.objects import Node, Pod
from kubeplace.models.domains import GroupId, Matcher, TermId, group_id, label_domains, n_domains
from kubeplace.models.framework import ClassView, RunContext
from kubeplace.models.plugins.inter_pod_affinity.args import InterPodAffinityArgs
from kubeplace.models.plugins.inter_pod_affinity.score import InterPodAffinityScore, inter_pod_score
from kubeplace.models.problem import UNCAPPED, Attraction, BoolArray, Exclusion, GroupCap, IntArray, Rule

NAME = "InterPodAffinity"
AFFINITY_MISMATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_MISMATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
NAMESPACE_SELECTOR_NEEDS_NAMESPACES = "a pod affinity namespaceSelector needs the snapshot's Namespace objects"


def anti_ids(pod: Pod) -> tuple[TermId, ...]:
    return tuple(sorted({TermId.of(t, pod.namespace) for t in pod.anti_affinity}, key=repr))


@dataclass(frozen=True)
class Index:
    """What the three filters and the rules read, built once per run from the snapshot."""

    nodes: tuple[Node, ...]
    matcher: Matcher
    existing: Mapping[TermId, frozenset[str]]
    """Running pods' anti-affinity: each term and the values of its key where carriers run."""
    forbidden_by_running: Mapping[TermId, frozenset[str]]
    """Pending pods' anti-affinity terms: the values of the key where a pod they match runs."""
    support: Mapping[GroupId, tuple[frozenset[str], ...]]
    """Per pending group: per term, the values of its key where a running supporter is."""
    running_anchor: Mapping[GroupId, bool]
    """Per pending group: a running pod matching all its terms sits on a node with one of the
    keys (the first-pod exception is then over)."""
    pending_support: Mapping[GroupId, bool]
    """Per pending group: some pending pod without required affinity matches all its terms."""
    live_terms: tuple[TermId, ...]
    live_groups: tuple[GroupId, ...]
    own_rules: dict[int, tuple[tuple[TermId, ...], GroupId]] = field(default_factory=dict)
    """id(pod) -> its anti-affinity terms and affinity group (the matcher keeps the pods alive)."""
    selected: dict[int, tuple[tuple[TermId, ...], tuple[GroupId, ...], tuple[TermId, ...]]] = field(
        default_factory=dict)
    """label class -> the live terms and groups that select it, and the running pods' terms that do."""

    @staticmethod
    def build(ctx: RunContext) -> Index:
        snap = ctx.snapshot
        matcher = Matcher(snap.namespace_labels)
        node_of = snap.node_by_name
        existing: dict[TermId, set[str]] = {}
        for pod in snap.bound:  # (the running pods with anti-affinity: few, so looked at first)
            node = node_of.get(pod.node_name) if pod.anti_affinity else None
            if node is None:
                continue
            for term in anti_ids(pod):
                if term.topology_key in node.labels:
                    existing.setdefault(term, set()).add(node.labels[term.topology_key])
        live_terms = tuple(sorted({t for p in snap.pending for t in anti_ids(p)}, key=repr))
        live_groups = tuple(sorted({g for p in snap.pending if (g := group_id(p))}, key=repr))
        # (what only the batch's own rules read is not looked up when no pending pod has any)
        running_by_class = (_by_label_class(matcher, [(p, node_of[p.node_name]) for p in snap.bound
                                                      if p.node_name in node_of])
                            if live_terms or live_groups else [])
        forbidden = {t: frozenset(n.labels[t.topology_key] for p, nodes in running_by_class for n in nodes
                                  if t.topology_key in n.labels and matcher.matches(t, p)) for t in live_terms}
        free = ([p for p, _ in _by_label_class(matcher, [(p, None) for p in snap.pending if not p.affinity])]
                if live_groups else [])
        support, anchor, pending_support = {}, {}, {}
        for g in live_groups:
            supporters = [n for p, nodes in running_by_class if matcher.matches_all(g, p) for n in nodes]
            support[g] = tuple(frozenset(n.labels[t.topology_key] for n in supporters if t.topology_key in n.labels)
                               for t in g)
            anchor[g] = any(t.topology_key in n.labels for n in supporters for t in g)
            pending_support[g] = any(matcher.matches_all(g, p) for p in free)
        return Index(snap.nodes, matcher, {t: frozenset(v) for t, v in existing.items()}, forbidden, support,
                     anchor, pending_support, live_terms, live_groups)

    def own(self, pod: Pod) -> tuple[tuple[TermId, ...], GroupId]:
        """The pod's anti-affinity terms and affinity group, once per pod."""
        self.matcher.label_class(pod)  # keeps the pod alive while its id is a key
        found = self.own_rules.get(id(pod))
        if found is None:
            found = self.own_rules[id(pod)] = (anti_ids(pod), group_id(pod))
        return found

    def selecting(self, pod: Pod) -> tuple[tuple[TermId, ...], tuple[GroupId, ...], tuple[TermId, ...]]:
        """The live terms and groups that select the pod, and the running pods' terms that do."""
        m = self.matcher
        cls = m.label_class(pod)
        found = self.selected.get(cls)
        if found is None:
            found = self.selected[cls] = (tuple(t for t in self.live_terms if m.matches(t, pod)),
                                          tuple(g for g in self.live_groups if m.matches_all(g, pod)),
                                          tuple(t for t in self.existing if m.matches(t, pod)))
        return found

    def starter_possible(self, group: GroupId, pod: Pod) -> bool:
        return not self.running_anchor[group] and group in self.selecting(pod)[1]


def _by_label_class(matcher: Matcher, pods: Sequence[tuple[Pod, Node | None]]) -> list[tuple[Pod, list[Node]]]:
    """One pod per label class, with the nodes of all its pods."""
    out: dict[int, tuple[Pod, list[Node]]] = {}
    for pod, node in pods:
        entry = out.setdefault(matcher.label_class(pod), (pod, []))
        if node is not None:
            entry[1].append(node)
    return list(out.values())


def _outside(nodes: Sequence[Node], key: str, values: frozenset[str]) -> BoolArray:
    """True where the node has no value of ``key`` in ``values`` (or no label at all)."""
    return np.array([n.labels.get(key) not in values for n in nodes], dtype=np.bool_)


@dataclass(frozen=True)
class ExistingAntiAffinity:
    """Filter: a running pod's anti-affinity term that matches the pod keeps it out of the
    term's domains where carriers run (``satisfyExistingPodsAntiAffinity``)."""

    index: Index
    name: str = NAME
    reason: str = EXISTING_ANTI_AFFINITY_MISMATCH

    def reaching(self, pod: Pod) -> tuple[TermId, ...]:
        return self.index.selecting(pod)[2]

    def pod_key(self, pod: Pod) -> Hashable:
        return self.reaching(pod)

    def node_key(self, node: Node) -> Hashable:
        return tuple(node.labels.get(t.topology_key) for t in self.index.existing)

    def node_key_basis(self) -> object:
        return tuple(t.topology_key for t in self.index.existing)

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        mask = np.ones(len(nodes), dtype=np.bool_)
        for term in self.reaching(pod):
            mask &= _outside(nodes, term.topology_key, self.index.existing[term])
        return mask


@dataclass(frozen=True)
class OwnAntiAffinity:
    """Filter: the pod's own anti-affinity against running pods (``satisfyPodAntiAffinity``)."""

    index: Index
    name: str = NAME
    reason: str = ANTI_AFFINITY_MISMATCH

    def pod_key(self, pod: Pod) -> Hashable:
        return self.index.own(pod)[0]

    def node_key(self, node: Node) -> Hashable:
        return tuple(node.labels.get(t.topology_key) for t in self.index.live_terms)

    def node_key_basis(self) -> object:
        return tuple(t.topology_key for t in self.index.live_terms)

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        mask = np.ones(len(nodes), dtype=np.bool_)
        for term in self.index.own(pod)[0]:
            mask &= _outside(nodes, term.topology_key, self.index.forbidden_by_running.get(term, frozenset()))
        return mask


@dataclass(frozen=True)
class OwnAffinity:
    """Filter: the pod's required affinity as far as the running pods and the batch's shape
    decide it (``satisfyPodAffinity``): a node without one of the keys fails; a group that can
    have no supporter (none running, none pending, no first pod) fails everywhere; a group
    whose only possible supporters run fails outside their domains."""

    index: Index
    name: str = NAME
    reason: str = AFFINITY_MISMATCH

    def pod_key(self, pod: Pod) -> Hashable:
        group = self.index.own(pod)[1]
        return (group, self.index.starter_possible(group, pod)) if group else None

    @cached_property
    def keys(self) -> tuple[str, ...]:
        """The topology keys of the pending pods' affinity terms (what a node is keyed by)."""
        return tuple(sorted({t.topology_key for g in self.index.live_groups for t in g}))

    def node_key(self, node: Node) -> Hashable:
        return tuple(node.labels.get(k) for k in self.keys)

    def node_key_basis(self) -> object:
        return self.keys

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        group = self.index.own(pod)[1]
        mask = np.ones(len(nodes), dtype=np.bool_)
        if not group:
            return mask
        for term in group:
            mask &= np.array([term.topology_key in n.labels for n in nodes], dtype=np.bool_)
        if self.index.starter_possible(group, pod) or self.index.pending_support[group]:
            return mask
        for term, values in zip(group, self.index.support[group], strict=True):
            mask &= ~_outside(nodes, term.topology_key, values)
        return mask


@dataclass(frozen=True)
class BatchRules:
    """The constraint part: the rules between pending pods, over classes and domains."""

    index: Index
    name: str = NAME

    def pod_key(self, pod: Pod) -> Hashable:
        """What the pod carries and which live rules select it: pods alike in both are
        interchangeable for every inter-pod rule, whatever other labels they have."""
        terms, groups, _ = self.index.selecting(pod)
        return (*self.index.own(pod), terms, groups)

    def unmodelled(self, pod: Pod) -> tuple[str, ...]:
        terms = (*pod.affinity, *pod.anti_affinity)
        if not self.index.matcher.namespace_labels and any(t.namespace_selector for t in terms):
            return (NAMESPACE_SELECTOR_NEEDS_NAMESPACES,)
        return ()

    def constraints(self, view: ClassView) -> Sequence[Rule]:
        pods = view.class_pods
        domains: dict[str, IntArray] = {}

        def domain(key: str) -> IntArray:
            if key not in domains:
                domains[key] = label_domains(key, view.nodes)
            return domains[key]

        rules: list[Rule] = [r for t in self.index.live_terms if (r := self._exclusion(t, view, domain)) is not None]
        attractions = [a for g in self.index.live_groups if (a := self._attraction(g, view, domain)) is not None]
        return [*rules, *_with_rivals(attractions, pods, self.index.matcher)]

    def _exclusion(self, term: TermId, view: ClassView, domain_of: Callable[[str], IntArray]) -> Rule | None:
        pods = view.class_pods
        carriers = tuple(c for c, p in enumerate(pods) if term in self.index.own(p)[0])
        matched = tuple(c for c, p in enumerate(pods) if term in self.index.selecting(p)[0])
        if not carriers or not matched:
            return None
        domain = domain_of(term.topology_key)
        name = f"anti-affinity {term.describe()}"
        if carriers != matched:
            return Exclusion(name, carriers, matched, domain)
        sizes = np.bincount(domain[domain >= 0], minlength=n_domains(domain))
        if (sizes <= 1).all():  # one node per domain (a hostname key): a cap per node
            return GroupCap(name, carriers, np.where(domain >= 0, 1, UNCAPPED).astype(np.int64))
        return GroupCap(name, carriers, np.ones(n_domains(domain), dtype=np.int64), domain=domain)

    def _attraction(self, group: GroupId, view: ClassView, domain_of: Callable[[str], IntArray]) -> Attraction | None:
        pods, m = view.class_pods, self.index.matcher
        carriers = tuple(c for c, p in enumerate(pods) if self.index.own(p)[1] == group)
        if not carriers:
            return None
        supporters = tuple(c for c, p in enumerate(pods) if not p.affinity and group in self.index.selecting(p)[1])
        domains = tuple(domain_of(t.topology_key) for t in group)
        support = self.index.support[group]
        bound_support = tuple(_domain_set(t.topology_key, view.nodes, dom, values)
                              for t, dom, values in zip(group, domains, support, strict=True))
        starters = () if self.index.running_anchor[group] else tuple(c for c in carriers if m.matches_all(group,
                                                                                                             pods[c]))
        return Attraction(f"affinity {'; '.join(t.describe() for t in group)}", carriers, supporters, domains,
                          bound_support, _cells(domains), starters)


def _domain_set(key: str, nodes: Sequence[Node], domain: IntArray, values: frozenset[str]) -> BoolArray:
    """(D,) True for the domains whose value is in ``values``."""
    out = np.zeros(n_domains(domain), dtype=np.bool_)
    for i, node in enumerate(nodes):
        if domain[i] >= 0 and node.labels.get(key) in values:
            out[domain[i]] = True
    return out


def _cells(domains: Sequence[IntArray]) -> IntArray:
    """Each node's cell: one index per distinct tuple of domains over the terms; -1 when a key is missing."""
    stacked = np.stack(domains, axis=1)
    complete = (stacked >= 0).all(axis=1)
    cell = np.full(stacked.shape[0], -1, dtype=np.int64)
    if complete.any():
        _, inverse = np.unique(stacked[complete], axis=0, return_inverse=True)
        cell[complete] = inverse.reshape(-1)
    return cell


def _with_rivals(attractions: list[Attraction], pods: Sequence[Pod], matcher: Matcher) -> list[Attraction]:
    """Groups whose possible starters each match the other's terms cannot both start: whichever
    came second would see the first matching its terms."""
    groups = [group_id(pods[a.carriers[0]]) for a in attractions]

    def matches(a: Attraction, g: GroupId) -> bool:
        return any(matcher.matches_all(g, pods[c]) for c in a.starters)

    return [replace(a, rivals=tuple(b.name for j, b in enumerate(attractions)
                                    if j != i and matches(a, groups[j]) and matches(b, groups[i])))
            for i, a in enumerate(attractions)]


def build(args: InterPodAffinityArgs, ctx: RunContext) -> tuple[OwnAffinity, OwnAntiAffinity, ExistingAntiAffinity,
                                                                BatchRules, InterPodAffinityScore]:
    index = Index.build(ctx)
    snap = ctx.snapshot
    score = inter_pod_score(args, snap.node_by_name, snap.bound, snap.pending, snap.namespace_labels)
    return OwnAffinity(index), OwnAntiAffinity(index), ExistingAntiAffinity(index), BatchRules(index), score
