"""Plugin contracts, as in the kube-scheduler framework, for a batch optimiser.

A plugin's factory declares its extension point (or points); the plugin is checked against them
when it is built (as the kube-scheduler's framework does when it starts): a plugin missing a
method of a declared point is refused with a :class:`PluginError`, never silently skipped, and a
plugin is called only at the points it declares. Three extension points:

- **Filter** plugins prune (pod, node) pairs before any variable exists. A filter says
  which part of a pod (``pod_key``) and of a node (``node_key``) it reads; kubeplace
  evaluates it once per distinct pod key against the distinct node keys, so pods and
  nodes that look the same to every plugin are handled as one class.
- **Score** plugins add objective terms (typed terms below; ``models.terms`` says what each
  type means: its exact value, which the greedy heuristics rank by, and its linear form); they see the problem being
  solved, so a term may depend on it (the gangs' preferred topology domains).
- **Constraint** plugins add rules over groups of pods (``models.problem.Rule``: caps per
  node or topology domain, gangs, and the inter-pod rules ``Exclusion``, ``Attraction``,
  ``Spread``).

A factory may build several plugins under one configurable name (``InterPodAffinity`` is three
filters, each with the kube-scheduler's reason, and a constraint part): each is filed under the
declared points it implements, and every declared point must be implemented by one of them.

Any plugin may also say which rules of a pod it cannot model (``unmodelled``): such a pod
is left to the default scheduler, with those reasons, rather than placed against a rule.

Plugins never import a solver library: they see typed cluster objects and numpy arrays
and return typed terms. The registry is a plain dict from name to factory, built fresh
for every run, and user plugins are merged in from a Python import path.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from kubeplace.kube.errors import KubeplaceError
from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.models.problem import BoolArray, Problem, Rule

FILTER = "filter"
SCORE = "score"
CONSTRAINT = "constraint"
EXTENSION_POINTS = (FILTER, SCORE, CONSTRAINT)


class Objective(enum.Enum):
    """A profile's goal once the priority-weighted number of placed pods is as high as it can
    be (the first, lexicographic goal). It chooses the profile's default score plugin, whose
    terms are what the model minimises, the greedy ranks and every answer is evaluated by."""

    BALANCE = "balance"
    """Spread the load: sum over nodes and resources of w_r (u_ir - mu_r)^2 (``Balance``)."""
    BINPACK = "binpack"
    """Fewest nodes in use (``BinPack``), for scale-down."""
    DEFRAG = "defrag"
    """Keep the free GPU capacity usable by the workload's shapes (``GPUFragmentation``)."""


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
    """weight * sum over nodes with capacity of (u_i - mu)^2 for one resource; u_i is the
    requests on node i over its allocatable, or with ``measured`` its measured load plus the
    new pods' requests (``Problem.measured``: LoadAware)."""

    resource: str
    weight: int
    measured: bool = False


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


@dataclass(frozen=True)
class PreferenceTerm:
    """``weight`` times the score points the placed pods lose on ``plugin``'s preferences
    (``Problem.preferences`` of that plugin: preferred node and pod affinity, ScheduleAnyway
    spread, PreferNoSchedule taints), as the kube-scheduler weighs that plugin's score. One
    point is 1/20 of a balance unit (``models.preferences.POINTS_PER_UNIT``)."""

    plugin: str
    weight: int


ObjectiveTerm = LoadBalanceTerm | NodesUsedTerm | FragmentationTerm | GangDomainsTerm | PreferenceTerm


@runtime_checkable
class ScorePlugin(Protocol):
    @property
    def name(self) -> str: ...

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        """The terms this plugin adds for ``problem`` (the aggregated problem being solved)."""
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

    def constraints(self, view: ClassView) -> Sequence[Rule]:
        ...


@runtime_checkable
class Unmodelled(Protocol):
    """Optional on any plugin: the rules of ``pod`` that this plugin owns and kubeplace cannot
    model. A pod with any is left to the default scheduler, with these reasons."""

    def unmodelled(self, pod: Pod) -> Sequence[str]:
        ...


Plugin = FilterPlugin | ScorePlugin | ConstraintPlugin
CONTRACTS: Mapping[str, tuple[type, tuple[str, ...]]] = {
    FILTER: (FilterPlugin, ("name", "reason", "pod_key", "node_key", "filter")),
    SCORE: (ScorePlugin, ("name", "terms")),
    CONSTRAINT: (ConstraintPlugin, ("name", "pod_key", "constraints")),
}
"""Per extension point: its protocol and the members a plugin of that point must have."""


