"""Why a pod was not placed, in the words of the kube-scheduler:
"0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint."

Counted as the kube-scheduler counts (framework FitError): each node under the first filter
that rejects it, in the default profile's filter order (NodeUnschedulable, NodeName,
TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, ..., InterPodAffinity), the
profile's other filters after those in their own order, then the GPU device rule; a filter
with several reasons (NodeResourcesFit: one per resource lacking) counts each, one with several
checks in order (InterPodAffinity: the pod's affinity, its anti-affinity, the other pods'
anti-affinity) counts a node under its first; the "count reason" strings are sorted as strings.
The cluster is taken as the plan leaves it: the capacity, GPU devices and host ports its
placements took are gone, and its placements count in the inter-pod rules
(``plan.explain_rules``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import numpy as np

from kubeplace.models.aggregate import Aggregation, FilterTable
from kubeplace.models.devices import CANNOT_ALLOCATE
from kubeplace.models.framework import ExtraResources, FilterError, NodeReasons, Rejects, implements
from kubeplace.models.gpu import GpuNeed, device_fit
from kubeplace.models.plugins import RULES
from kubeplace.models.plugins.dynamic_resources import NAME as DYNAMIC_RESOURCES
from kubeplace.models.problem import Assignment, BoolArray, IntArray, Problem
from kubeplace.plan.explain_rules import batch_failures, cap_left

NODE_NAME, FIT = "NodeName", "NodeResourcesFit"
BUILT_IN_FILTERS = {2: NODE_NAME, 6: FIT}
"""The kube-scheduler's default filters kubeplace has no rule for (the node name and the free
capacity are the model's own), at their places in its filter order."""
SCHEDULER_FILTERS = tuple(name for _, name in sorted(
    [*((r.filter_order, r.name) for r in RULES if r.filter_order is not None), *BUILT_IN_FILTERS.items()]))
"""The default profile's filters in its order (apis/config/v1 default_plugins.go): each rule
says its place (``InTreeRule.filter_order``)."""
SAME_AS: dict[str, str] = {}
"""kubeplace's plugins that stand for (part of) a kube-scheduler filter."""
DEVICES = "Insufficient GPU devices"
GANG_DOMAIN = "node(s) outside the gang's topology domain"
LEFT_OUT = "node(s) had room but the plan left the pod out (gang rule or the time limit)"

Stage = list[tuple[str, BoolArray]]
"""A filter's reasons, each with the nodes it rejects."""


@dataclass(frozen=True)
class After:
    """The cluster as the plan leaves it."""

    free: IntArray  # (N, R) free capacity
    device_free: IntArray  # (N, D) free milli per device
    cap_left: tuple[IntArray, ...]  # per group cap of the problem: (N,) room left on the node's part
    assignment: Assignment

    @staticmethod
    def of(problem: Problem, a: Assignment) -> After:
        caps = tuple(cap_left(cap, a, problem.n_nodes) for cap in problem.group_caps)
        return After(problem.free - a.load(problem), a.devices_left(problem), caps, a)


def explain(agg: Aggregation, c: int, after: After) -> str:
    """The message for a pod of class ``c`` not placed by the plan that left ``after``."""
    n = agg.problem.n_nodes
    if any(gang.blocked and c in gang.classes for gang in agg.problem.gangs):
        return ""  # kept out of the queue (PreEnqueue) by its gang's reason alone: no node was tried
    if n == 0:
        return "0/0 nodes are available: no nodes in the snapshot."
    rejection = _rejection(agg, c)
    if rejection:
        return f"0/{n} nodes are available: {rejection}."
    error = _filter_error(agg, c)
    if error:
        return error
    reasons: Counter[str] = Counter()
    open_nodes = np.ones(n, dtype=np.bool_)
    for stage in _stages(agg, c, after):
        rejected = np.zeros(n, dtype=np.bool_)
        by_reason: dict[str, BoolArray] = {}
        for reason, fails in stage:  # a node counts once per reason, whatever rule of the filter gave it
            by_reason[reason] = by_reason.get(reason, np.zeros(n, dtype=np.bool_)) | fails
        for reason, fails in by_reason.items():
            hit = open_nodes & fails
            if hit.any():
                reasons[reason] += int(hit.sum())
            rejected |= hit
        open_nodes &= ~rejected
    if open_nodes.any():
        reasons[LEFT_OUT] += int(open_nodes.sum())
    parts = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
    return f"0/{n} nodes are available: {parts}."


def _rejection(agg: Aggregation, c: int) -> str:
    """The first PreFilter rejection of the class's pod, in the kube-scheduler's order ("" if none)."""
    plugins = {t.plugin.name: t.plugin for t in agg.filters}
    for name in _in_order(list(plugins)):
        plugin = plugins[name]
        if implements(plugin, Rejects) and (message := cast(Rejects, plugin).rejection(agg.class_pods[c])):
            return message
    return ""


def _filter_error(agg: Aggregation, c: int) -> str:
    """The first Filter error of the class's pod, in the kube-scheduler's order ("" if none)."""
    plugins = {t.plugin.name: t.plugin for t in agg.filters}
    for name in _in_order(list(plugins)):
        plugin = plugins[name]
        if isinstance(plugin, FilterError) and (message := plugin.filter_error(agg.class_pods[c])):
            return message
    return ""


