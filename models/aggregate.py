"""From a snapshot to the aggregated problem: pod classes, node arrays, eligibility.

Pods that look the same to every plugin (same requests, priority and plugin keys) form
one class. Each filter is evaluated once per distinct pod key of that filter against
the distinct node keys of that filter, then spread to all nodes with an index array,
so the cost grows with classes x node kinds, not pods x nodes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import cast

import numpy as np

from kubeplace.kube.gangs import is_admitted
from kubeplace.kube.gpu_conventions import DEFAULT_CONVENTIONS, GpuConventions
from kubeplace.kube.memo import IdentityMemo, LastOf
from kubeplace.kube.metrics import measured_load
from kubeplace.kube.nominated import held_room
from kubeplace.kube.objects import CPU, MEMORY, PODS, Node, Pod, Snapshot
from kubeplace.models.bound_usage import bound_usage, counted
from kubeplace.models.devices import dra_devices
from kubeplace.models.framework import ExtraResources, FilterPlugin, NodeKeyBasis, PluginSet, implements
from kubeplace.models.gpu import MAX_DEVICES, DeviceTable, GpuNeed, GpuRequestError, device_fit, gpu_need
from kubeplace.models.problem import (
    FULL,
    Attraction,
    BoolArray,
    DomainPreference,
    Exclusion,
    FloatArray,
    Gang,
    GroupCap,
    Headroom,
    IntArray,
    NodePreference,
    Problem,
    Spread,
    Workload,
    clamp_allocatable,
    clamp_request,
    fits,
    headroom_limit,
)

BASE_RESOURCES = (CPU, MEMORY, PODS)
MAX_TIER_WEIGHT = 1 << 40
MAX_PLACED_WEIGHT = 1 << 60
"""Tiers share one weight stage while a tier's weight stays below MAX_TIER_WEIGHT and the weight
of every pod of the stage below MAX_PLACED_WEIGHT (int64 objectives, float LPs)."""


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
    bound: Sequence[Pod]

    @cached_property
    def bound_by_node(self) -> Mapping[str, Sequence[Pod]]:
        """The running pods by node (made when a plugin first asks: none of the in-tree ones does)."""
        return _bound_by_node(self.bound)


@dataclass(frozen=True)
class Aggregation:
    """The problem plus what is needed to explain it (why a class cannot go somewhere)."""

    problem: Problem
    class_pods: tuple[Pod, ...]  # a representative pending pod per class
    filters: tuple[FilterTable, ...]
    left: tuple[Pod, ...]  # pending pods left to the default scheduler (unmodelled rules)
    nodes: tuple[Node, ...] = ()  # the snapshot's nodes, in the problem's order
    beyond_full: FloatArray | None = None
    """(N, R) the requests of the running pods (and the room nominated pods hold) that
    ``problem.used``, saturated at FULL, leaves out: what utilisation adds back to say the true
    figure. None: nothing left out."""


def resource_names(pending: Sequence[Pod]) -> tuple[str, ...]:
    """Resources to model: those the pending pods request, each counted as the kubelet counts
    it (GPU devices and shares included: the device model comes on top)."""
    names = {r for p in pending for r in p.requests} - set(BASE_RESOURCES)
    return BASE_RESOURCES + tuple(sorted(names))


def priority_weights(priorities: IntArray, counts: IntArray,
                     base: IntArray | None = None) -> tuple[IntArray, IntArray]:
    """Weight and weight stage per class such that one pod of a higher priority outweighs all
    pods of lower priorities together (strict lexicographic order) at any number of tiers.

    Tiers share a stage while their strict weights fit (the common case: one stage, the weights
    one solve maximises); a tier that would pass the limits starts a new stage, where weights
    start again from ``base``. Stages are numbered from the highest priorities (0) down; the
    solvers keep the order between stages by solving them one after the other (see
    ``Problem.weight_stage``). Within a tier a pod weighs ``base`` (1 by default)."""
    base = np.ones(len(priorities), dtype=np.int64) if base is None else base
    weights = base.copy()
    stage_from_bottom = np.zeros(len(priorities), dtype=np.int64)
    stage, tier_weight, below = 0, 1, 0
    for tier in np.unique(priorities):
        members = priorities == tier
        tier_total = sum(int(b) * int(k) for b, k in zip(base[members], counts[members], strict=True))
        tier_weight = below + 1
        if below and (tier_weight > MAX_TIER_WEIGHT or below + tier_weight * tier_total > MAX_PLACED_WEIGHT):
            stage, tier_weight, below = stage + 1, 1, 0
        weights[members] = tier_weight * base[members]
        stage_from_bottom[members] = stage
        below += tier_weight * tier_total
    return weights, stage - stage_from_bottom


def weight_tiers(pods: Sequence[Pod]) -> IntArray:
    """Each pod's weight tier: Kueue-admitted pods (capacity already promised) above every other
    pod, then by priority; ranks, in that order."""
    keys = sorted({(is_admitted(p), p.priority) for p in pods})
    rank = {key: r for r, key in enumerate(keys)}
    return np.array([rank[(is_admitted(p), p.priority)] for p in pods], dtype=np.int64)


def base_weights(gpu_count: IntArray, gpu_milli: IntArray, count: IntArray, placement_weight: str) -> IntArray:
    """Per-pod weight within a priority tier: 1 (``pods``), or with ``gpu`` the milli-GPU
    placed first and the pod count only among placements of equal GPU."""
    ones = np.ones(len(count), dtype=np.int64)
    if placement_weight != "gpu":
        return ones
    return gpu_count * gpu_milli * (int(count.sum()) + 1) + ones


def _demand_vector(pod: Pod, resources: Sequence[str], extra: Mapping[str, int] | None = None) -> tuple[int, ...]:
    extra = extra or {}
    return tuple(clamp_request(int(extra.get(r, pod.requests.get(r, 0)))) for r in resources)


def _allocatable(node: Node, resources: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(clamp_allocatable(int(node.allocatable.get(r, 0))) for r in resources)


_ALLOCATABLE: IdentityMemo[Node, tuple[int, ...]] = IdentityMemo(_allocatable)
"""A node's capacity row, once per node object (and resources)."""


