"""snapshot -> aggregated problem -> solve -> plan, as one library call.

The CLI and the benchmarks call ``make_plan``; nothing here touches the cluster. Every plan is
re-checked by the independent verifier (``plan/verify.py``) before it is returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from kubeplace.kube.dra import ClaimAllocation
from kubeplace.kube.errors import InconsistentAnswer
from kubeplace.kube.objects import Pod, Snapshot
from kubeplace.kube.storage_objects import ClaimChoice
from kubeplace.models import evaluate
from kubeplace.models.aggregate import Aggregation, aggregate
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.fragmentation import cluster_fragmentation
from kubeplace.models.framework import ObjectiveTerm, PluginSet
from kubeplace.models.plugins.dynamic_resources import DynamicResources
from kubeplace.models.plugins.volume_binding import VolumeBinding
from kubeplace.models.problem import Assignment, Problem
from kubeplace.models.terms import objective_value
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.explain import After, explain
from kubeplace.plan.gang_status import gang_statuses
from kubeplace.plan.gc_pause import fewer_collections
from kubeplace.plan.plan import Placement, Plan, ResourceUse, Summary, Unplaced
from kubeplace.plan.verify import Violation, replay_plan
from kubeplace.solver.budget import Budget
from kubeplace.solver.emulate.scheduler import as_candidate, emulate
from kubeplace.solver.run import Event, run_budget
from kubeplace.solver.solve import SolveReport, solve

EMULATION_PAIRS = 50_000_000
"""Nodes x pending pods up to which the kube-scheduler emulation is a candidate (5,000 x 10,000:
about 5 s)."""
SUMMARY_RESOURCES = ("cpu", "memory", "pods")
"""Resources whose utilisation the summary reports, with the GPU device resource."""


@dataclass(frozen=True)
class Planned:
    """A plan and the intermediate results it came from (for verification, benchmarks).

    ``violations`` are the independent verifier's objections to the plan; there should be
    none (``plan.summary.verified``), and a plan with any must not be shown as valid."""

    plan: Plan
    aggregation: Aggregation
    report: SolveReport
    plugins: PluginSet
    terms: tuple[ObjectiveTerm, ...]
    """The objective the plan was solved for: the score plugins' terms for this problem."""
    violations: tuple[Violation, ...] = ()


def make_plan(snapshot: Snapshot, config: Configuration, profile: Profile, settings: SolverSettings,
              on_event: Callable[[Event], None] | None = None,
              intended: Sequence[tuple[str, str]] = (), budget: Budget | None = None) -> Planned:
    """``intended``: (pod key, node name) pairs made elsewhere (the provisioning's nodes), in
    order: one more candidate for the solver, kept only where the model's rules take it.
    ``budget``: the solve's, when a caller's phase gives it one (else ``run_budget`` of
    ``settings``, made when the solve starts)."""
    with fewer_collections():
        return _make_plan(snapshot, config, profile, settings, on_event, intended, budget)


def _make_plan(snapshot: Snapshot, config: Configuration, profile: Profile, settings: SolverSettings,
               on_event: Callable[[Event], None] | None, intended: Sequence[tuple[str, str]],
               budget: Budget | None) -> Planned:
    plugins = instantiate(config, profile, with_stand_ins(snapshot))
    snapshot = plugins.defaulted(snapshot)  # the default spread constraints, for every step below
    planning = plugins.defaulted(with_stand_ins(snapshot))
    agg = aggregate(planning, plugins, config.gpu, profile.placement_weight)
    terms = plugins.terms(agg.problem)
    # the emulation runs before the solve, bounded by the same limit but not charged to it (up to
    # about 5 s on a large cluster); with one worker it is never cut (its budget is counted)
    steps = _emulation(planning, agg, plugins, run_budget(settings, budget))
    seeds = [] if steps is None else [(as_candidate(agg.problem, steps), "kube-scheduler emulation")]
    if intended:
        seeds.append((as_candidate(agg.problem, _steps_of(planning, agg.problem, intended)), "provisioning"))
    report = solve(agg.problem, terms, settings, on_event, seeds, budget)
    planned = _verified(snapshot, planning, config, profile, agg, report, plugins, terms)
    emulated = None if steps is None else _emulation_kept(agg.problem, report, steps, terms)
    if emulated is not None:
        alternative = _verified(snapshot, planning, config, profile, agg, emulated, plugins, terms)
        if not alternative.violations:
            return alternative
    return planned


