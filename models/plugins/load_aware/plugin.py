"""LoadAware: placement driven by measured load, as Koordinator's LoadAwareScheduling.

- **Filter**: a node whose measured utilisation of a resource (``kube.metrics.measured_load``
  over its allocatable) is above that resource's threshold takes no new pods, with the reason
  "node(s) had cpu load 0.83 above threshold 0.70". DaemonSet pods are not filtered (they
  belong on every node, as in Koordinator). A node without fresh metrics passes.
- **Score**: the cluster's measured load plus the new pods' requests is balanced
  (``LoadBalanceTerm(measured=True)``), in place of the requests alone for those resources, in
  ``plan``, ``serve`` and ``rebalance`` alike (so the rebalancer moves pods off hot nodes).

Without metrics (none in the snapshot, or all stale) it does nothing.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.metrics import MEASURED, measured_load
from kubeplace.kube.objects import Node, Pod
from kubeplace.models.framework import LoadBalanceTerm, ObjectiveTerm, RunContext
from kubeplace.models.plugins.balance import ResourceWeight
from kubeplace.models.problem import BoolArray, Problem

NAME = "LoadAware"
DAEMON_SET = "DaemonSet"


def check_shares(values: Mapping[str, object], field_name: str) -> list[str]:
    """Problems of a {resource: share of allocatable} mapping: measured resources only, each a
    number in (0, 1]."""
    problems = []
    for resource, value in values.items():
        if resource not in MEASURED:
            problems.append(f"{field_name}.{resource}: expected one of {', '.join(MEASURED)} (what the metrics API "
                            f"measures)")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and 0 < value <= 1):
            problems.append(f"{field_name}.{resource}: expected a number in (0, 1], got {value!r}")
    return problems


@dataclass(frozen=True)
class LoadAwareArgs:
    thresholds: Mapping[str, float] = field(default_factory=lambda: {"cpu": 0.7, "memory": 0.8})
    """Per resource, the measured share of allocatable above which a node takes no new pods."""
    resources: tuple[ResourceWeight, ...] = field(default_factory=lambda: (ResourceWeight("cpu"),
                                                                            ResourceWeight("memory")))
    """The measured resources whose load (plus the new pods' requests) is balanced, with weights."""

    def validate(self) -> list[str]:
        problems = check_shares(self.thresholds, "thresholds")
        for i, r in enumerate(self.resources):
            if r.name not in MEASURED:
                problems.append(f"resources[{i}].name: expected one of {', '.join(MEASURED)}, got {r.name!r}")
            elif r.weight < 0:
                problems.append(f"resources[{i}].weight: expected an integer >= 0, got {r.weight}")
        return problems


def load_ratio(amount: int, allocatable: int) -> float:
    """Measured load over allocatable (a node without any of the resource: fully loaded)."""
    return amount / allocatable if allocatable > 0 else math.inf


@dataclass(frozen=True)
class LoadAware:
    args: LoadAwareArgs
    loads: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Measured load per node name (only nodes with fresh metrics)."""
    name: str = NAME
    reason: str = "node(s) had load above threshold"

    def hot(self, node: Node) -> str:
        """The reason ``node`` is too loaded for new pods, or "" when it is not."""
        load = self.loads.get(node.name)
        if load is None:
            return ""
        for resource, threshold in self.args.thresholds.items():
            ratio = load_ratio(int(load.get(resource, 0)), int(node.allocatable.get(resource, 0)))
            if ratio > threshold:
                shown = "inf" if math.isinf(ratio) else f"{ratio:.2f}"
                return f"node(s) had {resource} load {shown} above threshold {threshold:.2f}"
        return ""

    def pod_key(self, pod: Pod) -> Hashable:
        return pod.owner_kind == DAEMON_SET

    def node_key(self, node: Node) -> Hashable:
        return self.hot(node)

    def node_key_basis(self) -> object:
        return (self.args, self.loads)

    def node_reasons(self, pod: Pod, nodes: Sequence[Node]) -> Sequence[tuple[str, ...]]:
        """Per node, the load above its threshold (empty where the pod may go)."""
        passes = self.filter(pod, nodes)
        return [() if ok else (self.hot(n),) for n, ok in zip(nodes, passes, strict=True)]

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        if pod.owner_kind == DAEMON_SET:
            return np.ones(len(nodes), dtype=np.bool_)
        return np.array([not self.hot(n) for n in nodes], dtype=np.bool_)

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        if problem.measured is None:
            return ()
        return [LoadBalanceTerm(r.name, r.weight, measured=True) for r in self.args.resources if r.weight > 0]


def build(args: LoadAwareArgs, ctx: RunContext) -> LoadAware:
    return LoadAware(args, {name: load.usage for name, load in measured_load(ctx.snapshot).items()})
