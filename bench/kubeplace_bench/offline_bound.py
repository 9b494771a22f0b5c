"""The offline bound of the FGD protocol: every arrival known in advance, the same cluster.

Two numbers bracket the best GPU allocation any placement of the arrived pods could reach (all
nodes start empty; a pod may be left out, as nothing forces an offline placement to take it):

* an upper bound, :func:`upper_bound`: the configuration LP over node *kinds* (identical cpu,
  memory, GPU count and GPU model), solved by column generation. A column is what one node of a
  kind holds, with its devices packed exactly: whole-GPU pods take whole devices of the node
  (a pod of g GPUs takes g of its D, so two 8-GPU nodes hold four 3-GPU pods, not five), and
  the other devices hold shares summing to at most 1000 milli each. Pod counts, and each kind's
  cpu and memory (summed over its nodes), are the master's rows. For any duals pi >= 0 (counts)
  and theta, phi >= 0 (each kind's cpu and memory) the Lagrangian bound

      sum_c pi_c count_c + sum_k (theta_k cpu_k + phi_k mem_k) n_k + sum_k n_k max(0, z_k)

  bounds every placement from above, z_k being the best reduced value of one node of kind k,
  which the pricing (:func:`best_node`, two bounded knapsack DPs: whole pods over the node's
  devices, shares over one device's milli) finds exactly. It is computed at every iteration
  and the least one is kept, so the bound is valid whenever the generation stops; when pricing
  finds no improving column it equals the LP's optimum.
  Relaxed (so the bound may exceed the optimum): the cpu and memory of the nodes of one kind
  are pooled, and columns may repeat a class on several devices beyond its count.
* a feasible placement, :func:`offline_placement`: kubeplace's own column generation over exact
  node patterns (``kubeplace.solver.patterns``, per node cpu, memory and devices), its MIP and
  greedy completion, replayed pod by pod on the benchmarks' independent simulator
  (``bench.gpusim.Cluster.place``), which refuses any pod that does not fit.

CPU-only pods take no GPU, so both leave them out: they can only take room.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubeplace.models.problem import Assignment, Problem
from kubeplace.solver.pricing_bound import copies, knapsack_table
from kubeplace_bench.gpusim import WHOLE, BoolArray, Cluster, IntArray, NodeSpec, PodSpec

FloatArray = npt.NDArray[np.float64]
Placements = tuple[tuple[int, int, tuple[int, ...]], ...]
"""(pod index, node index, devices) of each placed pod."""
CPU_UNIT = 1000  # the master's cpu rows in cores, its memory rows in GiB: coefficients of like size
MEM_UNIT = 1024
GAP = 1e-6
"""Relative gap (of the capacity) between the bound and the LP at which the generation stops."""
MAX_ITERATIONS = 2000


@dataclass(frozen=True)
class Shapes:
    """The GPU pods by class (cpu, memory, GPUs, milli, GPU models) and the nodes by kind."""

    kind_nodes: IntArray  # (K,) nodes of the kind
    kind_cpu: IntArray  # (K,) of one node
    kind_mem: IntArray
    kind_gpus: IntArray
    node_kind: IntArray  # (N,)
    cpu: IntArray  # (C,) of one pod
    mem: IntArray
    gpus: IntArray
    milli: IntArray  # per device
    count: IntArray  # (C,)
    members: tuple[tuple[int, ...], ...]  # per class, indices into the pod list
    eligible: BoolArray  # (C, K) one pod of the class fits an empty node of the kind

    @property
    def weight(self) -> IntArray:
        """GPU milli of one pod of each class."""
        return np.asarray(self.gpus * self.milli, dtype=np.int64)

    @property
    def capacity_milli(self) -> int:
        return int(WHOLE * (self.kind_nodes * self.kind_gpus).sum())


def shapes_of(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec]) -> Shapes:
    kinds: dict[tuple[int, int, int, str], int] = {}
    node_kind = np.array([kinds.setdefault((n.cpu, n.mem, n.gpus, n.model if n.gpus else ""), len(kinds))
                          for n in nodes], dtype=np.int64)
    classes: dict[tuple[int, int, int, int, tuple[str, ...]], list[int]] = {}
    for j, p in enumerate(pods):
        if p.gpu_total > 0:
            classes.setdefault((p.cpu, p.mem, p.num_gpu, p.gpu_milli, p.models), []).append(j)
    kind, cls = list(kinds), list(classes)
    k_num = np.array([k[:3] for k in kind], dtype=np.int64).reshape(len(kind), 3)
    c_num = np.array([c[:4] for c in cls], dtype=np.int64).reshape(len(cls), 4)
    eligible = np.array([[c[0] <= k[0] and c[1] <= k[1] and c[2] <= k[2] and (not c[4] or k[3] in c[4])
                          for k in kind] for c in cls], dtype=np.bool_).reshape(len(cls), len(kind))
    return Shapes(np.bincount(node_kind, minlength=len(kind)).astype(np.int64), k_num[:, 0], k_num[:, 1],
                  k_num[:, 2], node_kind, c_num[:, 0], c_num[:, 1], c_num[:, 2], c_num[:, 3],
                  np.array([len(classes[c]) for c in cls], dtype=np.int64),
                  tuple(tuple(classes[c]) for c in cls), eligible)


def best_node(s: Shapes, k: int, value: FloatArray) -> tuple[float, IntArray]:
    """The most ``value`` (per class, per pod) one empty node of kind ``k`` can hold with its
    devices packed exactly, and the pods per class that reach it: ``j`` devices taken whole by
    the best whole-GPU pods that fit in j, the other ``D - j`` each holding the best shares
    (a class at most ``count`` times on one device)."""
    n_dev = int(s.kind_gpus[k])
    out = np.zeros(len(value), dtype=np.int64)
    usable = s.eligible[:, k] & (value > 0)
    share = np.nonzero(usable & (s.gpus == 1) & (s.milli < WHOLE))[0]
    whole = np.nonzero(usable & (s.milli >= WHOLE) & (s.gpus <= n_dev))[0]
    per_device, fill = 0.0, np.zeros(len(share), dtype=np.int64)
    if len(share):
        unit = int(np.gcd.reduce(np.concatenate([s.milli[share], [WHOLE]])))
        size, cap = s.milli[share] // unit, WHOLE // unit
        table, choice = knapsack_table(cap, size, value[share], np.minimum(s.count[share], cap // size))
        per_device, fill = float(table[cap]), copies(choice, size, cap)
    table, choice = knapsack_table(n_dev, s.gpus[whole], value[whole], s.count[whole])
    j = int(np.argmax(table + (n_dev - np.arange(n_dev + 1)) * per_device))
    out[whole] = copies(choice, s.gpus[whole], j)
    out[share] += fill * (n_dev - j)
    return float(table[j]) + (n_dev - j) * per_device, out


@dataclass(frozen=True)
class UpperBound:
    milli: float
    """No placement of the pods allocates more GPU milli."""
    lp_milli: float
    """The master LP's value when the generation stopped (the bound's, once converged)."""
    converged: bool
    iterations: int
    seconds: float
    quotas: IntArray
    """(C, K) pods of each class on each kind in the last LP solution, rounded down."""


class _Master:
    """The configuration LP: rows per kind (nodes), per class (pods), per kind (cpu, memory)."""

    def __init__(self, s: Shapes) -> None:
        from kubeplace.solver.backends.highs_lp import INF, HighsLp

        self.s, self.n_kinds, self.n_classes = s, len(s.kind_nodes), len(s.count)
        self.h = HighsLp(maximize=True)
        upper = np.concatenate([s.kind_nodes, s.count, s.kind_nodes * s.kind_cpu / CPU_UNIT,
                                s.kind_nodes * s.kind_mem / MEM_UNIT]).astype(np.float64)
        self.h.add_empty_rows(np.full(len(upper), -INF), upper)
        self.inf = INF
        self.columns: list[tuple[int, IntArray]] = []

    def add(self, k: int, counts: IntArray) -> None:
        s, (cls,) = self.s, np.nonzero(counts)
        n = counts[cls].astype(np.float64)
        rows = np.array([k, *(self.n_kinds + cls), self.n_kinds + self.n_classes + k,
                         2 * self.n_kinds + self.n_classes + k], dtype=np.int32)
        vals = np.array([1.0, *n, float(s.cpu[cls] @ n) / CPU_UNIT, float(s.mem[cls] @ n) / MEM_UNIT])
        self.h.add_col(float(s.weight[cls] @ n), 0.0, self.inf, rows, vals)
        self.columns.append((k, counts))

    def quotas(self) -> IntArray:
        """(C, K) pods per class and kind in the last solution, rounded down."""
        x = np.zeros((self.n_classes, self.n_kinds))
        if self.columns:
            for (k, counts), lam in zip(self.columns, self.h.values(), strict=True):
                x[:, k] += lam * counts
        return np.floor(x + 1e-6).astype(np.int64)

    def solve(self) -> tuple[float, FloatArray, FloatArray, FloatArray, FloatArray]:
        """(LP value, node duals mu, count duals pi, cpu duals theta, memory duals phi), all >= 0
        (any duals >= 0 give a valid bound; before the first column: 0, and all duals 0)."""
        nk, nc = self.n_kinds, self.n_classes
        if not self.columns:
            return 0.0, np.zeros(nk), np.zeros(nc), np.zeros(nk), np.zeros(nk)
        optimal = self.h.solve(600.0)
        d = np.maximum(self.h.row_duals(), 0.0)
        return self.h.objective() if optimal else 0.0, d[:nk], d[nk:nk + nc], d[nk + nc:2 * nk + nc], d[2 * nk + nc:]


def upper_bound(s: Shapes, seconds: float = 60.0) -> UpperBound:
    """The configuration LP's Lagrangian bound (see the module's text), by column generation until
    no node prices out, the bound meets the LP, or ``seconds`` have passed; never above the
    cluster's GPU milli or what the pods ask for."""
    started = time.monotonic()
    trivial = float(min(s.capacity_milli, int(s.weight @ s.count)))
    if len(s.count) == 0:
        return UpperBound(0.0, 0.0, True, 0, 0.0, np.zeros((0, len(s.kind_nodes)), dtype=np.int64))
    master = _Master(s)
    best, lp, iterations, converged = trivial, 0.0, 0, False
    cpu, mem = s.cpu / CPU_UNIT, s.mem / MEM_UNIT
    while iterations < MAX_ITERATIONS and time.monotonic() - started < seconds:
        iterations += 1
        lp, mu, pi, theta, phi = master.solve()
        bound = float(pi @ s.count) + float((s.kind_nodes * (theta * s.kind_cpu / CPU_UNIT
                                                              + phi * s.kind_mem / MEM_UNIT)).sum())
        added = 0
        for k in range(len(s.kind_nodes)):
            z, counts = best_node(s, k, s.weight - pi - theta[k] * cpu - phi[k] * mem)
            bound += float(s.kind_nodes[k]) * max(0.0, z)
            if z > mu[k] * (1 + 1e-9) + 1e-6 and counts.any():
                master.add(k, counts)
                added += 1
        best = min(best, bound)
        if added == 0 or best - lp <= GAP * s.capacity_milli:
            converged = True
            break
    return UpperBound(best, lp, converged, iterations, time.monotonic() - started, master.quotas())


