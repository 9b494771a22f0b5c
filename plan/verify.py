"""Independent verification of a plan before anything is bound.

Every proposed placement is re-checked, pod by pod, against each hard constraint of
``placement-rules.md`` and against the snapshot's free capacity. The rules are written
out plainly here and on purpose share no code with ``models/`` or ``solver/`` (which
compute eligibility vectorised): a bug in one is caught by the other. Only
``kube`` (the objects, settings such as ``kube.gpu_conventions``, the plan's replay pod by pod
``kube.replay``) may be imported, and the rules' own verifier checks
(``models/plugins/<rule>/verify.py``, which import only ``kubeplace.kube`` and each other), run
through their descriptors (:class:`RuleCheck`). A plan with any :class:`Violation` must be
refused.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeplace.kube.dra import ClaimAllocation, Devices
from kubeplace.kube.gpu_conventions import DEFAULT_CONVENTIONS, GpuConventions
from kubeplace.kube.objects import CPU, PODS, Node, Pod, Snapshot
from kubeplace.kube.plan_view import Placed, PlanView
from kubeplace.kube.replay import Counted, Replay, replay
from kubeplace.kube.storage_objects import ClaimChoice
from kubeplace.models.plugins import RULES
from kubeplace.models.rules import NodeCheck, Verifier

ExtraCheck = Callable[[Pod, Node], str | None]



@dataclass(frozen=True)
class RuleCheck:
    """An enabled rule's verifier check, with the args the profile gives the rule."""

    name: str
    verifier: Verifier
    args: Any = None


def rule_checks(names: Collection[str] | None = None, args: Mapping[str, Any] | None = None) -> tuple[RuleCheck, ...]:
    """The verifier checks of the in-tree rules in ``names`` (default: every rule) and of those
    verified always, in registry order, each with its args from ``args`` or else the rule's
    default args."""
    given = args or {}
    out = []
    for r in RULES:
        if r.verify is not None and (names is None or r.name in names or r.verified_always):
            default = r.factory.args_type() if r.factory.args_type is not None else None
            out.append(RuleCheck(r.name, r.verify, given.get(r.name) or default))
    return tuple(out)


@dataclass(frozen=True)
class VerifySettings:
    rules: tuple[RuleCheck, ...] = field(default_factory=rule_checks)
    """The rules whose own verifier checks run (those the profile enables)."""
    gpu: GpuConventions = DEFAULT_CONVENTIONS
    """Which resource names carry GPU requests (the configuration's, as the model reads them)."""

    def checks(self, rule: str) -> bool:
        """Whether the rule's own verifier check runs."""
        return any(r.name == rule for r in self.rules)


@dataclass(frozen=True)
class Violation:
    namespace: str
    name: str
    node: str
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} -> {self.node}: {self.detail}"


def verify(
    snapshot: Snapshot,
    counted: Sequence[Counted],
    settings: VerifySettings = VerifySettings(),
    extra_checks: Sequence[ExtraCheck] = (),
    volume_choices: Mapping[tuple[str, str], Sequence[ClaimChoice]] | None = None,
    claim_allocations: Mapping[tuple[str, str], Sequence[ClaimAllocation]] | None = None,
) -> list[Violation]:
    """All the reasons why ``counted`` ((namespace, name, node_name) triples, or with a count
    for stand-ins, :data:`Counted`) must not be bound; an empty list means the plan is valid.
    ``volume_choices`` (the volumes the plan binds the pods' unbound claims to) are checked when
    given, else that such volumes exist; so are ``claim_allocations`` (the devices the plan
    allocates to the pods' resource claims)."""
    checker = _Checker(snapshot, settings, extra_checks)
    violations: list[Violation] = []
    placements = [(c[0], c[1], c[2]) for c in counted]
    counts = [c[3] if len(c) == 4 else 1 for c in counted]
    for (namespace, name, node_name), count in zip(placements, counts, strict=True):
        violations.extend(
            Violation(namespace, name, node_name, rule, detail)
            for rule, detail in checker.place(namespace, name, node_name, count)
        )
    for node_name, pods in checker.placed.items():
        node, here = checker.nodes[node_name], checker.bound_on(node_name)
        violations.extend(_capacity(node, pods, here, snapshot.devices))
        violations.extend(_nominated_room(node, pods, here, snapshot.nominated))
    view = PlanView(snapshot, tuple(checker.accepted), volume_choices, claim_allocations)
    for rule in settings.rules:
        if rule.verifier.plan is not None:
            violations.extend(Violation(namespace, name, node_name, rule.name, detail)
                              for namespace, name, node_name, detail in rule.verifier.plan(view, rule.args))
    replayed = [rule.verifier.replay for rule in settings.rules if rule.verifier.replay is not None]
    if any(check.applies(snapshot) for check in replayed):
        violations.extend(Violation(v.namespace, v.name, v.node, v.rule, v.detail)
                          for v in replay(snapshot, counted, replayed).violations)
    return violations


