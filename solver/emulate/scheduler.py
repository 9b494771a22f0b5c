"""The kube-scheduler, one pod at a time: the baseline kubeplace must
match or beat, and one more candidate for the greedy.

Pods go in the scheduling queue's order (PrioritySort: priority, then creation, then name).
For each pod the nodes are searched in NodeTree order (zones round-robin), starting where the
previous pod's search stopped, until ``numFeasibleNodesToFind`` feasible nodes are found
(all of them below 100 nodes; 500 of 5,000). A node is feasible when it passes the static
filters (NodeUnschedulable, TaintToleration, NodeAffinity, or the profile's own), has the free
capacity (NodeResourcesFit) and host ports (NodePorts), and passes PodTopologySpread and
InterPodAffinity on the current placements. The feasible nodes are scored with the default
profile's plugins and weights (``solver.emulate.scores``); the best wins, and among equal scores
the node the kube-scheduler's heap puts on top (``scores.heap_top``), as it does without extenders.
A pod that fits nowhere waits; passes over the waiting pods repeat while one places anything
(the queueing hints would requeue them when a pod they wait for arrives).

Pods nominated to a node hold its room against pods of lower or equal priority (NodeResourcesFit
and NodePorts with them added, ``kube.nominated``; not yet their inter-pod rules).
Not modelled: preemption, ImageLocality, GPU devices, gangs (the default
profile schedules gang members one by one). The default spread constraints are those of the pods
given: pass the snapshot as the profile fills them in (``PluginSet.defaulted``, as ``plan`` does).

:func:`as_candidate` turns its placements into a placement of the aggregated problem that
competes with the greedy ones , so a plan never places fewer pods than this
emulation does, wherever the model's rules agree with each of its steps.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.models.aggregate import queue_rank
from kubeplace.models.framework import FilterPlugin, RunContext
from kubeplace.models.plugins import RULES, node_affinity, node_unschedulable, taint_toleration
from kubeplace.models.problem import Assignment, BoolArray, IntArray, Problem
from kubeplace.solver.budget import NO_DEADLINE, Budget
from kubeplace.solver.emulate.node_state import Cluster
from kubeplace.solver.emulate.scores import choose
from kubeplace.solver.greedy import gang_complete
from kubeplace.solver.state import PlacementState

MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENTAGE = 5
STATEFUL_RULES = tuple(r.emulate for r in sorted(RULES, key=lambda r: r.filter_order or 0) if r.emulate is not None)
"""The rules whose answer depends on the pods already placed (NodePorts, PodTopologySpread,
InterPodAffinity), checked per pod in the kube-scheduler's filter order on the pods placed so
far (those nominated included where the rule counts them)."""
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


@dataclass(frozen=True)
class Emulation:
    placements: tuple[tuple[str, str, str], ...]
    """(namespace, name, node) in the order the pods were scheduled."""
    unplaced: tuple[str, ...]
    """Keys (namespace/name) of the pods no node took."""
    passes: int
    next_start: int = 0
    """Where the next pod's node search starts (``nextStartNodeIndex``), for a caller that goes
    on scheduling on the same nodes."""


def emulate(snapshot: Snapshot, pods: Sequence[Pod] | None = None, filters: Sequence[FilterPlugin] | None = None,
            percentage_of_nodes_to_score: int = 0, budget: Budget = NO_DEADLINE, start: int = 0) -> Emulation:
    """Schedule ``pods`` (default: every pending pod) one at a time as the kube-scheduler would.
    ``filters`` are the static filters (default: the kube-scheduler's NodeUnschedulable,
    TaintToleration and NodeAffinity); capacity, ports and the domain rules are always checked.
    When ``budget`` is spent, the pods not scheduled by then are left waiting (what it placed is the
    kube-scheduler's beginning of the queue). ``start`` is where the first node search starts
    (an earlier emulation's ``next_start``: the kube-scheduler keeps it from pod to pod)."""
    queue = list(snapshot.pending if pods is None else pods)
    rank = queue_rank(queue)
    queue = [queue[i] for i in np.argsort(rank, kind="stable")]
    cluster = Cluster(snapshot, tuple(queue))
    search = _Search(cluster, default_filters(snapshot) if filters is None else filters,
                     feasible_nodes_to_find(cluster.n, percentage_of_nodes_to_score), node_tree_order(snapshot.nodes),
                     start % cluster.n if cluster.n else 0)
    placements: list[tuple[str, str, str]] = []
    passes = 0
    while queue:
        passes += 1
        waiting = []
        for pod in queue:
            if budget.expired():
                waiting.append(pod)
                continue
            candidates = search.feasible(pod)
            if len(candidates) == 0:
                waiting.append(pod)
                continue
            i = choose(cluster, pod, candidates)
            cluster.commit(pod, i)
            placements.append((pod.namespace, pod.name, cluster.nodes[i].name))
        if len(waiting) == len(queue) or budget.expired():
            queue = waiting
            break
        queue = waiting
    return Emulation(tuple(placements), tuple(p.key for p in queue), passes, search.start)


def as_candidate(problem: Problem, steps: Sequence[tuple[int, int]]) -> Assignment:
    """The emulation's placements, (class, node) in the order it made them, replayed through the
    greedy's state: a pod is kept only where the model's rules and capacity (GPU devices by
    first fit) take it at that step, and while its class has pods not yet placed (steps made
    elsewhere may name more pods of a class than it has), so the result keeps every rule and
    count as the greedy's do. Gangs
    left incomplete (the emulation places members one by one: below min-member or
    minResources, or across domains of their topology key) are dropped, and the rest replayed
    again without them."""
    left_out: set[int] = set()
    gang_of = {c: g for g, gang in enumerate(problem.gangs) for c in gang.classes}
    while True:
        state = PlacementState.start(problem)
        for c, i in steps:
            if (gang_of.get(c, -1) not in left_out and state.per_class[c] < problem.count[c]
                    and state.fit(c, np.array([i], dtype=np.int64))[0] > 0):
                state.take(c, i, 1)
        short = {g for g, gang in enumerate(problem.gangs) if g not in left_out
                 and int(state.per_class[list(gang.classes)].sum()) > 0 and not gang_complete(problem, state, gang)}
        if not short:
            return state.assignment()
        left_out |= short


def default_filters(snapshot: Snapshot) -> tuple[FilterPlugin, ...]:
    ctx = RunContext(snapshot)
    return node_unschedulable.build(None, ctx), taint_toleration.build(None, ctx), node_affinity.build(None, ctx)


def feasible_nodes_to_find(n_nodes: int, percentage: int = 0) -> int:
    """``numFeasibleNodesToFind``: every node below 100; else an adaptive percentage
    (50 - nodes/125, at least 5) of them, at least 100."""
    if n_nodes < MIN_FEASIBLE_NODES:
        return n_nodes
    if percentage == 0:
        percentage = max(50 - n_nodes // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(n_nodes * percentage // 100, MIN_FEASIBLE_NODES)


def node_tree_order(nodes: Sequence[Node]) -> IntArray:
    """NodeTree.list: zones (region and zone labels) in order of first appearance, one node
    of each in turn until every zone is exhausted."""
    zones: dict[tuple[str, str], list[int]] = {}
    for i, node in enumerate(nodes):
        region = next((node.labels[k] for k in REGION_LABELS if k in node.labels), "")
        zone = next((node.labels[k] for k in ZONE_LABELS if k in node.labels), "")
        zones.setdefault((region, zone), []).append(i)
    order: list[int] = []
    for depth in range(max((len(members) for members in zones.values()), default=0)):
        order += [members[depth] for members in zones.values() if depth < len(members)]
    return np.array(order, dtype=np.int64)


class _Search:
    """findNodesThatFitPod: the filters on every node, then the first feasible nodes from the
    rotating start in NodeTree order."""

    def __init__(self, cluster: Cluster, filters: Sequence[FilterPlugin], to_find: int, tree: IntArray,
                 start: int) -> None:
        self.cluster, self.filters, self.to_find, self.tree = cluster, filters, to_find, tree
        self.start = start
        self.static_masks: dict[Hashable, BoolArray] = {}

    def feasible(self, pod: Pod) -> IntArray:
        mask = self._static(pod) & self._fits(pod)
        for admits in STATEFUL_RULES:  # in filter order, until no node is left
            if not mask.any():
                break
            mask &= admits(pod, self.cluster)
        n = self.cluster.n
        ordered = self.tree[(self.start + np.arange(n)) % n] if n else self.tree
        found = np.flatnonzero(mask[ordered])
        processed = int(found[self.to_find - 1]) + 1 if len(found) >= self.to_find else n
        self.start = (self.start + processed) % n if n else 0
        return ordered[found[: self.to_find]]

    def _static(self, pod: Pod) -> BoolArray:
        key = tuple(f.pod_key(pod) for f in self.filters)
        if key not in self.static_masks:
            mask = np.ones(self.cluster.n, dtype=np.bool_)
            for f in self.filters:
                mask &= f.filter(pod, self.cluster.nodes)
            self.static_masks[key] = mask
        return self.static_masks[key]

    def _fits(self, pod: Pod) -> BoolArray:
        """NodeResourcesFit with the pods nominated to each node of the pod's priority or more added."""
        c = self.cluster
        need = c.requests(pod)
        asked = need > 0
        used = c.used + c.held(pod.priority)
        fits: BoolArray = np.all(used[:, asked] + need[asked] <= c.allocatable[:, asked], axis=1)
        return fits
