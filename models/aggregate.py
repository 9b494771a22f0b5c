"""From a snapshot to the aggregated problem: pod classes, node arrays, eligibility.

Pods that look the same to every plugin (same requests, priority and plugin keys) form
one class. Each filter is evaluated once per distinct pod key of that filter against
the distinct node keys of that filter, then spread to all nodes with an index array,
so the cost grows with classes x node kinds, not pods x nodes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kube.objects import CPU, MEMORY, PODS, Node, Pod, Snapshot
from models.framework import FilterPlugin, PluginSet
from models.problem import BoolArray, Gang, GroupCap, IntArray, Objective, Problem

BASE_RESOURCES = (CPU, MEMORY, PODS)
MAX_TIER_WEIGHT = 1 << 40


@dataclass(frozen=True)
class FilterTable:
    """One filter's answers: ``masks[pod_key_index][node_group]``."""

    plugin: FilterPlugin
    pod_key_of_class: IntArray  # (K,) index into masks
    node_group: IntArray  # (N,) index into the masks' columns
    masks: tuple[BoolArray, ...]

    def class_mask(self, c: int) -> BoolArray:
        return self.masks[int(self.pod_key_of_class[c])][self.node_group]


@dataclass(frozen=True)
class ClassView:
    class_pods: Sequence[Pod]
    nodes: Sequence[Node]
    bound_by_node: Mapping[str, Sequence[Pod]]


@dataclass(frozen=True)
class Aggregation:
    """The problem plus what is needed to explain it (why a class cannot go somewhere)."""

    problem: Problem
    class_pods: tuple[Pod, ...]  # a representative pending pod per class
    filters: tuple[FilterTable, ...]
    left: tuple[Pod, ...]  # pending pods left to the default scheduler (unmodelled rules)


def resource_names(pending: Sequence[Pod]) -> tuple[str, ...]:
    extra = sorted({r for p in pending for r in p.requests} - set(BASE_RESOURCES))
    return BASE_RESOURCES + tuple(extra)


def priority_weights(priorities: IntArray, counts: IntArray) -> IntArray:
    """Weight per class such that one pod of a higher priority outweighs all pods of
    lower priorities together (strict lexicographic order), while that fits in 2^40;
    beyond, tiers fall back to weight = tier rank + 1 (ordered, no longer strict)."""
    tiers = np.unique(priorities)
    weights = np.ones(len(priorities), dtype=np.int64)
    tier_weight, below = 1, 0
    strict = True
    for rank, tier in enumerate(tiers):
        members = priorities == tier
        if rank > 0:
            tier_weight = below + 1 if strict else rank + 1
            if tier_weight > MAX_TIER_WEIGHT:
                strict, tier_weight = False, rank + 1
        weights[members] = tier_weight
        below += int(tier_weight * counts[members].sum())
    return weights


def _demand_vector(pod: Pod, resources: Sequence[str]) -> tuple[int, ...]:
    return tuple(int(pod.requests.get(r, 0)) for r in resources)


def _usage(nodes: Sequence[Node], bound: Sequence[Pod], resources: Sequence[str]) -> IntArray:
    index = {n.name: i for i, n in enumerate(nodes)}
    used = np.zeros((len(nodes), len(resources)), dtype=np.int64)
    for pod in bound:
        i = index.get(pod.node_name)
        if i is not None:
            used[i] += _demand_vector(pod, resources)
    return used


def _group(keys: Sequence[Hashable]) -> tuple[IntArray, list[int]]:
    """Index of each key's group, and the first position holding each group."""
    seen: dict[Hashable, int] = {}
    first: list[int] = []
    idx = np.empty(len(keys), dtype=np.int64)
    for pos, key in enumerate(keys):
        g = seen.get(key)
        if g is None:
            g = seen[key] = len(first)
            first.append(pos)
        idx[pos] = g
    return idx, first


def _filter_table(plugin: FilterPlugin, class_pods: Sequence[Pod], nodes: Sequence[Node]) -> FilterTable:
    node_group, node_reps = _group([plugin.node_key(n) for n in nodes])
    pod_key_of_class, pod_reps = _group([plugin.pod_key(p) for p in class_pods])
    rep_nodes = [nodes[i] for i in node_reps]
    masks = tuple(np.asarray(plugin.filter(class_pods[i], rep_nodes), dtype=np.bool_) for i in pod_reps)
    return FilterTable(plugin, pod_key_of_class, node_group, masks)


def aggregate(snapshot: Snapshot, plugins: PluginSet, objective: Objective | None = None) -> Aggregation:
    modelled = [p for p in snapshot.pending if not p.unmodelled]
    left = tuple(p for p in snapshot.pending if p.unmodelled)
    resources = resource_names(modelled)
    nodes = snapshot.nodes
    capacity = np.array([[n.allocatable.get(r, 0) for r in resources] for n in nodes],
                        dtype=np.int64).reshape(len(nodes), len(resources))
    used = _usage(nodes, snapshot.bound, resources)

    keyed = [(_demand_vector(p, resources), p.priority,
              tuple(f.pod_key(p) for f in plugins.filters),
              tuple(c.pod_key(p) for c in plugins.constraints)) for p in modelled]
    class_of_pod, first = _group(keyed)
    members = [list[int]() for _ in first]
    pending_index = {id(p): i for i, p in enumerate(snapshot.pending)}
    for pos, c in enumerate(class_of_pod):
        members[int(c)].append(pending_index[id(modelled[pos])])
    class_pods = tuple(modelled[i] for i in first)
    demand = np.array([keyed[i][0] for i in first], dtype=np.int64).reshape(len(first), len(resources))
    count = np.array([len(m) for m in members], dtype=np.int64)
    priority = np.array([p.priority for p in class_pods], dtype=np.int64)

    tables = tuple(_filter_table(f, class_pods, nodes) for f in plugins.filters)
    eligible = _eligibility(tables, demand, capacity - used)
    view = ClassView(class_pods, nodes, _bound_by_node(snapshot.bound))
    rules = [r for c in plugins.constraints for r in c.constraints(view)]
    problem = Problem(
        resources=resources,
        node_names=tuple(n.name for n in nodes),
        capacity=capacity,
        used=used,
        demand=demand,
        count=count,
        weight=priority_weights(priority, count),
        eligible=eligible,
        members=tuple(tuple(m) for m in members),
        group_caps=tuple(r for r in rules if isinstance(r, GroupCap)),
        gangs=tuple(r for r in rules if isinstance(r, Gang)),
        objective=objective or Objective(),
    )
    return Aggregation(problem, class_pods, tables, left)


def _eligibility(tables: Sequence[FilterTable], demand: IntArray, free: IntArray) -> BoolArray:
    n_classes, n_nodes = demand.shape[0], free.shape[0]
    eligible = np.ones((n_classes, n_nodes), dtype=np.bool_)
    for c in range(n_classes):
        row = (free >= demand[c]).all(axis=1)
        for table in tables:
            row &= table.class_mask(c)
        eligible[c] = row
    return eligible


def _bound_by_node(bound: Sequence[Pod]) -> dict[str, list[Pod]]:
    out: dict[str, list[Pod]] = {}
    for pod in bound:
        out.setdefault(pod.node_name, []).append(pod)
    return out
