"""The verifier's domain rules: InterPodAffinity and PodTopologySpread, replayed pod by pod.

These rules depend on where the other pods run, so a plan is valid only if its pods can be
bound one at a time in some order in which each passes the kube-scheduler's checks against
the bound pods and those bound before it. :func:`replay` finds such an order by itself
(design-12 2.F): first the *starters* (the first pod of a self-affine group, which the
kube-scheduler lets through when nothing matching its terms runs yet), then the pods without
required affinity, level by level in their spread domains (water-filling), then the affinity
carriers, supporters' groups first. Each pod is checked with the kube-scheduler's filters in
its order (PodTopologySpread, then InterPodAffinity's three checks); a pod that fails is
retried after later pods succeed, and what still fails is a :class:`DomainViolation` with the
kube-scheduler's reason.

Semantics (k8s.io/kubernetes v1.36 ``pkg/scheduler/framework/plugins``):
- ``interpodaffinity/filtering.go``: counts per (topology key, value) of existing pods matching
  the incoming pod's affinity terms (a pod must match ALL of them), its anti-affinity terms,
  and existing pods' anti-affinity terms matching the incoming pod. A node lacking an affinity
  key fails; the first pod of a group passes when nothing matches anywhere and it matches its
  own terms. Anti-affinity is symmetric, affinity is not.
- ``podtopologyspread``: eligible nodes (every hard key present, the pod's node affinity when
  nodeAffinityPolicy is Honor, its tolerations when nodeTaintsPolicy is Honor), counts of
  matching, not terminating pods of the pod's namespace on eligible nodes per domain, the
  minimum (0 when fewer than minDomains domains), skew = count + self-match - minimum.

Written apart from the model on purpose: only ``kube.objects`` and the rules' verifier checks
(``models/plugins/<rule>/verify.py``: the toleration and node-affinity helpers) are imported;
selectors, namespace scopes, the spread matchLabelKeys merge, eligibility and domains are
re-implemented here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubeplace.kube.objects import NO_EXECUTE, NO_SCHEDULE, Node, Pod, PodAffinityTerm, Requirement, Snapshot
from kubeplace.models.plugins.node_affinity.verify import node_affinity_matches, requirement_holds
from kubeplace.models.plugins.taint_toleration.verify import tolerates

AFFINITY_RULE = "InterPodAffinity"
SPREAD_RULE = "PodTopologySpread"
AFFINITY_MISMATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_MISMATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD_MISMATCH = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"

Placement = tuple[str, str, str]
"""(namespace, name, node name)"""
Counted = Placement | tuple[str, str, str, int]
"""A placement with, for an object standing for several pods (``Pod.copies``: a leader's
stand-in followers), how many of them go to the node; 1 when left out."""
_Item = tuple[Pod, Node, Counted]


@dataclass(frozen=True)
class DomainViolation:
    namespace: str
    name: str
    node: str
    rule: str
    """``InterPodAffinity`` or ``PodTopologySpread``."""
    reason: str
    """The kube-scheduler's words, e.g. ``node(s) didn't match pod affinity rules``."""
    detail: str
    """The reason and what caused it (the term, the constraint, the pod whose rule it is)."""


@dataclass(frozen=True)
class Replay:
    violations: tuple[DomainViolation, ...]
    order: tuple[Counted, ...]
    """Every placement: first those that replay, in the order they passed (bind in this order),
    then those that fail, then those the replay skips (unknown pod or node, duplicates)."""


def replay(snapshot: Snapshot, placements: Sequence[Counted]) -> Replay:
    """Replay ``placements`` in an order of their own and report the pods that fail (the copies
    of an object standing for several pods as one step per node, checked and counted together)."""
    state = _State(snapshot)
    pending = {(pod.namespace, pod.name): pod for pod in snapshot.pending}
    valid: list[_Item] = []
    skipped: list[Counted] = []
    seen: set[tuple[str, ...]] = set()
    for placement in placements:
        pod, node = pending.get((placement[0], placement[1])), state.nodes.get(placement[2])
        once = placement[:2] if pod is None or pod.copies == 1 else placement[:3]
        if pod is None or node is None or once in seen:
            skipped.append(placement)
        else:
            seen.add(once)
            valid.append((pod, node, placement))
    remaining = _replay_order(state, valid)
    order: list[Counted] = []
    failures: dict[Counted, _Failure] = {}
    while remaining:
        failed = []
        for pod, node, placement in remaining:
            count = placement[3] if len(placement) == 4 else 1
            failure = state.check(pod, node, count)
            if failure is None:
                state.commit(pod, node, count)
                order.append(placement)
            else:
                failures[placement] = failure
                failed.append((pod, node, placement))
        if len(failed) == len(remaining):
            break
        remaining = failed
    violations = tuple(DomainViolation(*p[:3], *failures[p]) for _, _, p in remaining)
    return Replay(violations, (*order, *(p for _, _, p in remaining), *skipped))


# -- label matching (also used by plan/verify_volumes.py) ---------------------------------

def selector_matches(selector: Sequence[Requirement] | None, labels: Mapping[str, str]) -> bool:
    """A label selector: None (null) matches nothing, an empty one everything."""
    return selector is not None and all(requirement_holds(r, labels.get(r.key)) for r in selector)


def _tolerates_hard_taints(pod: Pod, node: Node) -> bool:
    return all(tolerates(pod, t.key, t.value, t.effect) for t in node.taints if t.effect in (NO_SCHEDULE, NO_EXECUTE))


# -- the replay state ----------------------------------------------------------------------

_Failure = tuple[str, str, str]
"""(rule, reason, detail)"""


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

    def selects(self, cls: int, state: _State) -> bool:
        if cls not in self.memo:
            namespace, labels = state.classes[cls]
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

    def reaches(self, cls: int, state: _State) -> bool:
        """``AffinityTerm.Matches(incoming, nsLabels(incoming))``."""
        if cls not in self.memo:
            namespace, labels = state.classes[cls]
            term = self.term
            if not term.namespaces and term.namespace_selector is None:
                in_scope = namespace == self.owner_namespace
            else:
                namespace_labels = state.namespace_labels.get(namespace, {})
                in_scope = namespace in term.namespaces or selector_matches(term.namespace_selector, namespace_labels)
            self.memo[cls] = in_scope and selector_matches(term.selector, labels)
        return self.memo[cls]


class _Spread:
    """One hard constraint as every pod with the same namespace, selector, key and eligible
    nodes sees it: matching pods per domain of the eligible nodes, and their minimum."""

    def __init__(self, namespace: str, selector: tuple[Requirement, ...] | None, domain_of: dict[str, str]) -> None:
        self.namespace, self.selector = namespace, selector
        self.domain_of = domain_of  # eligible node name -> its value of the key
        self.counts = dict.fromkeys(domain_of.values(), 0)
        self.memo: dict[int, bool] = {}
        self.minimum, self.at_minimum = 0, len(self.counts)

    def counts_class(self, cls: int, state: _State) -> bool:
        """``countPodsMatchSelector``: same namespace, and a selector that is not empty."""
        if cls not in self.memo:
            namespace, labels = state.classes[cls]
            self.memo[cls] = namespace == self.namespace and bool(self.selector) and selector_matches(
                self.selector, labels)
        return self.memo[cls]

    def add(self, node_name: str, count: int = 1) -> None:
        value = self.domain_of.get(node_name)
        if value is None:
            return
        before = self.counts[value]
        self.counts[value] = before + count
        if before == self.minimum:
            self.at_minimum -= 1
            if self.at_minimum == 0:
                self.minimum = min(self.counts.values())
                self.at_minimum = sum(1 for c in self.counts.values() if c == self.minimum)

    def floor(self, min_domains: int) -> int:
        return self.minimum if len(self.counts) >= min_domains else 0


@dataclass(frozen=True)
class _HardSpread:
    """A pod's DoNotSchedule constraint with the kube-scheduler's matchLabelKeys merge."""

    key: str
    max_skew: int
    min_domains: int
    selector: tuple[Requirement, ...] | None
    state: _Spread


class _State:
    """The cluster as the replay leaves it: existing pods, indexed by label class."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.nodes = {node.name: node for node in snapshot.nodes}
        self.namespace_labels = snapshot.namespace_labels
        self.classes: list[tuple[str, Mapping[str, str]]] = []
        self.class_ids: dict[tuple[str, frozenset[tuple[str, str]]], int] = {}
        self.placed_on: dict[int, list[tuple[str, bool, int]]] = {}  # class -> (node, terminating, how many)
        self.matched: dict[tuple[_OwnTerm, ...], _Matched] = {}
        self.forbidden: dict[tuple[str, PodAffinityTerm], _Forbidden] = {}
        self.spreads: dict[tuple[object, ...], _Spread] = {}
        self.own_terms_of: dict[str, tuple[tuple[_OwnTerm, ...], tuple[_OwnTerm, ...]]] = {}
        self.hard_spreads_of: dict[str, tuple[_HardSpread, ...]] = {}
        self.class_by_pod: dict[int, int] = {}  # id(pod) -> its class (the snapshot keeps the pods alive)
        self.eligible_nodes: dict[tuple[object, ...], list[Node]] = {}
        self.counters_of: dict[int, tuple[int, int, list[_Matched], list[_Spread]]] = {}
        """class -> (how many matched/spread indexes there were, those that select it)"""
        for pod in snapshot.bound:
            if pod.node_name in self.nodes:
                self.commit(pod, self.nodes[pod.node_name])

    def class_of(self, pod: Pod) -> int:
        found = self.class_by_pod.get(id(pod))
        if found is not None:
            return found
        key = (pod.namespace, frozenset(pod.labels.items()))
        if key not in self.class_ids:
            self.class_ids[key] = len(self.classes)
            self.classes.append((pod.namespace, pod.labels))
        self.class_by_pod[id(pod)] = self.class_ids[key]
        return self.class_ids[key]

    def counters(self, cls: int) -> tuple[list[_Matched], list[_Spread]]:
        """The indexes that count pods of class ``cls`` (recomputed when indexes were added)."""
        cached = self.counters_of.get(cls)
        if cached is None or cached[:2] != (len(self.matched), len(self.spreads)):
            cached = (len(self.matched), len(self.spreads),
                      [m for m in self.matched.values() if m.selects(cls, self)],
                      [s for s in self.spreads.values() if s.counts_class(cls, self)])
            self.counters_of[cls] = cached
        return cached[2], cached[3]

    def commit(self, pod: Pod, node: Node, count: int = 1) -> None:
        """``count`` copies of ``pod`` on ``node`` (more than 1 only for ``Pod.copies``)."""
        cls = self.class_of(pod)
        self.placed_on.setdefault(cls, []).append((node.name, pod.deleting, count))
        matched_by, spreads = self.counters(cls)
        for matched in matched_by:
            matched.add(node, count)
        for spread in spreads:
            if not pod.deleting:
                spread.add(node.name, count)
        for term in pod.anti_affinity:
            forbidden = self.forbidden.setdefault((pod.namespace, term), _Forbidden(term, pod.namespace))
            value = node.labels.get(term.topology_key)
            if value is not None:
                forbidden.values.setdefault(value, pod.key)

    def check(self, pod: Pod, node: Node, count: int = 1) -> _Failure | None:
        """The first failing check, in the kube-scheduler's filter order (for the last of
        ``count`` copies going there together)."""
        return self._spread_failure(pod, node, count) or self._affinity_failure(pod, node)

    # PodTopologySpread
    def _spread_failure(self, pod: Pod, node: Node, copies: int = 1) -> _Failure | None:
        for c in self.hard_spreads(pod):
            value = node.labels.get(c.key)
            if value is None:
                return SPREAD_RULE, SPREAD_MISSING_LABEL, f"{SPREAD_MISSING_LABEL}: node has no label {c.key}"
            floor = c.state.floor(c.min_domains)
            count = c.state.counts.get(value, 0)
            skew = count + copies * int(selector_matches(c.selector, pod.labels)) - floor
            if skew > c.max_skew:
                return SPREAD_RULE, SPREAD_MISMATCH, (
                    f"{SPREAD_MISMATCH}: {c.key}={value} would have skew {skew} > maxSkew {c.max_skew} "
                    f"({count} matching pods there, minimum {floor})")
        return None

    def hard_spreads(self, pod: Pod) -> tuple[_HardSpread, ...]:
        if pod.key not in self.hard_spreads_of:
            hard = [c for c in pod.spread if c.hard]
            keys = tuple(sorted({c.topology_key for c in hard}))
            found = []
            for c in hard:
                selector = _merge_match_label_keys(c.selector, c.match_label_keys, pod.labels)
                affinity = (tuple(sorted(pod.node_selector.items())), pod.required_terms) \
                    if c.node_affinity_policy == "Honor" else None
                taints = pod.tolerations if c.node_taints_policy == "Honor" else None
                signature = (pod.namespace, selector, c.topology_key, keys, affinity, taints)
                if signature not in self.spreads:
                    self.spreads[signature] = self._new_spread(pod, c.topology_key, selector, keys, affinity, taints)
                found.append(_HardSpread(c.topology_key, c.max_skew, c.min_domains, selector,
                                         self.spreads[signature]))
            self.hard_spreads_of[pod.key] = tuple(found)
        return self.hard_spreads_of[pod.key]

    def _new_spread(self, pod: Pod, key: str, selector: tuple[Requirement, ...] | None, keys: tuple[str, ...],
                    affinity: object, taints: object) -> _Spread:
        inputs = (keys, affinity, taints)
        if inputs not in self.eligible_nodes:
            self.eligible_nodes[inputs] = [
                node for node in self.nodes.values()
                if all(k in node.labels for k in keys)
                and (affinity is None or node_affinity_matches(pod, node))
                and (taints is None or _tolerates_hard_taints(pod, node))]
        eligible = {node.name: node.labels[key] for node in self.eligible_nodes[inputs]}
        spread = _Spread(pod.namespace, selector, eligible)
        for cls, where in self.placed_on.items():
            if spread.counts_class(cls, self):
                for node_name, terminating, count in where:
                    if not terminating:
                        spread.add(node_name, count)
        return spread

    # InterPodAffinity
    def _affinity_failure(self, pod: Pod, node: Node) -> _Failure | None:
        affinity, anti_affinity = self.own_terms(pod)
        if affinity:
            matched = self.matched_by(affinity)
            missing = [t.key for t in affinity if t.key not in node.labels]
            if missing:
                return AFFINITY_RULE, AFFINITY_MISMATCH, f"{AFFINITY_MISMATCH}: node has no label {missing[0]}"
            unmet = [t for t in affinity if matched.pairs.get((t.key, node.labels[t.key]), 0) <= 0]
            first_pod = not matched.pairs and matched.selects(self.class_of(pod), self)
            if unmet and not first_pod:
                t = unmet[0]
                return AFFINITY_RULE, AFFINITY_MISMATCH, (
                    f"{AFFINITY_MISMATCH}: no pod matching all its terms in {t.key}={node.labels[t.key]} "
                    f"(term {t.describe()})")
        for term in anti_affinity:
            value = node.labels.get(term.key)
            if value is not None and self.matched_by((term,)).pairs.get((term.key, value), 0) > 0:
                return AFFINITY_RULE, ANTI_AFFINITY_MISMATCH, (
                    f"{ANTI_AFFINITY_MISMATCH}: a pod matching {term.describe()} runs in {term.key}={value}")
        cls = self.class_of(pod)
        for forbidden in self.forbidden.values():
            value = node.labels.get(forbidden.term.topology_key)
            if value is not None and value in forbidden.values and forbidden.reaches(cls, self):
                return AFFINITY_RULE, EXISTING_ANTI_AFFINITY_MISMATCH, (
                    f"{EXISTING_ANTI_AFFINITY_MISMATCH}: {forbidden.values[value]} forbids "
                    f"{forbidden.term.topology_key}={value} to pods like this one")
        return None

    def own_terms(self, pod: Pod) -> tuple[tuple[_OwnTerm, ...], tuple[_OwnTerm, ...]]:
        if pod.key not in self.own_terms_of:
            self.own_terms_of[pod.key] = (tuple(self._resolve(t, pod.namespace) for t in pod.affinity),
                                       tuple(self._resolve(t, pod.namespace) for t in pod.anti_affinity))
        return self.own_terms_of[pod.key]

    def _resolve(self, term: PodAffinityTerm, namespace: str) -> _OwnTerm:
        names = set(term.namespaces) if term.namespaces or term.namespace_selector is not None else {namespace}
        if term.namespace_selector:
            names |= {n for n, labels in self.namespace_labels.items() if selector_matches(term.namespace_selector,
                                                                                            labels)}
        return _OwnTerm(term.selector, frozenset(names), term.namespace_selector == (), term.topology_key)

    def matched_by(self, terms: tuple[_OwnTerm, ...]) -> _Matched:
        if terms not in self.matched:
            matched = _Matched(terms)
            for cls, where in self.placed_on.items():
                if matched.selects(cls, self):
                    for node_name, _, count in where:
                        matched.add(self.nodes[node_name], count)
            self.matched[terms] = matched
        return self.matched[terms]


