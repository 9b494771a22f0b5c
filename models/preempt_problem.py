"""The placement problem with preemption: the pending pods, and the victims they may evict.

The candidate victims (``models.preemption``) are handed to :func:`models.aggregate.aggregate`
as pending pods beside the real ones, and the running pods that stay as the usage, exactly as
``rebalance`` hands it the pods it may move: every filter, group rule (host ports: a victim's
port is freed with it), GPU device and capacity rule then covers them. Classes are then split:

- pending classes by preemption power (``preemptionPolicy`` is not part of aggregation's key);
- candidates into *victim classes*, one per (node, unit, PodDisruptionBudgets protecting it),
  each eligible on its own node only: ``y`` of a victim class counts its pods that are *kept*.

Pending classes come first (``[0, n_pending)``), victim classes after. Weights follow priority
tiers over both (one pod of a higher priority outweighs every pod of lower ones): stage 1
maximises the pods placed plus the victims kept, which is the pods placed net of the pods evicted,
tier by tier. A preemptor always outweighs its victims (they are of lower priority), but no pod
is ever placed at the cost of evicting one of its own or a higher priority, not even by moving
another pod onto a victim's node to free room elsewhere. Which victims go is then decided by
the preemption stages (``models.preempt_rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from kubeplace.kube.disruption import protects
from kubeplace.kube.gangs import without_gang
from kubeplace.kube.objects import DisruptionBudget, GangKey, Pod, Snapshot
from kubeplace.models.aggregate import Aggregation, FilterTable, aggregate, base_weights, priority_weights
from kubeplace.models.config import Configuration, Profile, instantiate
from kubeplace.models.framework import ObjectiveTerm, PluginSet
from kubeplace.models.preemption import NO_POWER, Candidates, candidates, not_preempting
from kubeplace.models.problem import Assignment, BoolArray, IntArray, Problem
from kubeplace.models.renumber import renumbered_rules

ClassKey = tuple[Any, ...]
"""What splits a class: ``("pending", power)`` or ``("victim", node, unit, priority, budgets)``."""


@dataclass(frozen=True)
class PreemptionProblem:
    agg: Aggregation
    """Pending classes first, then victim classes; members index :attr:`pods`."""
    n_pending: int
    """Classes ``[0, n_pending)`` hold pending pods."""
    power: IntArray
    """(n_pending,) the priority below which the class's pods may evict (NO_POWER: none)."""
    victim_node: IntArray
    """(V,) the node of each victim class (class ``n_pending + v``)."""
    victim_priority: IntArray
    """(V,) its unit's priority: a preemptor's power must be above it."""
    victim_unit: IntArray
    """(V,) index into :attr:`gang_units` when its pods are gang members, else -1."""
    victim_budgets: tuple[tuple[int, ...], ...]
    """(V,) indices into :attr:`budgets` of the budgets its pods count against."""
    budgets: tuple[DisruptionBudget, ...]
    gang_units: tuple[GangKey, ...]
    pods: tuple[Pod, ...]
    """The snapshot's pending pods, then the candidates (as they run)."""
    n_pending_pods: int
    excluded: tuple[tuple[Pod, str], ...]
    """Running pods below some preemptor's power that may not be victims, and why."""
    not_preempting: Mapping[str, str] = field(default_factory=dict)
    """Pending pod key -> why it may not preempt."""
    terms: tuple[ObjectiveTerm, ...] = ()

    @property
    def problem(self) -> Problem:
        return self.agg.problem

    @property
    def n_victims(self) -> int:
        return int(self.victim_node.shape[0])

    @cached_property
    def tiers(self) -> IntArray:
        """The distinct victim priorities, lowest first."""
        return np.unique(self.victim_priority)

    @cached_property
    def victim_tier(self) -> IntArray:
        """(V,) index of each victim class's priority in :attr:`tiers`."""
        return np.searchsorted(self.tiers, self.victim_priority).astype(np.int64)

    @property
    def victim_count(self) -> IntArray:
        return self.problem.count[self.n_pending:]

    @cached_property
    def protected(self) -> BoolArray:
        """(B, V) budget j protects the pods of victim class v."""
        out = np.zeros((len(self.budgets), self.n_victims), dtype=np.bool_)
        for v, budgets in enumerate(self.victim_budgets):
            out[list(budgets), v] = True
        return out

    @cached_property
    def victim_cost_weight(self) -> IntArray:
        """(V,) what evicting one pod of the class costs in the victim count: 1 for the lowest
        victim priority, one more for each higher one (a victim of priority 0 still counts)."""
        return self.victim_tier + 1

    def kept(self, a: Assignment) -> IntArray:
        """(V,) pods of each victim class that ``a`` keeps."""
        return a.placed_per_class(self.problem.n_classes)[self.n_pending:]

    def pending_part(self, a: Assignment) -> Assignment:
        """The placements of pending pods in ``a`` (victims kept left out)."""
        keep = a.cls < self.n_pending
        dkeep = a.devices.cls < self.n_pending
        return Assignment(a.cls[keep], a.node[keep], a.counts[keep], a.devices.select(dkeep))

    def all_kept(self) -> Assignment:
        """Nothing placed, every victim kept: the cluster as it is."""
        v = np.arange(self.n_victims, dtype=np.int64)
        return Assignment(self.n_pending + v, self.victim_node.copy(), self.victim_count.copy())