def replay_plan(snapshot: Snapshot, counted: Sequence[Counted], rules: Sequence[RuleCheck] | None = None) -> Replay:
    """``counted`` replayed pod by pod (``kube.replay``) through the replay checks of ``rules``
    (default: every rule), in registry order, which is the kube-scheduler's filter order: the
    pods that fail, and an order to bind them in."""
    chosen = rule_checks() if rules is None else rules
    return replay(snapshot, counted, [rule.verifier.replay for rule in chosen if rule.verifier.replay is not None])


class _Checker:
    """Walks the plan in order, remembering which pods went where."""

    def __init__(
        self, snapshot: Snapshot, settings: VerifySettings, extra_checks: Sequence[ExtraCheck]
    ) -> None:
        self.snapshot, self.settings, self.extra_checks = snapshot, settings, extra_checks
        self.pending = {(pod.namespace, pod.name): pod for pod in snapshot.pending}
        self.nodes = snapshot.node_by_name
        self.copies: dict[tuple[str, str], int] = {}  # pod -> how many of it the plan places
        self.accepted: list[Placed] = []  # the placements checked, in plan order
        self.placed: dict[str, list[tuple[Pod, int]]] = {}  # node name -> pods placed there (and
        # how many of each), in plan order
        self._bound = snapshot.bound_by_node  # node name -> the snapshot's pods bound there
        self._nominated: dict[str, list[Pod]] = {}  # node name -> the pods nominated to it, in snapshot order
        for pod in snapshot.nominated:
            self._nominated.setdefault(pod.nominated_node, []).append(pod)
        self._node_checks: list[tuple[str, NodeCheck]] = [
            (rule.name, rule.verifier.node) for rule in settings.rules if rule.verifier.node is not None]
        self._there: dict[str, list[Pod]] = {}  # node name -> its running pods, then those placed so far

    def bound_on(self, node_name: str) -> Sequence[Pod]:
        """The snapshot's pods bound to ``node_name`` (looked up, not searched for: a plan of P
        pods on a cluster of B bound pods costs P + B, not P x B)."""
        return self._bound.get(node_name, ())

    def place(self, namespace: str, name: str, node_name: str, count: int = 1) -> list[tuple[str, str]]:
        """(rule, detail) for each problem of this one placement (``count`` copies of an object
        standing for several pods, ``Pod.copies``: a placement per node it takes some on)."""
        pod = self.pending.get((namespace, name))
        if pod is None:
            return [("Pending", "not one of the snapshot's pending pods")]
        so_far = self.copies.get((namespace, name), 0)
        if so_far and pod.copies == 1:
            return [("Pending", "placed more than once")]
        if count < 1 or so_far + count > pod.copies:
            return [("Pending", f"count {count}: {so_far + count} placed of its {pod.copies} copies")]
        self.copies[(namespace, name)] = so_far + count
        problems = list(_pod_state(pod))
        node = self.nodes.get(node_name)
        if node is None:
            return [*problems, ("NodeName", "no such node in the snapshot")]
        problems += _pair_rules(pod, node, self.snapshot, self.settings, self.extra_checks)
        here = self.placed.setdefault(node_name, [])
        if self._node_checks:
            there = self._there.get(node_name)
            if there is None:
                there = self._there[node_name] = [p for p in self.bound_on(node_name) if not p.finished]
            holding = [p for p in self._nominated.get(node_name, ()) if p.priority >= pod.priority]
            seen = [*there, *holding] if holding else there
            problems += ((name, detail) for name, check in self._node_checks
                         for detail in check(pod, count, node, seen))
            there.append(pod)  # (after the checks above, which have read it all)
        here.append((pod, count))
        self.accepted.append(Placed(pod, node, count))
        return problems


def _pod_state(pod: Pod) -> Iterator[tuple[str, str]]:
    if pod.unmodelled:
        yield "Unmodelled", f"left to default scheduler: {', '.join(pod.unmodelled)}"
    if pod.scheduling_gates:
        yield "SchedulingGates", f"has scheduling gates: {', '.join(pod.scheduling_gates)}"
    if pod.deleting:
        yield "Pending", "is being deleted"
    if pod.node_name:
        yield "Pending", f"already bound to {pod.node_name}"
    if pod.finished:
        yield "Pending", f"has finished (phase {pod.phase})"