class PluginError(KubeplaceError):
    """A plugin that does not implement the extension point its factory declares."""


@runtime_checkable
class Rejects(Protocol):
    """Optional on a filter: the kube-scheduler's PreFilter. A non-empty message rejects the pod
    on every node and is the whole reason it is not placed ("0/N nodes are available: <message>.")."""

    def rejection(self, pod: Pod) -> str:
        ...


@runtime_checkable
class FilterError(Protocol):
    """Optional on a filter: an Error status (not Unschedulable) of its Filter for the pod. The
    kube-scheduler aborts the pod's scheduling with it, so the filter admits no node, and the
    message is the whole reason ('running "DynamicResources" filter plugin: ...'), after any
    PreFilter rejection."""

    def filter_error(self, pod: Pod) -> str:
        ...


@runtime_checkable
class NodeReasons(Protocol):
    """Optional on a filter whose nodes fail for different reasons: per node, the reasons it
    fails (empty where it passes), as the kube-scheduler's Filter status lists them."""

    def node_reasons(self, pod: Pod, nodes: Sequence[Node]) -> Sequence[tuple[str, ...]]:
        ...


@runtime_checkable
class PodDefaults(Protocol):
    """Optional on a plugin's args: what the kube-scheduler fills in per pod from the profile
    before any plugin reads it (PodTopologySpread's default constraints). Applied to the snapshot
    every plugin of the profile is built from and to every snapshot the profile's plugins check."""

    def defaulted(self, snapshot: Snapshot) -> Snapshot:
        ...


@runtime_checkable
class ExtraResources(Protocol):
    """Optional on a filter: countable resources of its own that pods take and nodes offer beyond
    the pods' requests and nodes' allocatable (the devices of a DRA DeviceClass), modelled as
    capacity like any resource: the node's offer less what the placed pods take."""

    def extra_requests(self, pod: Pod) -> Mapping[str, int]:
        ...

    def extra_allocatable(self, node: Node) -> Mapping[str, int]:
        ...


@runtime_checkable
class NodeKeyBasis(Protocol):
    """Optional on a filter: everything its ``node_key`` reads besides the node (its arguments,
    the cycle's tables it consults), compared by equality. With an equal basis, a node object
    seen last cycle has the same key, so the aggregation reuses last cycle's node groups when
    the nodes are the same objects; a filter without it has its keys computed every cycle."""

    def node_key_basis(self) -> object:
        ...


@dataclass(frozen=True)
class PluginFactory:
    """How to build one plugin: its extension point (FILTER, SCORE or CONSTRAINT, or a tuple of
    them for a plugin at several, such as NodePorts), typed args and constructor."""

    name: str
    point: str | tuple[str, ...]
    args_type: type[Any] | None
    build: Callable[[Any, RunContext], Plugin | tuple[Plugin, ...]]

    @property
    def points(self) -> tuple[str, ...]:
        return (self.point,) if isinstance(self.point, str) else tuple(self.point)


Registry = dict[str, PluginFactory]


_METHODS: dict[object, tuple[str, ...]] = {}
"""Per optional protocol, its methods."""


def implements(obj: object, protocol: object) -> bool:
    """``isinstance(obj, protocol)`` for an optional protocol of methods (``Rejects``,
    ``PodDefaults``, ``Unmodelled``, ``ExtraResources``, ``NodeKeyBasis``): whether ``obj`` has each
    of them, callable (then ``cast`` it). typing's check walks the protocol's members again at every
    call it answers no, which most plugins do, dozens of times a cycle."""
    methods = _METHODS.get(protocol)
    if methods is None:
        methods = _METHODS[protocol] = tuple(name for name, value in vars(cast(type, protocol)).items()
                                             if callable(value) and not name.startswith("_"))
    return all(callable(getattr(obj, name, None)) for name in methods)


def missing_members(plugin: object, point: str) -> list[str]:
    """The methods and attributes of extension point ``point`` that ``plugin`` lacks."""
    _, members = CONTRACTS[point]
    methods = {"pod_key", "node_key", "filter", "terms", "constraints"}
    return [f"{m}()" if m in methods else m for m in members
            if not hasattr(plugin, m) or (m in methods and not callable(getattr(plugin, m)))]