def preemption_problem(snapshot: Snapshot, config: Configuration, profile: Profile) -> PreemptionProblem:
    blocked = not_preempting(snapshot, config.gpu)
    power = {pod.key: NO_POWER if pod.key in blocked else pod.priority for pod in snapshot.pending}
    found = candidates(snapshot, power, config.gpu)
    excluded = list(found.excluded)
    while True:  # a candidate aggregation cannot model (an invalid GPU request) stays as usage
        agg, plugins, view = _aggregate(snapshot, found, config, profile)
        left = {p.key for p in agg.left}
        stuck = [u for u in found.units if any(p.key in left for p in u.pods)]
        if not stuck:
            break
        excluded += [(p, "placement rule not modelled") for u in stuck for p in u.pods]
        found = Candidates(tuple(u for u in found.units if u not in stuck), found.excluded)
    n_pods = len(snapshot.pending)
    node_index = {name: i for i, name in enumerate(agg.problem.node_names)}
    unit_of_pod: dict[str, int] = {}
    gang_units: list[GangKey] = []
    unit_priority: dict[str, int] = {}
    for unit in found.units:
        if unit.gang is not None:
            gang_units.append(unit.gang)
        for pod in unit.pods:
            unit_of_pod[pod.key] = len(gang_units) - 1 if unit.gang is not None else -1
            unit_priority[pod.key] = unit.priority
    budgets = snapshot.disruption_budgets
    pods = view.pending
    running = found.pods

    def key(member: int) -> ClassKey:
        pod = pods[member]
        if member < n_pods:
            return ("pending", power[pod.key])
        return ("victim", node_index[running[member - n_pods].node_name], unit_of_pod[pod.key],
                unit_priority[pod.key], tuple(j for j, b in enumerate(budgets) if protects(b, pod)))

    split, keys = split_classes(agg, key)
    p = split.problem
    pending = np.array([k[0] == "pending" for k in keys], dtype=np.bool_)
    n_pending = int(pending.sum())
    victim_keys = [k for k in keys if k[0] == "victim"]
    eligible = p.eligible.copy()
    victim_node = np.array([k[1] for k in victim_keys], dtype=np.int64)
    eligible[n_pending:] = False
    eligible[n_pending + np.arange(len(victim_keys)), victim_node] = True
    victim_priority = np.array([k[3] for k in victim_keys], dtype=np.int64)
    priority = np.array([pods[p.members[c][0]].priority for c in range(n_pending)], dtype=np.int64)
    base = base_weights(p.gpu_count, p.gpu_milli, p.count, profile.placement_weight) if p.gpu_count.shape[0] else None
    weight, stage = priority_weights(np.concatenate([priority, victim_priority]), p.count, base)
    problem = replace(p, eligible=eligible, weight=weight, weight_stage=stage)
    split = replace(split, problem=problem)
    return PreemptionProblem(
        split, n_pending, np.array([k[1] for k in keys[:n_pending]], dtype=np.int64), victim_node,
        victim_priority, np.array([k[2] for k in victim_keys], dtype=np.int64),
        tuple(k[4] for k in victim_keys), budgets, tuple(gang_units), tuple(pods), n_pods, tuple(excluded),
        blocked, tuple(plugins.terms(problem)))


def _aggregate(snapshot: Snapshot, found: Candidates, config: Configuration,
               profile: Profile) -> tuple[Aggregation, PluginSet, Snapshot]:
    """The candidates as pending pods (no node, no gang, no rules of their own: they are only
    ever kept where they are), the other running pods as usage."""
    keys = {p.key for p in found.pods}
    copies = tuple(replace(without_gang(p), node_name="", phase="Pending", spec_rules=frozenset(), nominated_node="")
                   for p in found.pods)
    view = replace(snapshot, pending=snapshot.pending + copies,
                   bound=tuple(p for p in snapshot.bound if p.key not in keys))
    plugins = instantiate(config, profile, view)
    return aggregate(view, plugins, config.gpu, profile.placement_weight), plugins, view


def split_classes(agg: Aggregation, key: Callable[[int], ClassKey]) -> tuple[Aggregation, list[ClassKey]]:
    """Each class split by ``key(member)`` of its members; classes whose key starts with
    ``"pending"`` first (in class order), the others after. Group rules, gangs and filter
    tables follow their classes. Returns the new aggregation and each new class's key."""
    p = agg.problem
    parts: list[tuple[ClassKey, int, list[int]]] = []
    for c in range(p.n_classes):
        by_key: dict[ClassKey, list[int]] = {}
        for m in p.members[c]:
            by_key.setdefault(key(m), []).append(m)
        parts += [(k, c, members) for k, members in by_key.items()]
    parts.sort(key=lambda part: part[0][0] != "pending")  # stable: class order kept within each
    parent = np.array([c for _, c, _ in parts], dtype=np.int64)
    children: dict[int, list[int]] = {}
    for new, c in enumerate(parent.tolist()):
        children.setdefault(c, []).append(new)

    has_gpu = p.gpu_count.shape[0] > 0
    problem = replace(
        p,
        demand=p.demand[parent].reshape(len(parts), len(p.resources)),
        count=np.array([len(m) for _, _, m in parts], dtype=np.int64),
        weight=p.weight[parent],
        weight_stage=p.stage_of_class[parent],
        eligible=p.eligible[parent].reshape(len(parts), p.n_nodes),
        members=tuple(tuple(m) for _, _, m in parts),
        **renumbered_rules(p, children),
        gpu_count=p.gpu_count[parent] if has_gpu else p.gpu_count,
        gpu_milli=p.gpu_milli[parent] if has_gpu else p.gpu_milli,
    )
    filters = tuple(FilterTable(t.plugin, t.pod_key_of_class[parent], t.node_group, t.masks) for t in agg.filters)
    class_pods = tuple(agg.class_pods[c] for c in parent.tolist())
    return Aggregation(problem, class_pods, filters, agg.left, beyond_full=agg.beyond_full), [k for k, _, _ in parts]