def _pair_rules(
    pod: Pod, node: Node, snapshot: Snapshot, settings: VerifySettings, extra_checks: Sequence[ExtraCheck]
) -> Iterator[tuple[str, str]]:
    for rule in settings.rules:
        if rule.verifier.pair is not None:
            yield from ((rule.name, detail) for detail in rule.verifier.pair(pod, node, snapshot, rule.args))
    for check in extra_checks:
        try:
            reason = check(pod, node)
        except Exception as error:  # refuse the plan rather than bind past a broken check
            name = getattr(check, "__name__", type(check).__name__)
            reason = f"check {name} raised {type(error).__name__}: {error}"
        if reason is not None:
            yield "ExtraCheck", reason


def _requests(pod: Pod) -> dict[str, int]:
    requests = dict(pod.requests)
    requests[PODS] = max(requests.get(PODS, 0), 1)  # every pod takes one pod slot
    return requests


def _capacity(node: Node, placed: Sequence[tuple[Pod, int]], bound: Sequence[Pod],
              devices: Devices) -> Iterator[Violation]:
    """NodeResourcesFit. An extended resource a DeviceClass serves, on a node without any of it
    from a device plugin, is DRA's (its devices are checked by DynamicResources' check)."""
    used: dict[str, int] = {}
    for other in bound:
        if other.node_name == node.name and not other.finished:
            for resource, amount in _requests(other).items():
                used[resource] = used.get(resource, 0) + amount
    added: dict[str, int] = {}
    for pod, count in placed:  # count: copies of an object standing for several pods (Pod.copies)
        for resource, amount in _requests(pod).items():
            added[resource] = added.get(resource, 0) + amount * count
    for resource in sorted(added):
        allocatable = node.allocatable.get(resource, 0)
        if devices.serves(resource, node.allocatable):
            continue
        free = allocatable - used.get(resource, 0)
        if added[resource] <= 0 or added[resource] <= free:
            continue
        users = [pod for pod, _ in placed if _requests(pod).get(resource, 0) > 0]
        first = users[0]
        yield Violation(
            first.namespace,
            first.name,
            node.name,
            "NodeResourcesFit",
            f"Insufficient {resource}: needs {_amount(resource, added[resource] - free)} more than free "
            f"(allocatable {_amount(resource, allocatable)}, "
            f"bound pods {_amount(resource, used.get(resource, 0))}, "
            f"placed {_amount(resource, added[resource])} by {', '.join(p.key for p in users)})",
        )


def _nominated_room(node: Node, placed: Sequence[tuple[Pod, int]], bound: Sequence[Pod],
                    nominated: Sequence[Pod]) -> Iterator[Violation]:
    """NodeResourcesFit as the kube-scheduler runs it for each placed pod: with the pods nominated
    to the node of its priority or more added (``kube.nominated``), all the node's pods fit."""
    if not any(p.nominated_node == node.name for p in nominated):
        return
    total: dict[str, int] = {}
    for other, count in [*((b, 1) for b in bound if b.node_name == node.name and not b.finished), *placed]:
        for resource, amount in _requests(other).items():
            total[resource] = total.get(resource, 0) + amount * count
    for pod in sorted((p for p, _ in placed), key=lambda p: p.priority):  # the lowest priority leaves the most room
        held: dict[str, int] = {}
        for waiting_pod in nominated:
            if waiting_pod.nominated_node == node.name and waiting_pod.priority >= pod.priority:
                for resource, amount in _requests(waiting_pod).items():
                    held[resource] = held.get(resource, 0) + amount
        short = [r for r, amount in sorted(_requests(pod).items()) if amount > 0 and held.get(r, 0) > 0
                 and total.get(r, 0) + held[r] > node.allocatable.get(r, 0)]
        if short:
            r = short[0]
            waiting = ", ".join(p.key for p in nominated
                                if p.nominated_node == node.name and p.priority >= pod.priority)
            yield Violation(pod.namespace, pod.name, node.name, "NodeResourcesFit",
                            f"Insufficient {r}: the room of {waiting} (nominated, priority >= {pod.priority}) is held: "
                            f"{_amount(r, total[r] + held[r] - node.allocatable.get(r, 0))} short")
            return


def _amount(resource: str, value: int) -> str:
    return f"{value}m" if resource == CPU else str(value)
