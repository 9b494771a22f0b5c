"""Overcommit's independent verifier check, per node over the whole plan: requests on a node up to
``headroom`` of allocatable, or all of it on a node with the overcommit label whose measured load
(LoadAware's check computes it) is below the threshold for cpu and memory. Imports only
``kubeplace.kube`` and the other rules' checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from kubeplace.kube.objects import CPU, MEMORY
from kubeplace.kube.plan_view import Finding, PlanView
from kubeplace.models.plugins.load_aware.verify import measured_loads, ratio


class OvercommitSettings(Protocol):
    """What the check reads of the rule's args (``OvercommitArgs``)."""

    @property
    def headroom(self) -> float: ...

    @property
    def nodeLabel(self) -> str: ...

    @property
    def loadThreshold(self) -> float: ...

    @property
    def resources(self) -> tuple[str, ...]: ...


def check_plan(view: PlanView, args: OvercommitSettings) -> Iterator[Finding]:
    if args.headroom >= 1.0:
        return
    nodes = {node.name: node for node in view.snapshot.nodes}
    loads, on = measured_loads(view), view.bound_by_node
    key, sep, value = args.nodeLabel.partition("=")
    for node_name, pods in view.by_node.items():
        node, load = nodes[node_name], loads.get(node_name)
        labelled = key in node.labels and (not sep or node.labels[key] == value)
        cool = load is not None and all(ratio(load, node, r) < args.loadThreshold for r in (CPU, MEMORY))
        share = 1.0 if labelled and cool else args.headroom
        for resource in args.resources:
            added = sum(max(pod.requests.get(resource, 0), 0) * count for pod, count in pods)
            if added <= 0:
                continue
            allocatable = node.allocatable.get(resource, 0)
            limit = min(int(allocatable * share), allocatable)  # rounded down: both are >= 0
            used = sum(max(p.requests.get(resource, 0), 0) for p in on.get(node_name, ()) if not p.finished)
            if used + added > limit:
                first = next(p for p, _ in pods if p.requests.get(resource, 0) > 0)
                yield (first.namespace, first.name, node.name,
                       f"{resource} requests {_amount(resource, used + added)} above {share:g} of allocatable "
                       f"{_amount(resource, allocatable)} (headroom {_amount(resource, limit)})")


def _amount(resource: str, value: int) -> str:
    return f"{value}m" if resource == CPU else str(value)