_ALLOCATABLE_ARRAY: LastOf[IntArray] = LastOf(
    lambda nodes, resources: np.array([_ALLOCATABLE(n, resources) for n in nodes],
                                      dtype=np.int64).reshape(len(nodes), len(resources)))
"""(N, R) the nodes' capacity rows, kept for the last nodes (the same cycle after cycle)."""


def _capacity_row(node: Node, resources: tuple[str, ...], offered: Mapping[str, int]) -> tuple[int, ...]:
    """What the node allocates of each resource (``offered``: the extra resources' plugins' amounts)."""
    if not offered:
        return _ALLOCATABLE(node, resources)
    return tuple(clamp_allocatable(int(offered.get(r, node.allocatable.get(r, 0)))) for r in resources)


def _gpu_needs(pods: Sequence[Pod], conv: GpuConventions,
               extra: Sequence[Mapping[str, int]]) -> tuple[list[Pod], list[GpuNeed], list[Pod]]:
    """Pods with a readable GPU need, their needs, and the pods whose request is invalid. The
    need counts the plugins' extra requests too: DRA devices of the DeviceClass serving the GPU
    resource, which a pod's claims take, are GPUs to the device model (and to defrag)."""
    ok, needs, bad = [], [], []
    for pod, more in zip(pods, extra, strict=True):
        try:
            needs.append(gpu_need({**pod.requests, **more} if more else pod.requests, conv))
            ok.append(pod)
        except GpuRequestError as e:
            bad.append(replace(pod, unmodelled=(*pod.unmodelled, f"invalid GPU request: {e}")))
    return ok, needs, bad


def _group(keys: Sequence[Hashable]) -> tuple[IntArray, list[int]]:
    """Index of each key's group (in order of first appearance), and the first position holding
    each group."""
    seen: dict[Hashable, int] = {}
    idx = np.fromiter((seen.setdefault(key, len(seen)) for key in keys), dtype=np.int64, count=len(keys))
    first = np.unique(idx, return_index=True)[1] if len(idx) else idx
    return idx, [int(i) for i in first]


def _alone(pod: Pod) -> str:
    """Keeps an object standing for several pods (``Pod.copies``) alone in its class: a class is
    then either pods of one each or one such object, whose count is its copies."""
    return pod.key if pod.copies != 1 else ""


@dataclass(frozen=True)
class _NodeGroups:
    """One filter's node groups (``_group`` of its node keys) and what they were computed from."""

    basis: object
    nodes: tuple[Node, ...]
    node_group: IntArray
    node_reps: list[int]


_LAST_NODE_GROUPS: dict[tuple[type, str], _NodeGroups] = {}
"""Per filter class and name, the node groups of the last cycle (holds that cycle's nodes)."""