def _filter_stage(agg: Aggregation, table: FilterTable, c: int) -> Stage:
    """A filter's reasons; per node, as the plugin gives them when it has several."""
    fails = ~table.class_mask(c)
    plugin = table.plugin
    if not isinstance(plugin, NodeReasons) or not fails.any() or not agg.nodes:
        return [(plugin.reason, fails)]
    failing = np.nonzero(fails)[0]
    per_node = plugin.node_reasons(agg.class_pods[c], [agg.nodes[i] for i in failing])
    stage: dict[str, BoolArray] = {}
    for i, reasons in zip(failing.tolist(), per_node, strict=True):
        for reason in reasons or (plugin.reason,):
            stage.setdefault(reason, np.zeros(len(fails), dtype=np.bool_))[i] = True
    return list(stage.items())


def _in_order(names: list[str]) -> list[str]:
    """Plugin names in the kube-scheduler's filter order, the others after them as given."""
    rank = {name: k for k, name in enumerate(SCHEDULER_FILTERS)}
    rank |= {ours: rank[theirs] for ours, theirs in SAME_AS.items()}
    return sorted((n for n in names if n in rank), key=lambda n: rank[n]) + [n for n in names if n not in rank]


def _stages(agg: Aggregation, c: int, after: After) -> Iterator[Stage]:
    """The filters in the order the kube-scheduler runs them, each check as a Stage (a plugin's
    filters in the order it was built, the batch's rules merged into the check of their reason)."""
    p = agg.problem
    stages: dict[str, list[Stage]] = {}
    reasons: dict[str, str] = {}
    for t in agg.filters:
        stages.setdefault(t.plugin.name, []).append(_filter_stage(agg, t, c))
        reasons.setdefault(t.plugin.name, t.plugin.reason)
    dra = _dra_capacity(agg)
    stages[FIT] = [_fit(p, c, after, dra)]
    devices = _devices_left(p, c, after, dra)
    if devices.any():  # the devices the plan's placements took: DynamicResources' reason, after its own check
        stages.setdefault(DYNAMIC_RESOURCES, []).append([(CANNOT_ALLOCATE, devices)])
    for name, reason, fails in batch_failures(p, c, after.assignment, after.cap_left, reasons):
        checks = stages.setdefault(name, [])
        check = next((stage for stage in checks if any(r == reason for r, _ in stage)), None)
        if check is None:
            checks.append([(reason, fails)])
        else:
            check.append((reason, fails))
    yield from (stage for n in _in_order(list(stages)) for stage in stages[n])
    if p.has_devices and p.gpu_count[c] > 0:
        yield [(DEVICES, ~device_fit(after.device_free, GpuNeed(int(p.gpu_count[c]), int(p.gpu_milli[c]))))]
    for gang in p.gangs:
        if c in gang.classes and gang.domain is not None:
            yield [(GANG_DOMAIN, gang.domain < 0)]


def _fit(p: Problem, c: int, after: After, dra: BoolArray) -> Stage:
    """NodeResourcesFit: a reason per resource the pod requests and the node lacks (but where the
    node's capacity of it is DRA devices: DynamicResources' to say)."""
    demand = p.demand[c]
    lacking = (after.free < demand[None, :]) & (demand[None, :] > 0) & ~dra
    return [("Too many pods" if name == "pods" else f"Insufficient {name}", lacking[:, r])
            for r, name in enumerate(p.resources) if lacking[:, r].any()]


def _devices_left(p: Problem, c: int, after: After, dra: BoolArray) -> BoolArray:
    """The nodes without the DRA devices the class's pods take."""
    demand = p.demand[c]
    lacking = (after.free < demand[None, :]) & (demand[None, :] > 0) & dra
    return np.asarray(lacking.any(axis=1), dtype=np.bool_)


def _dra_capacity(agg: Aggregation) -> BoolArray:
    """(N, R) where a node's capacity of a resource is the DRA devices DynamicResources offers
    (a DeviceClass's free devices), not its allocatable."""
    p = agg.problem
    cached = _DRA_CAPACITY.get(id(p))
    if cached is not None and cached[0] is p:
        return cached[1]
    out = np.zeros((p.n_nodes, len(p.resources)), dtype=np.bool_)
    plugin = next((t.plugin for t in agg.filters if t.plugin.name == DYNAMIC_RESOURCES
                   and isinstance(t.plugin, ExtraResources)), None)
    if plugin is not None and len(agg.nodes) == p.n_nodes:
        index = {name: r for r, name in enumerate(p.resources)}
        for i, node in enumerate(agg.nodes):
            for name in plugin.extra_allocatable(node):
                if name in index:
                    out[i, index[name]] = True
    _DRA_CAPACITY.clear()
    _DRA_CAPACITY[id(p)] = (p, out)
    return out


_DRA_CAPACITY: dict[int, tuple[Problem, BoolArray]] = {}
"""The last problem's DRA capacity cells (explaining one plan asks for them once per class)."""
