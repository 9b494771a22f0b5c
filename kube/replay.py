"""A plan replayed pod by pod: the walk that the rules depending on other pods' places share
(PodTopologySpread and InterPodAffinity; their checks are in their folders,
``models/plugins/<rule>/verify.py``).

Such a rule holds a plan valid only if its pods can be bound one at a time in some order in
which each passes the kube-scheduler's checks against the bound pods and those bound before it.
:func:`replay` finds such an order by itself: the pods in the scheduling queue's order, then
what each rule asks for (:class:`ReplayRule`: pods that must go first or last, an order for the
rest); each pod is checked by the rules in the kube-scheduler's filter order (the order given),
the first that fails counting; a pod that fails is retried after later pods succeed, and what
still fails is a :class:`DomainViolation` with the kube-scheduler's reason.

:class:`Placed` is what the rules read of the cluster as the replay leaves it: the nodes, the
namespaces' labels and the pods placed so far (bound first), by label class.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kubeplace.kube.objects import Node, Pod, Snapshot

Placement = tuple[str, str, str]
"""(namespace, name, node name)"""
Counted = Placement | tuple[str, str, str, int]
"""A placement with, for an object standing for several pods (``Pod.copies``: a leader's
stand-in followers), how many of them go to the node; 1 when left out."""
Item = tuple[Pod, Node, Counted]
"""A placement of the plan with its pod and node."""
Failure = tuple[str, str]
"""(the kube-scheduler's reason, the reason and what caused it)"""
T = TypeVar("T")


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


class Placed:
    """The cluster as the replay leaves it: the nodes and the pods placed so far (bound first),
    indexed by label class (namespace, labels)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.nodes = {node.name: node for node in snapshot.nodes}
        self.namespace_labels = snapshot.namespace_labels
        self.classes: list[tuple[str, Mapping[str, str]]] = []
        self.class_ids: dict[tuple[str, frozenset[tuple[str, str]]], int] = {}
        self.placed_on: dict[int, list[tuple[str, bool, int]]] = {}  # class -> (node, terminating, how many)
        self.class_by_pod: dict[int, int] = {}  # id(pod) -> its class (the snapshot keeps the pods alive)

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

    def record(self, pod: Pod, node: Node, count: int = 1) -> None:
        """``count`` copies of ``pod`` on ``node`` (more than 1 only for ``Pod.copies``)."""
        self.placed_on.setdefault(self.class_of(pod), []).append((node.name, pod.deleting, count))


class Indexes(Generic[T]):
    """A rule's indexes of the placed pods (one per term or constraint), by key, and per label
    class the indexes that count its pods (recomputed when indexes were added)."""

    def __init__(self, counts: Callable[[T, int], bool]) -> None:
        self.by_key: dict[Hashable, T] = {}
        self._counts = counts
        self._counting: dict[int, tuple[int, list[T]]] = {}

    def counting(self, cls: int) -> list[T]:
        cached = self._counting.get(cls)
        if cached is None or cached[0] != len(self.by_key):
            cached = self._counting[cls] = (len(self.by_key),
                                            [i for i in self.by_key.values() if self._counts(i, cls)])
        return cached[1]


class ReplayRule(Protocol):
    """One rule's state for one replay (built on :class:`Placed`, told of every pod placed)."""

    @property
    def name(self) -> str: ...

    def check(self, pod: Pod, node: Node, count: int) -> Failure | None:
        """Why the rule refuses the last of ``count`` copies of ``pod`` going to ``node`` now."""

    def commit(self, pod: Pod, node: Node, count: int) -> None:
        """``count`` copies of ``pod`` are placed on ``node`` (already recorded in ``Placed``)."""

    def first_and_last(self, ranked: list[Item]) -> tuple[list[Item], list[Item]]:
        """Of the plan in queue order, the placements that must replay first and those that
        must replay last, each in the order they must go."""

    def arrange(self, middle: list[Item]) -> list[Item]:
        """The other placements in the order they should replay."""


@dataclass(frozen=True)
class ReplayCheck:
    """A rule checked by the replay (``models.rules.Verifier.replay``)."""

    applies: Callable[[Snapshot], bool]
    """Whether the rule can refuse anything in the snapshot (else the replay leaves it out)."""
    start: Callable[[Placed], ReplayRule]
    """Its state for one replay, before any pod is placed."""


def replay(snapshot: Snapshot, placements: Sequence[Counted], checks: Sequence[ReplayCheck]) -> Replay:
    """Replay ``placements`` in an order of their own through ``checks`` (in the kube-scheduler's
    filter order) and report the pods that fail (the copies of an object standing for several
    pods as one step per node, checked and counted together)."""
    placed = Placed(snapshot)
    rules = [check.start(placed) for check in checks if check.applies(snapshot)]
    for bound in snapshot.bound:
        if bound.node_name in placed.nodes:
            _commit(placed, rules, bound, placed.nodes[bound.node_name], 1)
    pending = {(pod.namespace, pod.name): pod for pod in snapshot.pending}
    valid: list[Item] = []
    skipped: list[Counted] = []
    seen: set[tuple[str, ...]] = set()
    for placement in placements:
        pod, node = pending.get((placement[0], placement[1])), placed.nodes.get(placement[2])
        once = placement[:2] if pod is None or pod.copies == 1 else placement[:3]
        if pod is None or node is None or once in seen:
            skipped.append(placement)
        else:
            seen.add(once)
            valid.append((pod, node, placement))
    remaining = _replay_order(rules, valid)
    order: list[Counted] = []
    failures: dict[Counted, tuple[str, str, str]] = {}
    while remaining:
        failed = []
        for pod, node, placement in remaining:
            count = placement[3] if len(placement) == 4 else 1
            failure = _first_failure(rules, pod, node, count)
            if failure is None:
                _commit(placed, rules, pod, node, count)
                order.append(placement)
            else:
                failures[placement] = failure
                failed.append((pod, node, placement))
        if len(failed) == len(remaining):
            break
        remaining = failed
    violations = tuple(DomainViolation(*p[:3], *failures[p]) for _, _, p in remaining)
    return Replay(violations, (*order, *(p for _, _, p in remaining), *skipped))


def _commit(placed: Placed, rules: Sequence[ReplayRule], pod: Pod, node: Node, count: int) -> None:
    placed.record(pod, node, count)
    for rule in rules:
        rule.commit(pod, node, count)


def _first_failure(rules: Sequence[ReplayRule], pod: Pod, node: Node, count: int) -> tuple[str, str, str] | None:
    """(rule, reason, detail) of the first rule that refuses the pod, in the order given."""
    for rule in rules:
        failure = rule.check(pod, node, count)
        if failure is not None:
            return rule.name, *failure
    return None


def _replay_order(rules: Sequence[ReplayRule], valid: list[Item]) -> list[Item]:
    """Queue order, then each rule's placements to go first and last, and the rest arranged."""
    ranked = sorted(valid, key=lambda item: queue_rank(item[0]))
    first: list[Item] = []
    last: list[Item] = []
    for rule in rules:
        before, after = rule.first_and_last(ranked)
        first += before
        last += after
    taken = {placement for _, _, placement in (*first, *last)}
    middle = [item for item in ranked if item[2] not in taken]
    for rule in rules:
        middle = rule.arrange(middle)
    return [*first, *middle, *last]


def queue_rank(pod: Pod) -> tuple[int, str, str, str]:
    """PrioritySort: higher priority first, then older, then by name."""
    return -pod.priority, pod.creation, pod.namespace, pod.name
