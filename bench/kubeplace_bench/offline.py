"""The offline figures of ``bench fgd-protocol --bound``: every arrival known, the same cluster.

:func:`offline` gives the upper bound (``bench.offline_bound``) and an actual placement of the
GPU pods on the empty nodes, whose allocation lies below it:

1. when the bound's LP solution leans on columns no real node holds (cpu or memory pooled over a
   kind's nodes), the LP again with columns cut to fit one node (``offline_bound.node_columns``);
2. the best of: the LP's columns on whole nodes (each column on ``floor(nodes)`` nodes of its
   kind, shares onto devices best-fit) with the pods left by kubeplace's greedy
   (``solver.patterns.complete``); and kubeplace's column generation over exact node patterns
   (``solver.patterns``) from the better of best-fit and the greedy that follows the LP's pods
   per kind (that start led further than the columns' on default; the columns' own placement is
   the better one where cpu and memory run out first, gpushare100);
3. every pod replayed on the benchmarks' independent simulator (``gpusim.Cluster.place``), which
   refuses any pod that does not fit (:func:`checked`).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.models.problem import Assignment, DeviceUse, Problem
from kubeplace_bench.gpusim import WHOLE, Cluster, IntArray, NodeSpec, PodSpec
from kubeplace_bench.offline_bound import Column, Shapes, UpperBound, node_columns, quotas, shapes_of, spill_milli
from kubeplace_bench.offline_bound import upper_bound as lp_bound

Placement = tuple[int, int, tuple[int, ...]]
"""(class or pod index, node index, devices)."""
SPILL = 0.001
"""Share of the capacity an LP solution may hold on columns no node holds before the offline
placement looks for columns that fit (step 1)."""


@dataclass(frozen=True)
class Offline:
    """The offline figures of one pod list, in GPU milli and percent of the cluster's."""

    bound: UpperBound
    bound_milli: float
    """The least of the configuration LP's bound and the pattern generation's proved bound."""
    placed_milli: int
    """GPU milli of a feasible placement (checked pod by pod by ``gpusim``)."""
    capacity_milli: int
    placements: tuple[Placement, ...]
    """(pod index, node index, devices) of that placement."""
    seconds: float

    @property
    def bound_percent(self) -> float:
        """The bound as alloc_at_130 rounds a row (``fgd_protocol.alloc_at``): allocations are whole
        milli and rounding is monotone, so no row, hence no mean of rows, is above it."""
        return percent(math.floor(self.bound_milli + 1e-6), self.capacity_milli)

    @property
    def placed_percent(self) -> float:
        return percent(self.placed_milli, self.capacity_milli)


def percent(milli: int, capacity_milli: int) -> float:
    """GPU milli in percent of the cluster's, rounded as ``fgd_protocol.alloc_at`` rounds a row."""
    return round(milli / (capacity_milli // WHOLE) / 10, 2)


def offline(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], seconds: float = 30.0, seed: int = 0) -> Offline:
    """The bound and a feasible placement of ``pods`` (all known in advance) on empty ``nodes``;
    ``seconds`` for the bound's LP, for the LP of columns that fit (when needed), and for the
    pattern generation each."""
    started = time.monotonic()
    s = shapes_of(nodes, pods)
    bound = lp_bound(s, seconds)
    if not len(s.count):
        return Offline(bound, 0.0, 0, s.capacity_milli, (), time.monotonic() - started)
    columns = bound.columns
    if spill_milli(s, columns) > SPILL * s.capacity_milli:
        fitting = node_columns(s, seconds)
        columns = fitting.columns
        bound = UpperBound(min(bound.milli, fitting.milli), bound.lp_milli, bound.converged,
                           bound.iterations + fitting.iterations, bound.seconds + fitting.seconds, bound.columns)
    placements, proved = offline_placement(nodes, pods, s, columns, seconds, seed)
    placed = sum(pods[j].gpu_total for j, _, _ in placements)
    least = bound.milli if proved is None else min(bound.milli, proved)
    return Offline(bound, least, placed, s.capacity_milli, placements, time.monotonic() - started)


def offline_placement(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], s: Shapes, columns: Sequence[Column],
                      seconds: float, seed: int = 0) -> tuple[tuple[Placement, ...], float | None]:
    """Steps 2-3 of the module's text from an LP solution's ``columns``: the placements, and the
    pattern generation's proved bound (GPU milli) when it has one."""
    from kubeplace.solver.budget import Budget
    from kubeplace.solver.greedy import BEST_FIT, greedy, guided
    from kubeplace.solver.patterns import complete, pattern_placement

    problem = _problem(nodes, s)
    incumbent = max((greedy(problem, BEST_FIT), guided(problem, quotas(s, columns), s.node_kind)),
                    key=lambda a: _milli(s, a))
    result = pattern_placement(problem, incumbent, Budget.of(seconds), seed=seed)
    options = [incumbent, complete(problem, _assignment(realised(s, columns)))]
    a = max(options + ([] if result.assignment is None else [result.assignment]), key=lambda a: _milli(s, a))
    out = []
    next_member = [0] * len(s.count)
    d = a.devices
    for c, i, n in zip(a.cls.tolist(), a.node.tolist(), a.counts.tolist(), strict=True):
        on = (d.cls == c) & (d.node == i)
        slots = sorted(dev for dev, k in zip(d.device[on].tolist(), d.counts[on].tolist(), strict=True)
                       for _ in range(k))
        for p in range(n):  # pod p takes slots p, p + n, ...: distinct devices (no device holds more than n)
            out.append((s.members[c][next_member[c]], i, tuple(slots[p::n])))
            next_member[c] += 1
    return checked(nodes, pods, out), result.proved_bound