@dataclass(frozen=True)
class Offline:
    """The offline figures of one pod list, in GPU milli and percent of the cluster's."""

    bound: UpperBound
    bound_milli: float
    """The least of the configuration LP's bound and the pattern generation's proved bound."""
    placed_milli: int
    """GPU milli of a feasible placement (checked pod by pod by ``gpusim``)."""
    capacity_milli: int
    placements: Placements
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


def offline_placement(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], s: Shapes, quotas: IntArray,
                      seconds: float, seed: int = 0) -> tuple[Placements, float | None]:
    """kubeplace's pattern placement (``solver.patterns``) of the GPU pods within ``seconds``,
    started from the better of best-fit and the greedy guided by ``quotas`` (pods per class and
    kind, from the bound's LP), as (pod, node, devices), every pod accepted by the independent
    simulator (a refusal raises); and the generation's proved bound (GPU milli), if it has one."""
    from kubeplace.solver.budget import Budget
    from kubeplace.solver.greedy import BEST_FIT, greedy, guided
    from kubeplace.solver.patterns import pattern_placement

    problem = _problem(nodes, s)
    incumbent = max((greedy(problem, BEST_FIT), guided(problem, quotas, s.node_kind)), key=lambda a: _milli(s, a))
    result = pattern_placement(problem, incumbent, Budget.of(seconds), seed=seed)
    found = result.assignment
    a = incumbent if found is None or _milli(s, found) < _milli(s, incumbent) else found
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


def checked(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec],
            placements: Sequence[tuple[int, int, tuple[int, ...]]]) -> Placements:
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


def offline(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], seconds: float = 30.0, seed: int = 0) -> Offline:
    """The bound and a feasible placement of ``pods`` (all known in advance) on empty ``nodes``."""
    started = time.monotonic()
    s = shapes_of(nodes, pods)
    bound = upper_bound(s, seconds)
    placements, proved = offline_placement(nodes, pods, s, bound.quotas, seconds, seed) if len(s.count) else ((), None)
    placed = sum(pods[j].gpu_total for j, _, _ in placements)
    least = bound.milli if proved is None else min(bound.milli, proved)
    return Offline(bound, least, placed, s.capacity_milli, placements, time.monotonic() - started)
