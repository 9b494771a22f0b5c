"""Plugin contracts, as in the kube-scheduler framework, for a batch optimiser.

Three extension points:

- **Filter** plugins prune (pod, node) pairs before any variable exists. A filter says
  which part of a pod (``pod_key``) and of a node (``node_key``) it reads; kubeplace
  evaluates it once per distinct pod key against the distinct node keys, so pods and
  nodes that look the same to every plugin are handled as one class.
- **Score** plugins add objective terms (typed terms below, linearised by the model
  builder and evaluated by the greedy heuristics the same way).
- **Constraint** plugins add rules over groups of pods (``models.problem.GroupCap``,
  ``models.problem.Gang``).

Plugins never import a solver library: they see typed cluster objects and numpy arrays
and return typed terms. The registry is a plain dict from name to factory, built fresh
for every run, and user plugins are merged in from a Python import path.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.models.problem import BoolArray, Gang, GroupCap

FILTER = "filter"
SCORE = "score"
CONSTRAINT = "constraint"
EXTENSION_POINTS = (FILTER, SCORE, CONSTRAINT)


@dataclass(frozen=True)
class RunContext:
    """What every plugin factory may read: the snapshot of this run."""

    snapshot: Snapshot


@runtime_checkable
class FilterPlugin(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def reason(self) -> str:
        """Shown per node that fails, e.g. "node(s) had untolerated taint"."""
        ...

    def pod_key(self, pod: Pod) -> Hashable:
        """The part of the pod this filter reads; pods with equal keys get equal answers."""
        ...

    def node_key(self, node: Node) -> Hashable:
        """The part of the node this filter reads."""
        ...

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        """True where ``pod`` may run on ``nodes[i]`` as far as this rule goes."""
        ...


@dataclass(frozen=True)
class LoadBalanceTerm:
    """weight * sum over nodes with capacity of (u_i - mu)^2 for one resource."""

    resource: str
    weight: int


@dataclass(frozen=True)
class NodesUsedTerm:
    """weight per node that carries at least one pod after placement."""

    weight: int


@dataclass(frozen=True)
class FragmentationTerm:
    """weight per GPU of FGD fragmentation after placement, task shapes weighted by the
    devices they ask for (``models.fragmentation``). It has no linear form: it ranks greedy
    candidates and every answer, the exact model keeps to the other terms."""

    weight: int


@dataclass(frozen=True)
class GangDomainsTerm:
    """weight per domain of its preferred topology key that a gang's placed members use."""

    weight: int


ObjectiveTerm = LoadBalanceTerm | NodesUsedTerm | FragmentationTerm | GangDomainsTerm
LINEAR_TERMS = (LoadBalanceTerm, NodesUsedTerm, GangDomainsTerm)


@runtime_checkable
class ScorePlugin(Protocol):
    @property
    def name(self) -> str: ...

    def terms(self) -> Sequence[ObjectiveTerm]:
        ...


class ClassView(Protocol):
    """What a constraint plugin sees of the aggregated problem being built."""

    @property
    def class_pods(self) -> Sequence[Pod]:
        """A representative pod per class."""
        ...

    @property
    def nodes(self) -> Sequence[Node]:
        ...

    @property
    def bound_by_node(self) -> Mapping[str, Sequence[Pod]]:
        ...


@runtime_checkable
class ConstraintPlugin(Protocol):
    @property
    def name(self) -> str: ...

    def pod_key(self, pod: Pod) -> Hashable:
        """Pods in different groups of this rule must not share a class."""
        ...

    def constraints(self, view: ClassView) -> Sequence[GroupCap | Gang]:
        ...


Plugin = FilterPlugin | ScorePlugin | ConstraintPlugin


@dataclass(frozen=True)
class PluginFactory:
    """How to build one plugin: its extension point, typed args and constructor."""

    name: str
    point: str
    args_type: type[Any] | None
    build: Callable[[Any, RunContext], Plugin]


Registry = dict[str, PluginFactory]


@dataclass(frozen=True)
class PluginSet:
    """The plugins of one profile, instantiated for one run."""

    filters: tuple[FilterPlugin, ...] = ()
    scores: tuple[ScorePlugin, ...] = ()
    constraints: tuple[ConstraintPlugin, ...] = ()
    objective_terms: tuple[ObjectiveTerm, ...] = field(default=())


def all_true(n: int) -> BoolArray:
    return np.ones(n, dtype=np.bool_)