def _steps_of(planning: Snapshot, problem: Problem, pairs: Sequence[tuple[str, str]]) -> list[tuple[int, int]]:
    """(class, node) steps of (pod key, node name) pairs; pairs the problem does not hold are skipped."""
    class_of = {planning.pending[m].key: c for c, members in enumerate(problem.members) for m in members}
    node_of = {name: i for i, name in enumerate(problem.node_names)}
    return [(class_of[pod], node_of[node]) for pod, node in pairs if pod in class_of and node in node_of]


Placer = Callable[[Snapshot, Aggregation, PluginSet], Assignment]
"""A placement policy over the aggregated problem of a (defaulted) snapshot."""


def plan_placed_by(snapshot: Snapshot, config: Configuration, profile: Profile, place: Placer, name: str) -> Planned:
    """The plan of ``place``'s placement instead of the solver's (a baseline scheduler's policy, for
    ``kubeplace simulate``): built and checked by the independent verifier like every plan."""
    with fewer_collections():
        plugins = instantiate(config, profile, with_stand_ins(snapshot))
        snapshot = plugins.defaulted(snapshot)
        planning = plugins.defaulted(with_stand_ins(snapshot))
        agg = aggregate(planning, plugins, config.gpu, profile.placement_weight)
        terms = plugins.terms(agg.problem)
        started = time.monotonic()
        a = place(planning, agg, plugins)
        report = SolveReport(a, "greedy", evaluate.placed_weight(agg.problem, a), evaluate.pods_placed(a),
                             objective_value(agg.problem, a, terms), None, time.monotonic() - started, name,
                             (name,))
        return _verified(snapshot, planning, config, profile, agg, report, plugins, terms)


def _verified(snapshot: Snapshot, planning: Snapshot, config: Configuration, profile: Profile, agg: Aggregation,
              report: SolveReport, plugins: PluginSet, terms: tuple[ObjectiveTerm, ...]) -> Planned:
    plan = _to_plan(planning, agg, report, profile, terms, plugins)
    if agg.problem.has_domain_rules:
        plan = replace(plan, placements=replay_order(snapshot, plan.placements))
    violations = tuple(verify_plan(planning, (*plan.placements, *plan.reservations), config, profile, plugins))
    plan = replace(plan, summary=replace(plan.summary, verified=not violations))
    return Planned(plan, agg, report, plugins, terms, violations)


def with_stand_ins(snapshot: Snapshot) -> Snapshot:
    """The snapshot with its stand-in followers among the pending pods, last."""
    if not snapshot.reserved:
        return snapshot
    return replace(snapshot, pending=(*snapshot.pending, *snapshot.reserved), reserved=())


def _emulation_kept(problem: Problem, report: SolveReport, steps: Sequence[tuple[int, int]],
                    terms: tuple[ObjectiveTerm, ...]) -> SolveReport | None:
    """The kube-scheduler emulation's placements as they are, when they place more than the solve.

    The model expresses some spread constraints with a fixed floor, stricter than the
    kube-scheduler's skew checked pod by pod, and the emulation's candidate is
    replayed through the model's rules; so on rare clusters the one-pod-at-a-time placement
    places more. It is then taken whole, if the independent verifier accepts it (the caller
    checks), so that a plan never places fewer pods than the kube-scheduler would. Only for
    batches without gangs or GPU devices, which the emulation places member by member and
    without devices."""
    classes = {c for c, _ in steps}
    if problem.has_devices or any(c in classes for gang in problem.gangs for c in gang.classes):
        return None
    y = np.zeros((problem.n_classes, problem.n_nodes), dtype=np.int64)
    for c, i in steps:
        y[c, i] += 1
    raw = Assignment.from_dense(y)
    weight = evaluate.placed_weight(problem, raw)
    if weight <= report.placed_weight:
        return None
    return replace(report, assignment=raw, status="feasible", placed_weight=weight,
                   pods_placed=evaluate.pods_placed(raw), objective=objective_value(problem, raw, terms),
                   bound=None,  # the model's bound is its stricter rules', not the kube-scheduler's
                   steps=(*report.steps, "kube-scheduler emulation kept: it places more pods than the model's "
                                         "fixed-floor spread allows"))


def replay_order(snapshot: Snapshot, placements: tuple[Placement, ...]) -> tuple[Placement, ...]:
    """The placements in an order in which the kube-scheduler accepts them one by one, as the
    independent verifier finds it: bind in this order, and the inter-pod rules hold
    at every step."""
    order = replay_plan(snapshot, [(p.namespace, p.name, p.node) for p in placements]).order
    rank = {(placed[0], placed[1]): k for k, placed in enumerate(order)}
    return tuple(sorted(placements, key=lambda p: rank.get((p.namespace, p.name), len(rank))))


