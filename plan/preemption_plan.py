"""``plan --preempt`` and ``serve``: the plan with preemption, as one library call.

First the plan without preemption (:func:`plan.pipeline.make_plan`, within the time limit, so a
batch that needs no preemption is planned as well as without it). When a pod is left out and
some running pod of lower priority than a pending pod's power could make room, the preemption
problem is built and solved (``solver.solve_preemption``, within the time limit again) from that plan, and
the plan then lists the victims (``preemptions``: each with its node, priority and the placed
pods it is evicted for) beside the placements. The verifier checks the placements against the
cluster with the victims removed, and the victims themselves (``plan.verify_preempt``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from kubeplace.kube.objects import Pod, Snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.devices import dra_devices
from kubeplace.models.gpu import WHOLE, DeviceTable
from kubeplace.models.preempt_problem import PreemptionProblem, preemption_problem
from kubeplace.models.preempt_rows import ORDER
from kubeplace.models.preemption import NO_POWER, candidates, not_preempting
from kubeplace.models.problem import Assignment, DeviceUse, IntArray, summed_rows
from kubeplace.models.terms import objective_value
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.explain import After, explain
from kubeplace.plan.gang_status import gang_statuses
from kubeplace.plan.pipeline import Planned, claim_allocations, make_plan, pods_per_node, utilisation
from kubeplace.plan.plan import GangStatus, Placement, Plan, Preemption, PreemptionSummary, Unplaced
from kubeplace.plan.verify import Violation
from kubeplace.plan.verify_preempt import verify_preemptions
from kubeplace.solver.budget import Budget
from kubeplace.solver.run import Event
from kubeplace.solver.shares import PREEMPTION_SOLVE_MIN_SECONDS
from kubeplace.solver.solve import SolveReport
from kubeplace.solver.solve_preemption import PreemptionReport, solve_preemption


def make_preemption_plan(snapshot: Snapshot, config: Configuration, profile: Profile, settings: SolverSettings,
                         on_event: Callable[[Event], None] | None = None,
                         preemption: SolverSettings | None = None) -> Planned:
    """``preemption``: the solver settings of the preemption solve, when not ``settings``'s. The
    time limit of ``settings`` is plan --preempt's one budget: the plan without preemption has it,
    the preemption solve what that plan leaves (at least ``shares.PREEMPTION_SOLVE_MIN_SECONDS``)."""
    whole = Budget.of(settings.time_limit)
    plain = make_plan(snapshot, config, profile, settings, on_event, budget=whole)
    placed = {(p.namespace, p.name) for p in plain.plan.placements}
    left = [pod for pod in snapshot.pending if (pod.namespace, pod.name) not in placed]
    if not left:
        return _without_victims(plain, {}, 0)
    blocked = not_preempting(snapshot, config.gpu)
    power = {pod.key: NO_POWER if pod.key in blocked else pod.priority for pod in snapshot.pending}
    attempts = sum(1 for pod in left if power[pod.key] > NO_POWER)
    lowest = min((u.priority for u in candidates(snapshot, power, config.gpu).units), default=None)
    if lowest is None or not any(pw > lowest for pw in power.values()):
        # nobody may be evicted: the preemption problem (an aggregation of every running pod) is not built
        return _without_victims(plain, blocked, attempts)
    pp = preemption_problem(snapshot, config, profile)
    lowest = int(pp.victim_priority.min()) if pp.n_victims else None
    if lowest is None or not any(pw > lowest for pw in _pod_power(pp).values()):
        return _without_victims(plain, pp.not_preempting, attempts)
    start = _start(pp, plain.plan.placements)
    report = solve_preemption(pp, start, preemption or settings,
                              whole.split(1.0).at_least(PREEMPTION_SOLVE_MIN_SECONDS))
    if not report.values.evicted.any():  # nobody to evict: the plan without preemption stands
        return _without_victims(plain, pp.not_preempting, attempts)
    return _planned(snapshot, config, profile, pp, report, plain, attempts)


def _pod_power(pp: PreemptionProblem) -> dict[int, int]:
    """Pending pod index -> its power."""
    return {m: int(pp.power[c]) for c in range(pp.n_pending) for m in pp.problem.members[c]}


def _without_victims(plain: Planned, not_preempting: Mapping[str, str], attempts: int) -> Planned:
    """The plan without preemption, saying that preemption was weighed and evicts nobody
    (``not_preempting``: pending pod key -> why it may not preempt)."""
    summary = PreemptionSummary(ORDER, 0, 0, None, 0, 0, "optimal", attempts)
    plan = plain.plan
    unplaced = tuple(replace(u, reasons=(*u.reasons, why)) if (why := _reason(not_preempting, u)) else u
                     for u in plan.unplaced)
    plan = replace(plan, unplaced=unplaced, summary=replace(plan.summary, preemption=summary))
    return replace(plain, plan=plan)


def _reason(not_preempting: Mapping[str, str], u: Unplaced) -> str:
    why = not_preempting.get(f"{u.namespace}/{u.name}", "")
    return f"preemption: {why}" if why and not u.left_to_default_scheduler else ""


def _start(pp: PreemptionProblem, placements: Sequence[Placement]) -> Assignment:
    """The plan's placements in the preemption problem's classes, with their GPU devices."""
    p = pp.problem
    class_of = {m: c for c in range(pp.n_pending) for m in p.members[c]}
    index = {(pod.namespace, pod.name): m for m, pod in enumerate(pp.pods[: pp.n_pending_pods])}
    nodes = {name: i for i, name in enumerate(p.node_names)}
    y = np.zeros((p.n_classes, p.n_nodes), dtype=np.int64)
    rows = []
    for placement in placements:
        c, i = class_of[index[(placement.namespace, placement.name)]], nodes[placement.node]
        y[c, i] += 1
        rows += [(c, i, d, 1) for d in placement.gpus]
    a = Assignment.from_dense(y)
    if not rows:
        return a
    arr = np.array(rows, dtype=np.int64)
    return replace(a, devices=DeviceUse(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]))


def _planned(snapshot: Snapshot, config: Configuration, profile: Profile, pp: PreemptionProblem,
             report: PreemptionReport, plain: Planned, attempts: int) -> Planned:
    p = pp.problem
    a = report.assignment
    chosen = _victims(pp, a)
    evicted = {v.key for v in chosen}
    after = replace(snapshot, bound=tuple(b for b in snapshot.bound if b.key not in evicted))
    pending = pp.pending_part(a)
    pending = replace(pending, devices=_devices_after(pp, after, pending, config))
    pairs = pods_per_node(pp.agg, pending, pp.pods)
    claims, not_allocated = claim_allocations(plain.plugins, [(pod, node) for pod, node, _, _ in pairs], snapshot)
    dropped = [Unplaced(pod.namespace, pod.name, (f"node {node}: {not_allocated[pod.key]}",))
               for pod, node, _, _ in pairs if pod.key in not_allocated]
    pairs = [pair for pair in pairs if pair[0].key not in not_allocated]
    placements = tuple(Placement(pod.namespace, pod.name, node, pod.uid, devs, claims=claims.get(pod.key, ()))
                       for pod, node, devs, _ in pairs)
    victims = _attributed(pp, chosen, placements)
    placed_per_class = a.placed_per_class(p.n_classes)
    gangs = gang_statuses(snapshot, pp.agg, placed_per_class)
    unplaced = (*_unplaced(snapshot, pp, a, placed_per_class, gangs), *dropped)
    values = report.values
    highest = int(pp.tiers[values.highest - 1]) if values.highest else None
    preemptors = {k for v in victims for k in v.for_pods}
    terms = pp.terms
    summary = replace(
        plain.plan.summary,
        pods_placed=len(placements), pods_unplaced=len(unplaced),
        pods_left_to_default_scheduler=len(pp.agg.left), placed_weight=_plain_weight(snapshot, plain, pairs),
        objective=round(report.objective, 6),
        objective_before=round(objective_value(p, pp.all_kept(), terms), 6),
        bound=None, gap=None, status=report.status, seconds=round(plain.plan.summary.seconds + report.seconds, 3),
        backend=report.backend, utilisation=utilisation(pp.agg, a, pp.all_kept()),
        preemption=PreemptionSummary(ORDER, len(victims), len(preemptors), highest, values.violations, values.cost,
                                     report.status, attempts))
    plan = Plan(profile.scheduler_name, placements, unplaced, summary, snapshot.source,
                (*plain.plan.steps, *(f"preemption: {s}" for s in report.steps)), tuple(gangs), victims)
    violations = verify_preempting(snapshot, placements, victims, config, profile)
    plan = replace(plan, summary=replace(plan.summary, verified=not violations))
    solve = SolveReport(pending, report.status, summary.placed_weight, len(placements), report.objective, None,
                        report.seconds, report.backend, report.steps)
    return Planned(plan, pp.agg, solve, plain.plugins, terms, tuple(violations))


def verify_preempting(snapshot: Snapshot, placements: Sequence[Placement], victims: Sequence[Preemption],
                      config: Configuration, profile: Profile) -> list[Violation]:
    """The independent verifier's objections: the placements on the cluster the victims leave
    (``plan.checks.verify_plan``), and the victims themselves (``plan.verify_preempt``)."""
    evicted = {v.key for v in victims}
    after = replace(snapshot, bound=tuple(b for b in snapshot.bound if b.key not in evicted))
    violations = verify_plan(after, placements, config, profile)
    return violations + verify_preemptions(snapshot, [(x.namespace, x.name, x.node) for x in placements],
                                           [(v.namespace, v.name, v.node, v.for_pods) for v in victims],
                                           config.gpu)


def _plain_weight(snapshot: Snapshot, plain: Planned,
                  pairs: Sequence[tuple[Pod, str, tuple[int, ...], int]]) -> int:
    """The placed weight of these placements as the plan without preemption weighs pods (the
    preemption problem's tiers also count the victims' priorities)."""
    p = plain.aggregation.problem
    weight = {snapshot.pending[m].key: p.exact_weight[c] for c in range(p.n_classes) for m in p.members[c]}
    return sum(weight.get(pod.key, 0) for pod, _, _, _ in pairs)


def _victims(pp: PreemptionProblem, a: Assignment) -> list[Preemption]:
    """The pods evicted: of each victim class, its youngest pods first (the least important of
    equals, as the kube-scheduler orders them)."""
    p = pp.problem
    evicted = pp.victim_count - pp.kept(a)
    out = []
    for v in np.nonzero(evicted > 0)[0].tolist():
        members = sorted(p.members[pp.n_pending + v], key=lambda m: pp.pods[m].creation, reverse=True)
        for m in members[: int(evicted[v])]:
            pod = pp.pods[m]
            out.append(Preemption(pod.namespace, pod.name, p.node_names[int(pp.victim_node[v])], pod.priority, (),
                                  pod.uid))
    return out


def _attributed(pp: PreemptionProblem, victims: list[Preemption],
                placements: Sequence[Placement]) -> tuple[Preemption, ...]:
    """Each victim with the placed pods it frees room for: those placed on its node (on one of
    its gang's nodes) whose power is above its unit's priority."""
    index = {(pod.namespace, pod.name): m for m, pod in enumerate(pp.pods)}
    power = _pod_power(pp)
    by_node: dict[str, list[tuple[str, int]]] = {}
    for x in placements:
        by_node.setdefault(x.node, []).append((f"{x.namespace}/{x.name}", power[index[(x.namespace, x.name)]]))
    unit_nodes: dict[int, set[str]] = {}
    unit_of: dict[str, tuple[int, int]] = {}
    p = pp.problem
    for v in range(pp.n_victims):
        node = p.node_names[int(pp.victim_node[v])]
        unit = int(pp.victim_unit[v])
        if unit >= 0:
            unit_nodes.setdefault(unit, set()).add(node)
        for m in p.members[pp.n_pending + v]:
            unit_of[pp.pods[m].key] = (unit, int(pp.victim_priority[v]))
    out = []
    for victim in victims:
        unit, priority = unit_of[victim.key]
        nodes = unit_nodes.get(unit, {victim.node}) if unit >= 0 else {victim.node}
        for_pods = sorted(k for n in nodes for k, pw in by_node.get(n, []) if pw > priority)
        out.append(replace(victim, for_pods=tuple(for_pods)))
    return tuple(sorted(out, key=lambda v: (v.node, v.namespace, v.name)))


def _devices_after(pp: PreemptionProblem, after: Snapshot, pending: Assignment, config: Configuration) -> DeviceUse:
    """GPU devices for the placed pods, on the nodes as the evictions leave them: pods sharing a
    GPU keep the devices the solve gave them, whole-GPU pods take the lowest free ones."""
    p = pp.problem
    if not p.has_devices:
        return DeviceUse.empty()
    dra = dra_devices(after.devices, after.nodes, config.gpu.device_resource)
    free: IntArray = DeviceTable.build(after.nodes, after.bound, config.gpu, dra).free.copy()
    rows = []
    d = pending.devices
    for c, i, dev, k in zip(d.cls.tolist(), d.node.tolist(), d.device.tolist(), d.counts.tolist(), strict=True):
        if p.gpu_milli[c] < WHOLE:
            rows.append((c, i, dev, k))
            free[i, dev] -= int(p.gpu_milli[c]) * k
    for c, i, n in zip(pending.cls.tolist(), pending.node.tolist(), pending.counts.tolist(), strict=True):
        if p.gpu_count[c] == 0 or p.gpu_milli[c] < WHOLE:
            continue
        for _ in range(n * int(p.gpu_count[c])):
            room = np.nonzero(free[i] >= WHOLE)[0]
            if len(room) == 0:
                break  # the verifier reports it: a bug, never a silent overlap
            free[i, room[0]] = 0
            rows.append((c, i, int(room[0]), 1))
    if not rows:
        return DeviceUse.empty()
    arr = np.array(rows, dtype=np.int64)
    return DeviceUse(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])


def _unplaced(snapshot: Snapshot, pp: PreemptionProblem, a: Assignment, placed_per_class: IntArray,
              gangs: Sequence[GangStatus]) -> tuple[Unplaced, ...]:
    p = pp.problem
    after = After.of(p, a)
    gang_reason = {c: g.reason for g, gang in zip(gangs, p.gangs, strict=True) if not g.placed for c in gang.classes}
    out: list[Unplaced] = []
    for c in range(pp.n_pending):
        seen = _as_seen_by(pp, a, after, int(pp.power[c]))
        for m in p.members[c][int(placed_per_class[c]):]:
            pod: Pod = pp.pods[m]
            preemption = _why_not(pp, pod, p.n_nodes)
            why = tuple(r for r in (gang_reason.get(c, ""), explain(pp.agg, c, seen), preemption) if r)
            out.append(Unplaced(pod.namespace, pod.name, why))
    out += [Unplaced(pod.namespace, pod.name, tuple(f"left to the default scheduler: {r}" for r in pod.unmodelled),
                     True) for pod in pp.agg.left]
    return tuple(out)


def _as_seen_by(pp: PreemptionProblem, a: Assignment, after: After, power: int) -> After:
    """The cluster the plan leaves as a pod of preemption ``power`` sees it: the room that victims
    of a priority at or above its power free is not its to take (it goes to the preemptors they
    are evicted for, as the preemption rows say), so it is still taken. A pod that may not
    preempt (``preemptionPolicy: Never``, NO_POWER) sees every victim where it ran."""
    evicted = pp.victim_count - pp.kept(a)
    held = np.nonzero((evicted > 0) & (pp.victim_priority >= power))[0]
    if len(held) == 0:
        return after
    p = pp.problem
    taken = summed_rows(p.n_nodes, pp.victim_node[held], p.demand[pp.n_pending + held], evicted[held])
    return replace(after, free=after.free - taken)


def _why_not(pp: PreemptionProblem, pod: Pod, nodes: int) -> str:
    why = pp.not_preempting.get(pod.key)
    if why:
        return f"preemption: {why}"
    return f"preemption: 0/{nodes} nodes are available: no set of pods it may preempt makes room for it"
