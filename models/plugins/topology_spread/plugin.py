"""PodTopologySpread: DoNotSchedule topology spread constraints, over the batch's final placement.

The kube-scheduler (``podtopologyspread/filtering.go``) lets a pod onto a node when the node
has every hard constraint's key ("(missing required label)" otherwise) and, for each
constraint, the matching pods of the pod's namespace in the node's domain, plus the pod itself
if it matches, exceed the smallest count over the eligible domains by at most maxSkew; that
smallest count is 0 with fewer than minDomains domains. Only eligible nodes count: they have
every hard key, and match the pod's node affinity (nodeAffinityPolicy Honor, the default)
and tolerate its taints (nodeTaintsPolicy Honor).

The missing key is a filter; the rest is a :class:`~models.problem.Spread` per constraint
signature, over classes and domains. A signature is *ordered* (the replay fills its domains
level by level, so its floor is the final smallest count) when it is the constraint with the
fewest domains of each of its carriers and shares no pod with another ordered one or with a
pod affinity group; otherwise its floor is the smallest running count (any order passes).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from kubeplace.kube.objects import Node, Pod
from kubeplace.models.domains import Matcher, SpreadId, label_domains, n_domains, spread_ids
from kubeplace.models.framework import ClassView
from kubeplace.models.plugins import node_affinity, taint_toleration
from kubeplace.models.problem import BoolArray, IntArray, Rule, Spread

NAME = "PodTopologySpread"
SPREAD_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
SPREAD_MISMATCH = "node(s) didn't match pod topology spread constraints"


def eligible_nodes(spread: SpreadId, nodes: Sequence[Node]) -> BoolArray:
    """The nodes whose pods the constraint counts (``calPreFilterState``)."""
    mask = np.array([all(k in n.labels for k in spread.hard_keys) for n in nodes], dtype=np.bool_)
    if spread.node_affinity is not None:
        selector, terms = spread.node_affinity
        probe = Pod("", "", node_selector=dict(selector), required_terms=terms)
        mask &= node_affinity.NodeAffinity((), True).filter(probe, nodes)
    if spread.tolerations is not None:
        mask &= taint_toleration.TaintToleration().filter(Pod("", "", tolerations=spread.tolerations), nodes)
    return mask


def counting(live: Sequence[SpreadId], matcher: Matcher, counted_by: dict[int, tuple[SpreadId, ...]],
             pod: Pod) -> tuple[SpreadId, ...]:
    """The constraints of ``live`` that count ``pod``, remembered per label class of pods in
    ``counted_by`` (pods of one class match the same selectors)."""
    if not live:
        return ()
    cls = matcher.label_class(pod)
    found = counted_by.get(cls)
    if found is None:
        found = counted_by[cls] = tuple(s for s in live if s.counts(pod))
    return found


@dataclass(frozen=True)
class PodTopologySpread:
    live: tuple[SpreadId, ...]
    """Every signature a pending pod carries."""
    keys: tuple[str, ...]
    running: tuple[tuple[Pod, tuple[str, ...]], ...]
    """A running pod per distinct (namespace, labels, terminating), with the nodes such pods run on."""
    matcher: Matcher = field(default_factory=lambda: Matcher({}))
    """Label classes of the pods keyed (only its memo of pods is used)."""
    carried: dict[int, tuple[SpreadId, ...]] = field(default_factory=dict)  # id(pod) -> its signatures
    counted_by: dict[int, tuple[SpreadId, ...]] = field(default_factory=dict)  # label class -> live ids counting it
    name: str = NAME
    reason: str = SPREAD_MISSING_LABEL

    def signatures(self, pod: Pod) -> tuple[SpreadId, ...]:
        self.matcher.label_class(pod)  # keeps the pod alive while its id is a key
        found = self.carried.get(id(pod))
        if found is None:
            found = self.carried[id(pod)] = spread_ids(pod)
        return found

    def counting(self, pod: Pod) -> tuple[SpreadId, ...]:
        """The live signatures that count the pod (a pending pod: never terminating)."""
        return counting(self.live, self.matcher, self.counted_by, pod)

    def pod_key(self, pod: Pod) -> Hashable:
        """What the pod carries and which live signatures count it."""
        return self.signatures(pod), self.counting(pod)

    def node_key(self, node: Node) -> Hashable:
        return tuple(k in node.labels for k in self.keys)

    def node_key_basis(self) -> object:
        return self.keys

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        keys = {c.topology_key for c in pod.spread if c.hard}
        return np.array([all(k in n.labels for k in keys) for n in nodes], dtype=np.bool_)

    def constraints(self, view: ClassView) -> Sequence[Rule]:
        carried = [self.signatures(p) for p in view.class_pods]
        counter = DomainCounter(view.nodes, self.running)
        rules: dict[SpreadId, Spread] = {}
        alias: dict[SpreadId, SpreadId] = {}  # each id -> the first id of the same effective constraint
        first_of: dict[Hashable, SpreadId] = {}
        for spread in self.live:
            carriers = tuple(c for c, ids in enumerate(carried) if spread in ids)
            if not carriers:
                continue
            domain, bound = counter.count(spread)
            if _always_within_skew(n_domains(domain), spread.min_domains):
                continue
            first = alias[spread] = first_of.setdefault(_effective(spread, domain), spread)
            if first != spread:  # the kube-scheduler counts and filters both alike: one constraint
                merged = tuple(sorted({*rules[first].carriers, *carriers}))
                rules[first] = replace(rules[first], carriers=merged)
                continue
            counted = tuple(c for c, p in enumerate(view.class_pods) if spread in self.counting(p))
            rules[spread] = Spread(f"spread {spread.describe()}", carriers, counted, domain, bound, spread.max_skew,
                                   spread.min_domains, ordered=False)
        carried = [tuple(dict.fromkeys(alias[s] for s in ids if s in alias)) for ids in carried]
        return _assign_order(rules, carried, view.class_pods)


def _effective(spread: SpreadId, domain: IntArray) -> Hashable:
    """What the constraint's filter depends on: its counted pods, skew, minDomains and how it
    groups the nodes it counts on into domains. Policies, hard keys or topology keys that differ
    but leave the same eligible nodes in the same groups make the same constraint (the fixed floor
    would otherwise cap the domains of each)."""
    _, first_seen, inverse = np.unique(domain, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first_seen))  # domains numbered in the order the nodes meet them
    grouping = np.where(domain >= 0, rank[inverse], -1)
    return spread.namespace, spread.selector, spread.max_skew, spread.min_domains, grouping.tobytes()


def _always_within_skew(domains: int, min_domains: int) -> bool:
    """With no eligible domain, or one and minDomains at most 1, the kube-scheduler's skew is at
    most 1 (the pod itself) wherever it goes: the global minimum is 0 with none, and with one it is
    that domain's own count. Such a constraint never filters, and modelling it with the fixed floor
    would refuse pods it accepts."""
    return domains == 0 or (domains == 1 and min_domains <= 1)


@dataclass
class DomainCounter:
    """Per constraint: each node's domain among the nodes it counts on, and the running pods it
    counts per domain; the eligible nodes and domains computed once per distinct input."""

    nodes: Sequence[Node]
    running: tuple[tuple[Pod, tuple[str, ...]], ...]
    eligible: dict[Hashable, BoolArray] = field(default_factory=dict)
    domains: dict[Hashable, IntArray] = field(default_factory=dict)
    index: dict[str, int] = field(default_factory=dict)

    def count(self, spread: SpreadId) -> tuple[IntArray, IntArray]:
        if not self.index:  # (made when a constraint is first counted: a cycle without one makes none)
            self.index.update((n.name, i) for i, n in enumerate(self.nodes))
        inputs = (spread.hard_keys, spread.node_affinity, spread.tolerations)
        if inputs not in self.eligible:
            self.eligible[inputs] = eligible_nodes(spread, self.nodes)
        if (spread.topology_key, inputs) not in self.domains:
            self.domains[(spread.topology_key, inputs)] = label_domains(spread.topology_key, self.nodes,
                                                                        mask=self.eligible[inputs])
        domain = self.domains[(spread.topology_key, inputs)]
        bound = np.zeros(n_domains(domain), dtype=np.int64)
        for pod, node_names in self.running:
            if spread.counts(pod):
                at = domain[[self.index[n] for n in node_names if n in self.index]]
                np.add.at(bound, at[at >= 0], 1)
        return domain, bound


def _assign_order(rules: dict[SpreadId, Spread], carried: list[tuple[SpreadId, ...]],
                  pods: Sequence[Pod]) -> list[Rule]:
    """Marks the signatures that may be ordered: the one with the fewest domains
    of each of its carriers, unless its pods (counted or carrying) meet another ordered one's or
    include a pod with required affinity."""
    def primary(ids: tuple[SpreadId, ...]) -> SpreadId:
        return min(ids, key=lambda s: (rules[s].n_domains, repr(s)))

    candidates = [s for s in rules if all(primary(ids) == s for ids in carried if s in ids)]
    pods_of = {s: set(rules[s].carriers) | set(rules[s].counted) for s in candidates}
    ordered = {s for s in candidates if not any(pods[c].affinity for c in pods_of[s])
               and not any(t != s and pods_of[s] & pods_of[t] for t in candidates)}
    return [replace(r, ordered=True) if s in ordered else r for s, r in rules.items()]