def _merge_match_label_keys(selector: tuple[Requirement, ...] | None, keys: Iterable[str],
                            labels: Mapping[str, str]) -> tuple[Requirement, ...] | None:
    """``mergeLabelSetWithSelector``: ``key In [the pod's value]`` ANDed for each key the pod
    has; a null selector stays null. Idempotent on a selector the API server merged."""
    if selector is None:
        return None
    merged = list(selector)
    for key in keys:
        if key in labels and (requirement := Requirement(key, "In", (labels[key],))) not in merged:
            merged.append(requirement)
    return tuple(merged)


def _describe(selector: Sequence[Requirement]) -> str:
    if not selector:
        return "every pod"
    return ",".join(f"{r.key} {r.operator} [{','.join(r.values)}]" if r.values else f"{r.key} {r.operator}"
                    for r in selector)


# -- the replay order ----------------------------------------------------------------------

def _replay_order(state: _State, valid: list[_Item]) -> list[_Item]:
    """Starters, then pods without required affinity by spread level, then carriers by group."""
    ranked = sorted(valid, key=lambda item: _queue_rank(item[0]))
    carriers = [item for item in ranked if item[0].affinity]
    free = [item for item in ranked if not item[0].affinity]
    starters = _starters(state, carriers, free)
    groups = _group_order(state, carriers)
    started = {placement for _, _, placement in starters}
    later = [item for item in carriers if item[2] not in started]
    later.sort(key=lambda item: groups[state.own_terms(item[0])[0]])
    return [*starters, *_water_filling(state, free), *later]