def _emulation(snapshot: Snapshot, agg: Aggregation, plugins: PluginSet,
               budget: Budget) -> list[tuple[int, int]] | None:
    """With inter-pod rules, the kube-scheduler's one-pod-at-a-time placement (``solver.emulate``),
    as (class, node) steps in its order: one more candidate, so that a plan never places fewer
    pods than it would; None without inter-pod rules or beyond
    EMULATION_PAIRS nodes x pods. With the profile's filters, within ``budget`` (the queue's
    beginning only, if it runs out; whole on a counted budget, which it never charges, so runs repeat)."""
    p = agg.problem
    pods = [snapshot.pending[m] for members in p.members for m in members]
    if not p.has_domain_rules or p.n_nodes * len(pods) > EMULATION_PAIRS:
        return None
    class_of = {snapshot.pending[m].key: c for c, members in enumerate(p.members) for m in members}
    node_of = {name: i for i, name in enumerate(p.node_names)}
    emulated = emulate(snapshot, pods, plugins.filters, budget=budget)
    return [(class_of[f"{ns}/{name}"], node_of[node]) for ns, name, node in emulated.placements]


def pods_per_node(agg: Aggregation, a: Assignment,
                  pending: tuple[Pod, ...]) -> list[tuple[Pod, str, tuple[int, ...], int]]:
    """Class counts to pods: members of a class take its nodes in order, and GPU pods
    their devices; each with how many of its copies go there (1, but for an object standing for
    several pods, ``Pod.copies``: then all the devices of its copies there)."""
    p = agg.problem
    _check_counts(agg, a, pending)
    taken = np.zeros(p.n_classes, dtype=np.int64)
    devices = _devices_by_pair(a)
    out = []
    order = np.lexsort((a.node, a.cls))
    for k in order:
        c, i, n = int(a.cls[k]), int(a.node[k]), int(a.counts[k])
        if int(p.count[c]) > len(p.members[c]):  # one object, its copies counted per node
            out.append((pending[p.members[c][0]], p.node_names[i], tuple(sorted(devices.get((c, i), []))), n))
            continue
        members = p.members[c][taken[c]: taken[c] + n]
        per_pod = _split_devices(devices.get((c, i), []), n, int(p.gpu_count[c]) if p.has_devices else 0)
        for member, devs in zip(members, per_pod, strict=True):
            out.append((pending[member], p.node_names[i], devs, 1))
        taken[c] += n
    return out


def _check_counts(agg: Aggregation, a: Assignment, pending: tuple[Pod, ...]) -> None:
    """Raises InconsistentAnswer when ``a`` places more pods of a class than it has."""
    p = agg.problem
    placed = a.placed_per_class(p.n_classes)
    over = np.nonzero(placed > p.count)[0]
    if len(over):
        c = int(over[0])
        raise InconsistentAnswer(int(placed[c]), int(p.count[c]), pending[p.members[c][0]].key)


def _devices_by_pair(a: Assignment) -> dict[tuple[int, int], list[int]]:
    out: dict[tuple[int, int], list[int]] = {}
    d = a.devices
    for c, i, dev, k in zip(d.cls.tolist(), d.node.tolist(), d.device.tolist(), d.counts.tolist(), strict=True):
        out.setdefault((c, i), []).extend([dev] * k)
    return out


def _split_devices(devices: list[int], pods: int, per_pod: int) -> list[tuple[int, ...]]:
    """Deals the (sorted) device list out so that pod p takes entries p, p + pods, ...:
    no device appears twice for one pod, since no device is listed more than ``pods`` times."""
    if per_pod == 0 or not devices:
        return [() for _ in range(pods)]
    ordered = sorted(devices)
    return [tuple(sorted(ordered[p::pods][:per_pod])) for p in range(pods)]


def volume_choices(plugins: PluginSet, placed: Sequence[tuple[Pod, str]],
                   snapshot: Snapshot) -> dict[str, tuple[ClaimChoice, ...]]:
    """The volumes the placed pods' unbound claims bind to (VolumeBinding's choice), by pod key."""
    binding = next((f for f in plugins.filters if isinstance(f, VolumeBinding)), None)
    if binding is None:
        return {}
    nodes = snapshot.node_by_name
    return binding.choose([(pod, nodes[name]) for pod, name in placed])


def claim_allocations(plugins: PluginSet, placed: Sequence[tuple[Pod, str]],
                      snapshot: Snapshot) -> tuple[dict[str, tuple[ClaimAllocation, ...]], dict[str, str]]:
    """The devices the placed pods' claims get (DynamicResources' choice), by pod key, and the
    pods whose claims cannot be allocated on their node after all, with the reason."""
    plugin = next((f for f in plugins.filters if isinstance(f, DynamicResources)), None)
    if plugin is None:
        return {}, {}
    nodes = snapshot.node_by_name
    return plugin.choose([(pod, nodes[name]) for pod, name in placed])