def _node_groups(plugin: FilterPlugin, nodes: Sequence[Node]) -> tuple[IntArray, list[int]]:
    """``_group`` of the filter's node keys; last cycle's when the filter's node-key basis is
    equal and the nodes are the same (the same objects, or equal ones), as ``node_key`` is then
    the same function of the same fields."""
    if not implements(plugin, NodeKeyBasis):
        return _group([plugin.node_key(n) for n in nodes])
    basis, node_tuple, slot = cast(NodeKeyBasis, plugin).node_key_basis(), tuple(nodes), (type(plugin), plugin.name)
    last = _LAST_NODE_GROUPS.get(slot)
    if last is not None and last.nodes == node_tuple and last.basis == basis:
        return last.node_group, last.node_reps
    node_group, node_reps = _group([plugin.node_key(n) for n in nodes])
    node_group.flags.writeable = False  # shared with the next cycles' tables
    _LAST_NODE_GROUPS[slot] = _NodeGroups(basis, node_tuple, node_group, node_reps)
    return node_group, node_reps


def _filter_table(plugin: FilterPlugin, class_pods: Sequence[Pod], nodes: Sequence[Node]) -> FilterTable:
    node_group, node_reps = _node_groups(plugin, nodes)
    pod_key_of_class, pod_reps = _group([plugin.pod_key(p) for p in class_pods])
    rep_nodes = [nodes[i] for i in node_reps]
    masks = tuple(np.asarray(plugin.filter(class_pods[i], rep_nodes), dtype=np.bool_) for i in pod_reps)
    return FilterTable(plugin, pod_key_of_class, node_group, masks)