def _queue_rank(pod: Pod) -> tuple[int, str, str, str]:
    """PrioritySort: higher priority first, then older, then by name."""
    return -pod.priority, pod.creation, pod.namespace, pod.name


def _starters(state: _State, carriers: list[_Item], free: list[_Item]) -> list[_Item]:
    """Per group of carriers with the same terms, the first carrier (queue order) in a domain
    that neither a bound pod nor a pod without required affinity supports, when the group can
    have a first pod at all (it matches its own terms, nothing matching runs yet). A starter
    goes before the starters whose terms it matches (else they would not be first)."""
    starters = []
    free_by_class: dict[int, list[Node]] = {}
    for pod, node, _ in free:
        free_by_class.setdefault(state.class_of(pod), []).append(node)
    by_group: dict[tuple[_OwnTerm, ...], list[_Item]] = {}
    for item in carriers:
        by_group.setdefault(state.own_terms(item[0])[0], []).append(item)
    for terms, members in by_group.items():
        matched = state.matched_by(terms)
        if matched.pairs:
            continue
        supported = {(t.key, value) for cls, nodes in free_by_class.items() if matched.selects(cls, state)
                     for node in nodes for t in terms if (value := node.labels.get(t.key)) is not None}
        for pod, node, placement in members:
            unsupported = any((t.key, node.labels.get(t.key)) not in supported for t in terms)
            if unsupported and matched.selects(state.class_of(pod), state):
                starters.append((pod, node, placement))
                break
    before = {(j, i) for i, a in enumerate(starters) for j, b in enumerate(starters)
              if i != j and state.matched_by(state.own_terms(b[0])[0]).selects(state.class_of(a[0]), state)}
    return [starters[i] for i in _topological(len(starters), before)]