@dataclass(frozen=True)
class PluginSet:
    """The plugins of one profile, instantiated for one run, by extension point."""

    filters: tuple[FilterPlugin, ...] = ()
    scores: tuple[ScorePlugin, ...] = ()
    constraints: tuple[ConstraintPlugin, ...] = ()
    limits: tuple[Unmodelled, ...] = ()
    """The plugins (of any point) that say which rules they cannot model."""
    defaults: tuple[PodDefaults, ...] = ()
    """The plugin args that fill in per-pod defaults."""

    def defaulted(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the profile's per-pod defaults filled in (idempotent)."""
        for d in self.defaults:
            snapshot = d.defaulted(snapshot)
        return snapshot

    def terms(self, problem: Problem) -> tuple[ObjectiveTerm, ...]:
        """The objective for ``problem``: every score plugin's terms, in profile order. A measured
        balance term of a resource (LoadAware) takes the place of the requests balance term of
        that resource: the load it balances already holds the new pods' requests."""
        terms = [t for s in self.scores for t in s.terms(problem)]
        measured = {t.resource for t in terms if isinstance(t, LoadBalanceTerm) and t.measured}
        return tuple(t for t in terms if not (isinstance(t, LoadBalanceTerm) and not t.measured
                                              and t.resource in measured))

    def unmodelled(self, pod: Pod) -> tuple[str, ...]:
        return tuple(reason for plugin in self.limits for reason in plugin.unmodelled(pod))

    def mark_unmodelled(self, snapshot: Snapshot, bound: bool = True) -> Snapshot:
        """``snapshot`` with the profile's defaults and every pod's ``unmodelled`` reasons as these
        plugins give them; with ``bound=False`` the pending pods' only (a plan places those: the
        bound ones are usage, whatever their rules)."""
        snapshot = self.defaulted(snapshot)

        def mark(pod: Pod) -> Pod:
            new = tuple(r for r in self.unmodelled(pod) if r not in pod.unmodelled)
            return replace(pod, unmodelled=(*pod.unmodelled, *new)) if new else pod  # unchanged: the same pod

        pending = tuple(map(mark, snapshot.pending))
        bound_pods = tuple(map(mark, snapshot.bound)) if bound else snapshot.bound
        if all(a is b for a, b in zip(pending, snapshot.pending, strict=True)) and (
                bound_pods is snapshot.bound or all(a is b for a, b in zip(bound_pods, snapshot.bound, strict=True))):
            return snapshot  # nothing to mark: the same snapshot, with what it indexed once (``bound_by_node``)
        return replace(snapshot, pending=pending, bound=bound_pods)


def build_plugins(chosen: Sequence[tuple[PluginFactory, Any]], ctx: RunContext,
                  wrap: Callable[[PluginFactory, Any], Any] | None = None) -> PluginSet:
    """Builds each (factory, args) and files the plugin under the point its factory declares;
    PluginError (one line, naming the plugin and what it lacks) when it does not implement it.
    ``wrap(factory, part)``: what is filed for each part, once it is checked (the user plugins'
    guard, :mod:`models.plugin_guard`)."""
    by_point: dict[str, list[Any]] = {point: [] for point in EXTENSION_POINTS}
    limits: list[Unmodelled] = []
    defaults = tuple(cast(PodDefaults, args) for _, args in chosen if implements(args, PodDefaults))
    for d in defaults:
        ctx = replace(ctx, snapshot=d.defaulted(ctx.snapshot))
    for factory, args in chosen:
        unknown = [p for p in factory.points if p not in CONTRACTS] or ([] if factory.points else ["(none)"])
        if unknown:
            raise PluginError(f"plugin '{factory.name}': unknown extension point '{unknown[0]}' "
                              f"(expected one of {', '.join(EXTENSION_POINTS)})")
        built = factory.build(args, ctx)
        parts: tuple[Any, ...] = built if isinstance(built, tuple) else (built,)
        for point in factory.points:
            if not any(not missing_members(p, point) for p in parts):
                missing = missing_members(parts[0], point) if parts else ["a plugin"]
                raise PluginError(f"plugin '{factory.name}' declares extension point {point} but does not "
                                  f"implement {', '.join(missing)}")
        for part in parts:
            if not any(not missing_members(part, point) for point in factory.points):
                raise PluginError(f"plugin '{factory.name}': a part implements none of its extension points "
                                  f"({', '.join(factory.points)})")
        filed = {id(part): wrap(factory, part) if wrap is not None else part for part in parts}
        for point in factory.points:
            by_point[point].extend(filed[id(p)] for p in parts if not missing_members(p, point))
        for part in parts:
            if implements(part, Unmodelled):
                limits.append(filed[id(part)])
    return PluginSet(tuple(by_point[FILTER]), tuple(by_point[SCORE]), tuple(by_point[CONSTRAINT]), tuple(limits),
                     defaults)


def all_true(n: int) -> BoolArray:
    return np.ones(n, dtype=np.bool_)