def realised(s: Shapes, columns: Sequence[Column]) -> list[Placement]:
    """(class, node, devices) of the columns that fit a node, each on ``floor(nodes)`` free nodes
    of its kind (the most used first): whole-GPU pods on free devices, then shares by decreasing
    milli, each on the device with the least room that holds it; a pod that finds no device is
    left to the completion."""
    free_nodes = [list(np.nonzero(s.node_kind == k)[0].tolist()) for k in range(len(s.kind_nodes))]
    left = s.count.copy()
    out: list[Placement] = []
    for col in sorted(columns, key=lambda c: -c.nodes):
        if not (s.cpu @ col.counts <= s.kind_cpu[col.kind] and s.mem @ col.counts <= s.kind_mem[col.kind]):
            continue
        for _ in range(math.floor(col.nodes + 1e-6)):
            if not free_nodes[col.kind] or (col.counts > left).any():
                break
            node = free_nodes[col.kind].pop(0)
            room = [WHOLE] * int(s.kind_gpus[col.kind])
            for c in sorted(np.nonzero(col.counts)[0].tolist(), key=lambda c: -int(s.milli[c])):
                for _ in range(int(col.counts[c])):
                    devices = _devices(room, int(s.gpus[c]), int(s.milli[c]))
                    if devices is not None:
                        out.append((c, node, devices))
                        left[c] -= 1
    return out


def _devices(room: list[int], count: int, milli: int) -> tuple[int, ...] | None:
    """Devices for one pod (taken from ``room``): whole ones, or the fullest device that holds a share."""
    if milli >= WHOLE:
        free = [d for d, r in enumerate(room) if r == WHOLE][:count]
        if len(free) < count:
            return None
    else:
        holds = [d for d, r in enumerate(room) if r >= milli]
        if not holds:
            return None
        free = [min(holds, key=lambda d: room[d])]
    for d in free:
        room[d] -= milli
    return tuple(free)


def _assignment(placed: Sequence[Placement]) -> Assignment:
    """(class, node, devices) of single pods as kubeplace's Assignment."""
    pairs = Counter((c, i) for c, i, _ in placed)
    used = Counter((c, i, d) for c, i, devices in placed for d in devices)

    def column(keys: Sequence[tuple[int, ...]], at: int) -> IntArray:
        return np.array([k[at] for k in keys], dtype=np.int64)

    p, u = list(pairs), list(used)
    devices = DeviceUse(column(u, 0), column(u, 1), column(u, 2), np.array([used[k] for k in u], dtype=np.int64))
    return Assignment(column(p, 0), column(p, 1), np.array([pairs[k] for k in p], dtype=np.int64), devices)


def checked(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec],
            placements: Sequence[Placement]) -> tuple[Placement, ...]:
    """The placements, each accepted in turn by ``gpusim.Cluster.place`` (cpu, memory, GPU model,
    each device's free milli, whole devices free); ValueError naming the first it refuses."""
    cluster = Cluster.build(nodes)
    seen: set[int] = set()
    for j, i, devices in placements:
        reason = "placed twice" if j in seen else cluster.place(pods[j], i, devices)
        if reason is not None:
            raise ValueError(f"offline placement of {pods[j].name} on {nodes[i].name} {list(devices)}: {reason}")
        seen.add(j)
    return tuple(placements)


def _milli(s: Shapes, a: Assignment) -> int:
    return int((s.weight[a.cls] * a.counts).sum())


def _problem(nodes: Sequence[NodeSpec], s: Shapes) -> Problem:
    """The GPU pods and the nodes as kubeplace's aggregated Problem (cpu and memory; devices)."""
    capacity = np.array([[n.cpu, n.mem] for n in nodes], dtype=np.int64).reshape(len(nodes), 2)
    device_free = np.full((len(nodes), max(1, int(s.kind_gpus.max(initial=0)))), -1, dtype=np.int64)
    for i, n in enumerate(nodes):
        device_free[i, : n.gpus] = WHOLE
    return Problem(("cpu", "memory"), tuple(n.name for n in nodes), capacity, np.zeros_like(capacity),
                   np.stack([s.cpu, s.mem], axis=1), s.count.copy(), s.weight, s.eligible[:, s.node_kind],
                   s.members, gpu_count=s.gpus.copy(), gpu_milli=s.milli.copy(), device_free=device_free)
