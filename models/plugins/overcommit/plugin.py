"""Overcommit: how full nodes may be filled by requests, by node label and measured load.

Ordinary nodes take requests only up to ``headroom`` of their allocatable (default 1.0: the
kubelet's own limit, i.e. off). Nodes carrying ``nodeLabel`` (``key=value``, or ``key`` for
any value; default ``overcommit=true``) whose measured load (``kube.metrics.measured_load``) is
below ``loadThreshold`` for every measured resource may be filled up to 100% of allocatable,
the most the kubelet admits: nothing this plugin allows is rejected at admission. A labelled
node without fresh metrics, or as loaded as the threshold, is an ordinary node.

Colocation stacks that publish reclaimed capacity as extended resources (Koordinator's
``kubernetes.io/batch-cpu``, ``kubernetes.io/batch-memory``) need nothing from this plugin:
those are resources like any other, filled by the kubelet's rule (``examples/batch-resources``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.metrics import MEASURED, measured_load
from kubeplace.kube.objects import CPU, MEMORY, Node, Pod
from kubeplace.models.framework import ClassView, RunContext
from kubeplace.models.plugins.load_aware.plugin import load_ratio
from kubeplace.models.problem import Gang, GroupCap, Headroom

NAME = "Overcommit"


def label_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """``key=value``: the label has that value; ``key``: the label exists."""
    key, sep, value = selector.partition("=")
    return key in labels and (not sep or labels[key] == value)


@dataclass(frozen=True)
class OvercommitArgs:
    headroom: float = 1.0
    """The share of allocatable that ordinary nodes are filled to by requests (0, 1]."""
    nodeLabel: str = "overcommit=true"
    loadThreshold: float = 0.7
    """A labelled node may be filled to 100% only while its measured load is below this."""
    resources: tuple[str, ...] = (CPU, MEMORY)
    """The resources the headroom applies to."""

    def validate(self) -> list[str]:
        problems = []
        for name, value in (("headroom", self.headroom), ("loadThreshold", self.loadThreshold)):
            if not (math.isfinite(value) and 0 < value <= 1):
                problems.append(f"{name}: expected a number in (0, 1], got {value}")
        key = self.nodeLabel.partition("=")[0]
        if not key:
            problems.append(f"nodeLabel: expected 'key=value' or 'key', got {self.nodeLabel!r}")
        if not self.resources:
            problems.append("resources: expected at least one resource")
        return problems


@dataclass(frozen=True)
class Overcommit:
    args: OvercommitArgs
    loads: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    name: str = NAME

    def may_overcommit(self, node: Node) -> bool:
        """Labelled, measured, and below the load threshold for every measured resource."""
        load = self.loads.get(node.name)
        if load is None or not label_matches(self.args.nodeLabel, node.labels):
            return False
        return all(load_ratio(int(load.get(r, 0)), int(node.allocatable.get(r, 0))) < self.args.loadThreshold
                   for r in MEASURED)

    def pod_key(self, pod: Pod) -> Hashable:
        return None

    def constraints(self, view: ClassView) -> Sequence[GroupCap | Gang | Headroom]:
        if self.args.headroom >= 1.0:
            return ()
        share = np.array([1.0 if self.may_overcommit(n) else self.args.headroom for n in view.nodes],
                         dtype=np.float64)
        return (Headroom(tuple(self.args.resources), share),)


def build(args: OvercommitArgs, ctx: RunContext) -> Overcommit:
    return Overcommit(args, {name: load.usage for name, load in measured_load(ctx.snapshot).items()})
