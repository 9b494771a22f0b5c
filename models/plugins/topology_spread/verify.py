"""PodTopologySpread's independent verifier check, in the plan's replay (``kube.replay``): each
DoNotSchedule constraint of a pod against the pods placed before it, and the order in which pods
without required affinity replay (water-filling: level by level in their spread domains).

Semantics (k8s.io/kubernetes v1.36 ``pkg/scheduler/framework/plugins/podtopologyspread``):
eligible nodes (every hard key present, the pod's node affinity when nodeAffinityPolicy is Honor,
its tolerations when nodeTaintsPolicy is Honor), counts of matching, not terminating pods of the
pod's namespace on eligible nodes per domain, the minimum (0 when fewer than minDomains domains),
skew = count + self-match - minimum. Written apart from the model on purpose: imports only
``kubeplace.kube`` and the node-affinity and toleration verifier checks; selectors, the
matchLabelKeys merge, eligibility and domains are re-implemented here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubeplace.kube.objects import NO_EXECUTE, NO_SCHEDULE, Node, Pod, Requirement, Snapshot
from kubeplace.kube.replay import Failure, Indexes, Item, Placed, ReplayCheck
from kubeplace.models.plugins.node_affinity.verify import node_affinity_matches, selector_matches
from kubeplace.models.plugins.taint_toleration.verify import tolerates

NAME = "PodTopologySpread"
SPREAD_MISMATCH = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"


class _Spread:
    """One hard constraint as every pod with the same namespace, selector, key and eligible
    nodes sees it: matching pods per domain of the eligible nodes, and their minimum."""

    def __init__(self, namespace: str, selector: tuple[Requirement, ...] | None, domain_of: dict[str, str]) -> None:
        self.namespace, self.selector = namespace, selector
        self.domain_of = domain_of  # eligible node name -> its value of the key
        self.counts = dict.fromkeys(domain_of.values(), 0)
        self.memo: dict[int, bool] = {}
        self.minimum, self.at_minimum = 0, len(self.counts)

    def counts_class(self, cls: int, placed: Placed) -> bool:
        """``countPodsMatchSelector``: same namespace, and a selector that is not empty."""
        if cls not in self.memo:
            namespace, labels = placed.classes[cls]
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


class SpreadReplay:
    """The hard constraints' counts as the replay leaves them."""

    name = NAME

    def __init__(self, placed: Placed) -> None:
        self.placed = placed
        self.spreads: Indexes[_Spread] = Indexes(lambda spread, cls: spread.counts_class(cls, placed))
        self.hard_spreads_of: dict[str, tuple[_HardSpread, ...]] = {}
        self.eligible_nodes: dict[tuple[object, ...], list[Node]] = {}

    def check(self, pod: Pod, node: Node, copies: int) -> Failure | None:
        for c in self.hard_spreads(pod):
            value = node.labels.get(c.key)
            if value is None:
                return SPREAD_MISSING_LABEL, f"{SPREAD_MISSING_LABEL}: node has no label {c.key}"
            floor = c.state.floor(c.min_domains)
            count = c.state.counts.get(value, 0)
            skew = count + copies * int(selector_matches(c.selector, pod.labels)) - floor
            if skew > c.max_skew:
                return SPREAD_MISMATCH, (
                    f"{SPREAD_MISMATCH}: {c.key}={value} would have skew {skew} > maxSkew {c.max_skew} "
                    f"({count} matching pods there, minimum {floor})")
        return None

    def commit(self, pod: Pod, node: Node, count: int) -> None:
        if not pod.deleting:
            for spread in self.spreads.counting(self.placed.class_of(pod)):
                spread.add(node.name, count)

    def first_and_last(self, ranked: list[Item]) -> tuple[list[Item], list[Item]]:
        return [], []

    def arrange(self, middle: list[Item]) -> list[Item]:
        """Level by level: a pod's level is the count its domain of its hard constraint with the
        fewest domains has when it arrives, if every pod before it in queue order went there
        first. Pods without such a constraint come first."""
        arrivals: dict[tuple[int, str], int] = {}
        levels = []
        for index, (pod, node, _) in enumerate(middle):
            spreads = self.hard_spreads(pod)
            if not spreads:
                levels.append((-1, index))
                continue
            primary = min(spreads, key=lambda c: len(c.state.counts))
            value = node.labels.get(primary.key, "")
            slot = (id(primary.state), value)
            arrivals[slot] = arrivals.get(slot, primary.state.counts.get(value, 0)) + 1
            levels.append((arrivals[slot], index))
        return [middle[index] for _, index in sorted(levels)]

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
                by_key = self.spreads.by_key
                if signature not in by_key:
                    by_key[signature] = self._new_spread(pod, c.topology_key, selector, keys, affinity, taints)
                found.append(_HardSpread(c.topology_key, c.max_skew, c.min_domains, selector, by_key[signature]))
            self.hard_spreads_of[pod.key] = tuple(found)
        return self.hard_spreads_of[pod.key]

    def _new_spread(self, pod: Pod, key: str, selector: tuple[Requirement, ...] | None, keys: tuple[str, ...],
                    affinity: object, taints: object) -> _Spread:
        inputs = (keys, affinity, taints)
        if inputs not in self.eligible_nodes:
            self.eligible_nodes[inputs] = [
                node for node in self.placed.nodes.values()
                if all(k in node.labels for k in keys)
                and (affinity is None or node_affinity_matches(pod, node))
                and (taints is None or _tolerates_hard_taints(pod, node))]
        eligible = {node.name: node.labels[key] for node in self.eligible_nodes[inputs]}
        spread = _Spread(pod.namespace, selector, eligible)
        for cls, where in self.placed.placed_on.items():
            if spread.counts_class(cls, self.placed):
                for node_name, terminating, count in where:
                    if not terminating:
                        spread.add(node_name, count)
        return spread


def _tolerates_hard_taints(pod: Pod, node: Node) -> bool:
    return all(tolerates(pod, t.key, t.value, t.effect) for t in node.taints if t.effect in (NO_SCHEDULE, NO_EXECUTE))


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


def applies(snapshot: Snapshot) -> bool:
    """Some pending pod has a DoNotSchedule constraint (else every placement passes)."""
    return any(c.hard for pod in snapshot.pending for c in pod.spread)


CHECK = ReplayCheck(applies, SpreadReplay)