def _group_order(state: _State, carriers: list[_Item]) -> dict[tuple[_OwnTerm, ...], int]:
    """Groups of carriers ranked so that a group whose pods support another's terms comes first
    (the retries would find that order too; this keeps them few)."""
    groups: dict[tuple[_OwnTerm, ...], list[Pod]] = {}
    for pod, _, _ in carriers:
        groups.setdefault(state.own_terms(pod)[0], []).append(pod)
    keys = list(groups)
    before = {(i, j) for i, g in enumerate(keys) for j, h in enumerate(keys)
              if i != j and any(state.matched_by(h).selects(state.class_of(p), state) for p in groups[g])}
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


def _water_filling(state: _State, free: list[_Item]) -> list[_Item]:
    """Pods without required affinity, level by level: a pod's level is the count its domain
    of its hard constraint with the fewest domains has when it arrives, if every pod before it
    in queue order went there first. Pods without such a constraint come first."""
    arrivals: dict[tuple[int, str], int] = {}
    levels = []
    for index, (pod, node, _) in enumerate(free):
        spreads = state.hard_spreads(pod)
        if not spreads:
            levels.append((-1, index))
            continue
        primary = min(spreads, key=lambda c: len(c.state.counts))
        value = node.labels.get(primary.key, "")
        slot = (id(primary.state), value)
        arrivals[slot] = arrivals.get(slot, primary.state.counts.get(value, 0)) + 1
        levels.append((arrivals[slot], index))
    return [free[index] for _, index in sorted(levels)]