def aggregate(snapshot: Snapshot, plugins: PluginSet, conv: GpuConventions = DEFAULT_CONVENTIONS,
              placement_weight: str = "pods") -> Aggregation:
    pending = plugins.mark_unmodelled(snapshot, bound=False).pending  # the pods a plugin cannot model are left
    extras = [cast(ExtraResources, f) for f in plugins.filters if implements(f, ExtraResources)]
    candidates = [p for p in pending if not p.unmodelled]
    extra_of = {id(p): {k: v for e in extras for k, v in e.extra_requests(p).items()} for p in candidates}
    modelled, needs, invalid = _gpu_needs(candidates, conv, [extra_of[id(p)] for p in candidates])
    left = tuple(p for p in pending if p.unmodelled) + tuple(invalid)
    extra = [extra_of[id(p)] for p in modelled]
    resources = resource_names(modelled) + tuple(sorted({r for x in extra for r in x}))
    nodes = snapshot.nodes
    devices = DeviceTable.build(nodes, snapshot.bound, conv, dra_devices(snapshot.devices, nodes, conv.device_resource))
    offered = [{k: v for e in extras for k, v in e.extra_allocatable(n).items()} for n in nodes]
    capacity = (np.array([_capacity_row(n, resources, o) for n, o in zip(nodes, offered, strict=True)],
                         dtype=np.int64).reshape(len(nodes), len(resources))
                if any(offered) else _ALLOCATABLE_ARRAY(nodes, resources).copy())
    used, beyond_full = bound_usage(nodes, snapshot.bound, resources)  # (from the last cycle's sums)

    vectors = [_demand_vector(p, resources, x) for p, x in zip(modelled, extra, strict=True)]
    keyed = [(vector, (min(need.count, MAX_DEVICES + 1), need.milli), p.priority,
              tuple(f.pod_key(p) for f in plugins.filters),
              tuple(c.pod_key(p) for c in plugins.constraints), _alone(p))
             for p, need, vector in zip(modelled, needs, vectors, strict=True)]
    class_of_pod, first = _group(keyed)
    members = [list[int]() for _ in first]
    pending_index = {id(p): i for i, p in enumerate(pending)}
    for pos, c in enumerate(class_of_pod):
        members[int(c)].append(pending_index[id(modelled[pos])])
    class_pods = tuple(modelled[i] for i in first)
    demand = np.array([keyed[i][0] for i in first], dtype=np.int64).reshape(len(first), len(resources))
    count = np.array([sum(pending[m].copies for m in ms) for ms in members], dtype=np.int64)
    priority = weight_tiers(class_pods)

    gpu_count = np.array([keyed[i][1][0] for i in first], dtype=np.int64)
    gpu_milli = np.array([keyed[i][1][1] for i in first], dtype=np.int64)
    tables = tuple(_filter_table(f, class_pods, nodes) for f in plugins.filters)
    view = ClassView(class_pods, nodes, snapshot.bound)
    rules = [r if isinstance(r, Gang) else replace(r, plugin=c.name)
             for c in plugins.constraints for r in c.constraints(view)]
    limit = _limit(capacity, resources, [r for r in rules if isinstance(r, Headroom)])
    eligible = _eligibility(tables, demand, (capacity if limit is None else limit) - used)
    measured = measured_array(snapshot, used, resources)
    if snapshot.nominated:
        held = _hold_nominated_room(snapshot.nominated, class_pods, nodes, resources, eligible, demand,
                                    (capacity if limit is None else limit), used)
        beyond_full += used.astype(np.float64) + held - np.minimum(used + held, FULL)
        used = np.minimum(used + held, FULL)
    for c in np.nonzero(gpu_count > 0)[0]:
        eligible[c] &= device_fit(devices.free, GpuNeed(int(gpu_count[c]), int(gpu_milli[c])))
    for rule in rules:
        if isinstance(rule, Gang) and rule.domain is not None:
            eligible[list(rule.classes)] &= rule.domain >= 0  # outside every domain of the gang
        if isinstance(rule, Gang) and rule.blocked:
            eligible[list(rule.classes)] = False  # never placed alone, nor with part of its gang
    weight, weight_stage = priority_weights(priority, count, base_weights(gpu_count, gpu_milli, count,
                                                                           placement_weight))
    problem = Problem(
        resources=resources,
        node_names=tuple(n.name for n in nodes),
        capacity=capacity,
        used=used,
        demand=demand,
        count=count,
        weight=weight,
        weight_stage=weight_stage,
        eligible=eligible,
        members=tuple(tuple(m) for m in members),
        group_caps=tuple(r for r in rules if isinstance(r, GroupCap)),
        gangs=tuple(r for r in rules if isinstance(r, Gang)),
        exclusions=tuple(r for r in rules if isinstance(r, Exclusion)),
        attractions=tuple(r for r in rules if isinstance(r, Attraction)),
        spreads=tuple(r for r in rules if isinstance(r, Spread)),
        preferences=tuple(r for r in rules if isinstance(r, NodePreference | DomainPreference)),
        gpu_count=gpu_count,
        gpu_milli=gpu_milli,
        device_free=devices.free,
        workload=_workload(snapshot.bound, modelled, needs, resources, conv,
                           [None if x else vector for x, vector in zip(extra, vectors, strict=True)]),
        queue_rank=queue_rank(snapshot.pending),
        gpu=conv,
        measured=measured,
        limit=limit,
    )
    return Aggregation(problem, class_pods, tables, left, tuple(nodes), beyond_full)


def _limit(capacity: IntArray, resources: Sequence[str], rules: Sequence[Headroom]) -> IntArray | None:
    """(N, R) the most requests each node may hold under the headroom rules; None without any."""
    if not rules:
        return None
    limit = capacity.copy()
    for rule in rules:
        for name in rule.resources:
            if name in resources:
                r = resources.index(name)
                limit[:, r] = np.minimum(limit[:, r], headroom_limit(capacity[:, r], rule.share))
    return limit


def measured_array(snapshot: Snapshot, used: IntArray, resources: Sequence[str]) -> IntArray | None:
    """(N, R) the nodes' measured load where metrics say it, their requests elsewhere; None
    without metrics."""
    if not snapshot.node_metrics:
        return None
    loads = measured_load(snapshot)
    measured = used.copy()
    for i, node in enumerate(snapshot.nodes):
        load = loads.get(node.name)
        if load is None:
            continue
        for name, amount in load.usage.items():
            if name in resources:
                measured[i, resources.index(name)] = min(amount, FULL)
    return measured


def queue_rank(pending: Sequence[Pod]) -> IntArray:
    """Each pod's place in kube-scheduler's queue order: higher priority first, then the
    earlier created, then by namespace and name."""
    order = sorted(range(len(pending)), key=lambda i: (-pending[i].priority, pending[i].creation,
                                                      pending[i].namespace, pending[i].name))
    rank = np.empty(len(pending), dtype=np.int64)
    rank[order] = np.arange(len(pending), dtype=np.int64)
    return rank


