"""The offline figures of ``bench fgd-protocol --bound``: every arrival known, the same cluster.

:func:`offline` gives the upper bound (``bench.offline_bound``) and an actual placement of the
GPU pods on the empty nodes, whose allocation lies below it:

1. the bound: the configuration LP, cpu and memory pooled over each kind's nodes;
2. kubeplace's column generation over exact node patterns (``solver.patterns``) from the better
   of best-fit and the greedy that follows the LP's pods per kind;
3. when that placement is still more than ``LOOSE`` below the bound and the LP leans on columns no
   real node holds: the LP again with columns cut to fit one node
   (``offline_bound.node_columns``, whose pricing keeps cpu or memory per node and may lower the
   bound), its columns placed on whole nodes (each on ``floor(nodes)`` nodes of its kind, shares
   onto devices best-fit), the pods left by kubeplace's greedy (``solver.patterns.complete``);
   the better of that and step 2 (on gpushare100, where cpu and memory run out first, it is this
   one; on default step 2's);
4. every pod replayed on the benchmarks' independent simulator (``gpusim.Cluster.place``), which
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
"""Share of the capacity the bound's LP solution may hold on columns no node holds before the
columns that fit are looked for (step 3)."""
LOOSE = 0.01
"""Share of the capacity between the bound and the placement of step 2 above which step 3 runs."""


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


def bound_percent(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], seconds: float = 30.0) -> tuple[float, bool]:
    """The bound alone (step 1), in percent as :attr:`Offline.bound_percent` rounds it, and whether
    its column generation converged (if not, the bound is still valid, only looser)."""
    s = shapes_of(nodes, pods)
    found = lp_bound(s, seconds)
    return percent(math.floor(found.milli + 1e-6), s.capacity_milli), found.converged


def offline(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], seconds: float = 30.0, seed: int = 0) -> Offline:
    """The bound and a feasible placement of ``pods`` (all known in advance) on empty ``nodes``;
    ``seconds`` for the bound's LP, for the pattern generation, and for the LP of columns that
    fit (when needed) each."""
    from kubeplace.solver.patterns import complete

    started = time.monotonic()
    s = shapes_of(nodes, pods)
    bound = lp_bound(s, seconds)
    if not len(s.count):
        return Offline(bound, 0.0, 0, s.capacity_milli, (), time.monotonic() - started)
    problem = _problem(nodes, s)
    best, proved = _patterns(problem, s, bound.columns, seconds, seed)
    least = bound.milli if proved is None else min(bound.milli, proved)
    loose = least - _milli(s, best) > LOOSE * s.capacity_milli
    if loose and spill_milli(s, bound.columns) > SPILL * s.capacity_milli:
        fitting = node_columns(s, seconds)
        least = min(least, fitting.milli)
        best = max(best, complete(problem, _assignment(realised(s, fitting.columns))), key=lambda a: _milli(s, a))
    placements = checked(nodes, pods, _placements(s, best))
    placed = sum(pods[j].gpu_total for j, _, _ in placements)
    return Offline(bound, least, placed, s.capacity_milli, placements, time.monotonic() - started)


def _patterns(problem: Problem, s: Shapes, columns: Sequence[Column], seconds: float,
              seed: int) -> tuple[Assignment, float | None]:
    """Step 2: kubeplace's pattern generation from the better of best-fit and the greedy that
    follows the LP's ``columns`` by kind (the better of that start and its result), and the
    generation's proved bound (GPU milli) when it has one."""
    from kubeplace.solver.budget import Budget
    from kubeplace.solver.greedy import BEST_FIT, greedy, guided
    from kubeplace.solver.patterns import pattern_placement

    incumbent = max((greedy(problem, BEST_FIT), guided(problem, quotas(s, columns), s.node_kind)),
                    key=lambda a: _milli(s, a))
    result = pattern_placement(problem, incumbent, Budget.of(seconds), seed=seed)
    found = result.assignment
    return incumbent if found is None or _milli(s, found) < _milli(s, incumbent) else found, result.proved_bound


def _placements(s: Shapes, a: Assignment) -> list[Placement]:
    """(pod, node, devices) of an assignment, its classes' pods taken in turn."""
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
    return out


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
