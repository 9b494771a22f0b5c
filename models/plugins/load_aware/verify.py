"""LoadAware's independent verifier check, over the whole plan: no new pod (but a DaemonSet's) on
a node whose measured load is above a threshold. The measured load is the node's metrics plus the
requests of the pods running there that the metrics cannot include; Overcommit's check reads it
too. Imports only ``kubeplace.kube``."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Protocol

from kubeplace.kube.objects import CPU, MEMORY, Node
from kubeplace.kube.plan_view import Finding, PlanView


class LoadAwareSettings(Protocol):
    """What the check reads of the rule's args (``LoadAwareArgs``)."""

    @property
    def thresholds(self) -> Mapping[str, float]: ...


_UTC_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?Z")
_INFINITE = float("inf")


def _time(text: str) -> float | None:
    """Seconds since the epoch of a UTC RFC 3339 time (``2025-01-02T03:04:05Z``, as the API writes
    creation times), by the proleptic Gregorian calendar; None for anything else."""
    found = _UTC_TIME.fullmatch(text)
    if found is None:
        return None
    year, month, day, hour, minute, second = map(int, found.groups())
    year -= month <= 2  # days from civil: years start in March, so leap days come last
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    days = era * 146097 + day_of_era - 719468
    return float(days * 86400 + hour * 3600 + minute * 60 + second)


def measured_loads(view: PlanView) -> dict[str, dict[str, int]]:
    """Per node with metrics: its measured usage plus the requests of the pods running there that
    the metrics cannot include (no PodMetrics while pods are measured, or created after the node
    was measured)."""
    snapshot = view.snapshot
    loads: dict[str, dict[str, int]] = {}
    for name, metrics in snapshot.node_metrics.items():
        load = {CPU: max(metrics.usage.get(CPU, 0), 0), MEMORY: max(metrics.usage.get(MEMORY, 0), 0)}
        for pod in view.bound_by_node.get(name, ()):
            if pod.node_name != name or pod.finished:
                continue
            created = _time(pod.creation)
            missing = bool(snapshot.pod_metrics) and pod.key not in snapshot.pod_metrics
            if missing or (created is not None and created > metrics.timestamp):
                for resource in (CPU, MEMORY):
                    load[resource] += max(pod.requests.get(resource, 0), 0)
        loads[name] = load
    return loads


def ratio(load: Mapping[str, int], node: Node, resource: str) -> float:
    """Measured load over allocatable (a node without any of the resource: fully loaded)."""
    allocatable = node.allocatable.get(resource, 0)
    return load.get(resource, 0) / allocatable if allocatable > 0 else _INFINITE


def check_plan(view: PlanView, args: LoadAwareSettings) -> Iterator[Finding]:
    loads = measured_loads(view)
    if not loads:
        return  # no node measured: nothing to check
    nodes = {node.name: node for node in view.snapshot.nodes}
    for node_name, pods in view.by_node.items():
        load, node = loads.get(node_name), nodes[node_name]
        if load is None:
            continue
        for resource, threshold in args.thresholds.items():
            share = ratio(load, node, resource)
            if share > threshold:
                for pod, _ in pods:
                    if pod.owner_kind != "DaemonSet":
                        yield (pod.namespace, pod.name, node.name,
                               f"node {resource} load {share:.2f} above threshold {threshold:.2f}")
                break
