"""The current placement in the model's terms: movable pods in classes, per node.

The movable pods are handed to :func:`models.aggregate.aggregate` as if they were pending (and
the pods that must stay as the usage), so every filter plugin (node affinity, taints, tenants,
GPU models, host ports...) decides where each could go, exactly as for ``plan``. The aggregated
classes are then split by namespace and by the PodDisruptionBudgets that select them, so that
per-namespace and per-PDB budgets are sums over classes. ``x0[c, i]`` counts the class-c pods
on node i now.

The layout also carries the objective: the profile's, as its score plugins give its terms for
this problem, evaluated exactly by ``models.terms`` on :meth:`Layout.assignment` (the plan
and the rebalance measure a cluster the same way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from kubeplace.kube.disruption import selects
from kubeplace.kube.objects import Pod, Snapshot
from kubeplace.models.aggregate import Aggregation, aggregate, measured_array
from kubeplace.models.config import Configuration, Profile, instantiate
from kubeplace.models.formulation.gpu_rows import device_use
from kubeplace.models.framework import LoadBalanceTerm, Objective, ObjectiveTerm, PluginSet
from kubeplace.models.gpu import WHOLE
from kubeplace.models.problem import Assignment, BoolArray, IntArray, Problem, total_requests
from kubeplace.models.terms import objective_value
from kubeplace.rebalance.cluster_state import ClusterState
from kubeplace.rebalance.movable import PodFacts, Rules, exclusion


@dataclass(frozen=True)
class Layout:
    agg: Aggregation
    pods: tuple[Pod, ...]
    """Movable pods, as they run now (with their node)."""
    pod_class: IntArray  # (P,) class of each movable pod
    agg_class: IntArray  # (C,) aggregated class of each class
    namespace: tuple[str, ...]  # (C,)
    pdbs: tuple[tuple[int, ...], ...]  # (C,) indices into ClusterState.pdbs
    pdb_allowed: tuple[int, ...]  # per ClusterState.pdbs entry: disruptions allowed now
    x0: IntArray  # (C, N)
    eligible: BoolArray  # (C, N): may be there (current nodes included)
    free: IntArray  # (N, R) room for movable (and target) pods: allocatable - usage of the pods that stay
    excluded: tuple[tuple[Pod, str], ...]
    targets: tuple[Pod, ...] = ()
    target_agg_classes: tuple[int, ...] = ()
    target_count: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    """(K_agg,) target pods per aggregated class."""
    objective: Objective = Objective.BALANCE
    terms: tuple[ObjectiveTerm, ...] = ()
    """The objective's terms for this problem, from the profile's score plugins."""

    @property
    def problem(self) -> Problem:
        return self.agg.problem

    @property
    def n_classes(self) -> int:
        return int(self.agg_class.shape[0])

    @property
    def demand(self) -> IntArray:
        return self.agg.problem.demand[self.agg_class]

    def requests(self, y: IntArray) -> IntArray:
        """(N, R) requests of the movable pods placed as ``y`` (saturated: never wraps)."""
        return total_requests(y.T, self.demand)

    def load(self, y: IntArray, measured: bool = False) -> IntArray:
        """(N, R) total requests on each node when movable classes are placed as ``y`` (with
        ``measured``: the measured load of the pods that stay plus the movable pods' requests)."""
        return self.agg.problem.base(measured) + self.requests(y)

    def room(self, y: IntArray) -> IntArray:
        """(N, R) room left when movable classes are placed as ``y``: a node the movable pods
        overcommit now may stay as it is (the kubelet does not evict for requests)."""
        return np.maximum(self.free, self.requests(self.x0)) - self.requests(y)

    def within_caps(self, y: IntArray) -> bool:
        """Whether placement ``y`` keeps every group cap (host ports, volume limits, a domain's
        cap) on each node or domain, where it held now: a cap the pods that stay already break
        may stay as broken as it is (as ``room`` lets an overcommitted node stay)."""
        for cap in self.problem.group_caps:
            member = np.isin(self.agg_class, np.asarray(cap.classes, dtype=np.int64))
            after, now = y[member].sum(axis=0), self.x0[member].sum(axis=0)
            if cap.domain is not None:
                reach = cap.domain >= 0
                after = np.bincount(cap.domain[reach], weights=after[reach], minlength=len(cap.cap))
                now = np.bincount(cap.domain[reach], weights=now[reach], minlength=len(cap.cap))
            if (after > np.maximum(cap.cap, now)).any():
                return False
        return True

    def assignment(self, y: IntArray) -> Assignment:
        """Placement ``y`` (C, N) of the movable classes as an assignment of the problem's
        classes; whole-GPU pods take the wholly free devices, lowest index first (pods sharing
        a device never move)."""
        p = self.problem
        dense = np.zeros((p.n_classes, p.n_nodes), dtype=np.int64)
        np.add.at(dense, self.agg_class, y)
        a = Assignment.from_dense(dense)
        if not p.has_devices:
            return a
        return Assignment(a.cls, a.node, a.counts, device_use(p, a.cls, a.node, np.arange(len(a.cls)), None, a.counts))

    def value(self, y: IntArray) -> float:
        """The exact objective (lower is better) with the movable classes placed as ``y``."""
        return objective_value(self.problem, self.assignment(y), self.terms)

    def balance_terms(self) -> list[tuple[int, int, bool]]:
        """(resource index, weight, measured) of the balance terms whose resource is modelled."""
        out = []
        for t in self.terms:
            if isinstance(t, LoadBalanceTerm):
                r = self.agg.problem.resource_index(t.resource)
                if r is not None:
                    out.append((r, t.weight, t.measured))
        return out


def build_layout(state: ClusterState, rules: Rules, config: Configuration, profile: Profile,
                 targets: Sequence[Pod] = ()) -> Layout:
    rules.check()
    snap = instantiate(config, profile, state.snapshot).mark_unmodelled(state.snapshot)
    node_names = frozenset(n.name for n in snap.nodes)
    movable: list[Pod] = []
    excluded: list[tuple[Pod, str]] = []
    for pod in snap.bound:
        reason = exclusion(pod, state.facts.get(pod.key, PodFacts()), rules, node_names, config.gpu)
        if reason:
            excluded.append((pod, reason))
        else:
            movable.append(pod)
    for _ in range(2):  # a pod aggregate cannot model (invalid GPU request) stays where it is
        agg, plugins = _aggregate(snap, movable, excluded, targets, config, profile)
        left = {p.key for p in agg.left}
        stuck = [p for p in movable if p.key in left]
        if not stuck:
            break
        excluded += [(p, "placement rule not modelled") for p in stuck]
        movable = [p for p in movable if p not in stuck]
    layout = _with_measured_base(_split(state, agg, movable, excluded, targets), snap)
    return replace(layout, objective=profile.objective, terms=plugins.terms(layout.problem))


def _aggregate(snap: Snapshot, movable: list[Pod], excluded: list[tuple[Pod, str]], targets: Sequence[Pod],
               config: Configuration, profile: Profile) -> tuple[Aggregation, PluginSet]:
    pending = tuple(replace(p, node_name="") for p in movable) + tuple(targets)
    view = Snapshot(snap.nodes, pending, tuple(p for p, _ in excluded if p.node_name and not p.finished),
                    snap.namespace_labels, (), snap.source, storage=snap.storage, node_metrics=snap.node_metrics,
                    pod_metrics=snap.pod_metrics)
    plugins = instantiate(config, profile, view)
    return aggregate(view, plugins, config.gpu, profile.placement_weight), plugins


def _split(state: ClusterState, agg: Aggregation, movable: list[Pod], excluded: list[tuple[Pod, str]],
           targets: Sequence[Pod]) -> Layout:
    p = agg.problem
    node_index = {name: i for i, name in enumerate(p.node_names)}
    n_movable = len(movable)
    agg_of_pending = np.full(n_movable + len(targets), -1, dtype=np.int64)
    for c, members in enumerate(p.members):
        agg_of_pending[list(members)] = c
    keys: dict[tuple[int, str, tuple[int, ...]], int] = {}
    pod_class = np.zeros(n_movable, dtype=np.int64)
    for k, pod in enumerate(movable):
        pdbs = tuple(j for j, pdb in enumerate(state.pdbs) if selects(pdb, pod))
        pod_class[k] = keys.setdefault((int(agg_of_pending[k]), pod.namespace, pdbs), len(keys))
    ordered = list(keys)
    agg_class = np.array([k[0] for k in ordered], dtype=np.int64)
    x0 = np.zeros((len(ordered), p.n_nodes), dtype=np.int64)
    for k, pod in enumerate(movable):
        x0[pod_class[k], node_index[pod.node_name]] += 1
    eligible = p.eligible[agg_class] | (x0 > 0) if len(ordered) else np.zeros((0, p.n_nodes), np.bool_)
    target_classes = tuple(sorted({int(c) for c in agg_of_pending[n_movable:] if c >= 0}))
    return Layout(agg, tuple(movable), pod_class, agg_class, tuple(k[1] for k in ordered),
                  tuple(k[2] for k in ordered), tuple(pdb.allowed for pdb in state.pdbs), x0,
                  eligible, _movable_room(agg), tuple(excluded), tuple(targets),
                  target_classes, np.bincount(agg_of_pending[n_movable:][agg_of_pending[n_movable:] >= 0],
                                              minlength=p.n_classes).astype(np.int64))


def _with_measured_base(layout: Layout, snap: Snapshot) -> Layout:
    """With metrics, the problem's measured load becomes what the pods that stay put on each
    node: the node's measured load (from the whole snapshot, every running pod counted) less
    the requests of its movable pods, which the move model adds back wherever they go (at
    least 0). The staying load of a node without metrics is the staying pods' requests."""
    p = layout.problem
    if p.measured is None:
        return layout
    movable_now = layout.requests(layout.x0)
    whole = measured_array(snap, p.used + movable_now, p.resources)
    if whole is None:
        return layout
    base = np.maximum(whole - movable_now, 0)
    return replace(layout, agg=replace(layout.agg, problem=replace(p, measured=base)))


def _movable_room(agg: Aggregation) -> IntArray:
    """Free capacity for the pods that may move (whole-GPU pods at most: pods sharing a device
    stay): a whole-GPU pod takes a slot of the device resource per device and the devices
    themselves, and only the devices that the staying pods leave entirely free count (a device
    shared by a staying pod is no room for a whole GPU)."""
    p = agg.problem
    free = p.free.copy()
    g = p.resource_index(p.gpu.device_resource)
    if g is not None and p.device_free.shape[1]:
        free[:, g] = np.minimum(free[:, g], (p.device_free == WHOLE).sum(axis=1))
    return free