def _eligibility(tables: Sequence[FilterTable], demand: IntArray, free: IntArray) -> BoolArray:
    n_classes, n_nodes = demand.shape[0], free.shape[0]
    eligible = np.ones((n_classes, n_nodes), dtype=np.bool_)
    for c in range(n_classes):
        row = fits(free, demand[c])
        for table in tables:
            row &= table.class_mask(c)
        eligible[c] = row
    return eligible


def _hold_nominated_room(nominated: Sequence[Pod], class_pods: Sequence[Pod], nodes: Sequence[Node],
                         resources: tuple[str, ...], eligible: BoolArray, demand: IntArray, limit: IntArray,
                         used: IntArray) -> IntArray:
    """(N, R) the room nominated pods hold (``kube.nominated``) to add to ``used``, and ``eligible``
    narrowed in place to match. A class may go to a node only if it fits beside the pods nominated
    there with its priority or more; the capacity constraint is one per node, so each node holds
    the room its lowest-priority eligible class must leave: every class placed there then leaves
    at least the room it must (a higher one may not use the room of a lower nominated pod on a
    node where a class of lower priority could go, a sound simplification)."""
    index = {node.name: i for i, node in enumerate(nodes)}
    by_priority: dict[int, IntArray] = {}
    for priority in sorted({pod.priority for pod in class_pods}):
        rows = np.zeros((len(nodes), len(resources)), dtype=np.int64)
        for name, held in held_room(nominated, priority).items():
            if name in index:
                rows[index[name]] = [clamp_request(held.get(r, 0)) for r in resources]
        by_priority[priority] = rows
    for c, pod in enumerate(class_pods):
        eligible[c] &= fits(limit - used - by_priority[pod.priority], demand[c])
    held_here = np.zeros_like(used)
    for i in range(len(nodes)):
        here = np.flatnonzero(eligible[:, i])
        if len(here):
            held_here[i] = by_priority[min(class_pods[int(c)].priority for c in here)][i]
    for c in range(len(class_pods)):
        eligible[c] &= fits(limit - np.minimum(used + held_here, FULL), demand[c])
    return held_here


def _workload(bound: Sequence[Pod], pending: Sequence[Pod], needs: Sequence[GpuNeed], resources: Sequence[str],
              conv: GpuConventions, vectors: Sequence[tuple[int, ...] | None]) -> Workload:
    """Shapes of running and pending pods with their counts (GPU fragmentation is measured
    against what the cluster runs, not only against the batch being placed). ``vectors``: each
    pending pod's demand vector where it is already known (the pod's own requests), else None."""
    names = tuple(resources)
    shapes: dict[Shape, int] = counted(bound, lambda pod: _RUNNING_SHAPES(pod, names, conv),  # type: ignore[assignment]
                                       ("running shapes", names, conv))  # (from the last cycle's counts)
    for pod, need, vector in zip(pending, needs, vectors, strict=True):
        key = _shape(pod, need, resources) if vector is None else (vector, min(need.count, MAX_DEVICES + 1), need.milli)
        shapes[key] = shapes.get(key, 0) + pod.copies
    keys = list(shapes)
    demand = np.array([k[0] for k in keys], dtype=np.int64).reshape(len(keys), len(resources))
    return Workload(demand, np.array([k[1] for k in keys], dtype=np.int64),
                    np.array([k[2] for k in keys], dtype=np.int64), np.array([shapes[k] for k in keys], dtype=np.int64))


Shape = tuple[tuple[int, ...], int, int]
"""A pod's requests (clamped), GPU devices (at most MAX_DEVICES + 1) and milli-GPU per device."""


def _shape(pod: Pod, need: GpuNeed, resources: Sequence[str]) -> Shape:
    return _demand_vector(pod, resources), min(need.count, MAX_DEVICES + 1), need.milli


def _running_shape(pod: Pod, resources: Sequence[str], conv: GpuConventions) -> Shape | None:
    """A running pod's shape; None when its GPU request is invalid (it is not counted)."""
    try:
        return _shape(pod, gpu_need(pod.requests, conv), resources)
    except GpuRequestError:
        return None


_RUNNING_SHAPES: IdentityMemo[Pod, Shape | None] = IdentityMemo(_running_shape)
"""Once per running pod (for the same resources and conventions): the same pods run cycle after cycle."""


def _bound_by_node(bound: Sequence[Pod]) -> dict[str, list[Pod]]:
    out: dict[str, list[Pod]] = {}
    for pod in bound:
        out.setdefault(pod.node_name, []).append(pod)
    return out