def _plugin_devices(devices: tuple[int, ...], claims: Sequence[ClaimAllocation]) -> tuple[int, ...]:
    """The device plugin's GPUs of a placement: none when DRA serves them (its extended resource claim)."""
    return () if any(c.extended for c in claims) else devices


def _to_plan(snapshot: Snapshot, agg: Aggregation, report: SolveReport, profile: Profile,
             terms: tuple[ObjectiveTerm, ...], plugins: PluginSet) -> Plan:
    p = agg.problem
    a = report.assignment
    bound_pairs = pods_per_node(agg, a, snapshot.pending)
    claims, not_allocated = claim_allocations(plugins, [(pod, node) for pod, node, _, _ in bound_pairs], snapshot)
    dropped = [(pod, node) for pod, node, _, _ in bound_pairs if pod.key in not_allocated]
    bound_pairs = [pair for pair in bound_pairs if pair[0].key not in not_allocated]
    volumes = volume_choices(plugins, [(pod, node) for pod, node, _, _ in bound_pairs], snapshot)
    placed = tuple((pod, Placement(pod.namespace, pod.name, node, pod.uid,
                                   _plugin_devices(devs, claims.get(pod.key, ())), volumes.get(pod.key, ()),
                                   claims.get(pod.key, ()), count))
                   for pod, node, devs, count in bound_pairs)
    placements = tuple(placement for pod, placement in placed if not pod.reserved_for)
    reservations = tuple(placement for pod, placement in placed if pod.reserved_for)
    after = After.of(p, a)
    placed_per_class = a.placed_per_class(p.n_classes)
    gangs = gang_statuses(snapshot, agg, placed_per_class)
    gang_reason = {c: g.reason for g, gang in zip(gangs, p.gangs, strict=True) if not g.placed for c in gang.classes}
    unplaced = [Unplaced(pod.namespace, pod.name, (f"node {node}: {not_allocated[pod.key]} (the devices went to "
                                                    "other pods of the plan)",)) for pod, node in dropped]
    for c in range(p.n_classes):
        left = [m for m in p.members[c][int(placed_per_class[c]):] if not snapshot.pending[m].reserved_for]
        if left:
            why = tuple(r for r in (gang_reason.get(c, ""), explain(agg, c, after)) if r)
            unplaced += [Unplaced(snapshot.pending[m].namespace, snapshot.pending[m].name, why) for m in left]
    unplaced += [Unplaced(pod.namespace, pod.name, tuple(f"left to the default scheduler: {r}"
                                                         for r in pod.unmodelled), True) for pod in agg.left]
    empty = Assignment.empty()
    frag, frag_ratio = cluster_fragmentation(p, a)
    summary = Summary(
        pods_placed=len(placements),
        pods_unplaced=len(unplaced),
        pods_left_to_default_scheduler=len(agg.left),
        placed_weight=report.placed_weight,
        objective=round(report.objective, 6),
        objective_before=round(objective_value(p, empty, terms), 6),
        bound=report.bound,
        gap=None if report.gap is None else round(report.gap, 6),
        status=report.status,
        seconds=round(report.seconds, 3),
        backend=report.backend,
        profile=profile.objective.value,
        utilisation=utilisation(agg, a),
        gpu_fragmentation=round(frag, 1),
        gpu_fragmentation_ratio=round(frag_ratio, 4),
    )
    return Plan(profile.scheduler_name, placements, tuple(unplaced), summary, snapshot.source, report.steps,
                tuple(gangs), reservations=reservations)


def utilisation(agg: Aggregation, a: Assignment, before_a: Assignment | None = None) -> tuple[ResourceUse, ...]:
    """Requested over allocatable, cluster-wide, before the plan (the bound pods, and
    ``before_a`` when given) and after it (the bound pods and ``a``): the true figure, also where
    the model's sums saturate (``Aggregation.beyond_full``)."""
    p = agg.problem
    total = p.capacity.sum(axis=0, dtype=np.float64)  # sums over nodes in floats: never wrap
    used = p.used.sum(axis=0, dtype=np.float64)
    if agg.beyond_full is not None:
        used = used + agg.beyond_full.sum(axis=0)
    before = used + (0 if before_a is None else before_a.load(p).sum(axis=0, dtype=np.float64))
    after = used + a.load(p).sum(axis=0, dtype=np.float64)
    out = []
    for r, name in enumerate(p.resources):
        if name in (*SUMMARY_RESOURCES, p.gpu.device_resource) and total[r] > 0:
            out.append(ResourceUse(name, round(float(before[r] / total[r]), 4), round(float(after[r] / total[r]), 4)))
    return tuple(out)
