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
* a feasible placement (``bench.offline``), from the same LP with columns cut to fit one real
  node (:func:`node_columns`).

CPU-only pods take no GPU, so both leave them out: they can only take room.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubeplace_bench import offline_pricing as pricing
from kubeplace_bench.gpusim import WHOLE, BoolArray, IntArray, NodeSpec, PodSpec

FloatArray = npt.NDArray[np.float64]
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
        if (p.num_gpu > 1 and p.gpu_milli != WHOLE) or p.gpu_milli > WHOLE:
            raise ValueError(f"pod {p.name}: {p.num_gpu} GPUs of {p.gpu_milli} milli (the bound knows shares of one "
                             "device and whole devices, as openb.read_pods accepts them)")
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


def best_node(s: Shapes, k: int, value: FloatArray, exact: str = "") -> tuple[float, IntArray]:
    """``offline_pricing.best_node`` for one node of kind ``k``; ``exact`` "cpu" or "memory" keeps
    that resource per node as well."""
    request = {"cpu": (s.cpu, s.kind_cpu), "memory": (s.mem, s.kind_mem)}.get(exact)
    return pricing.best_node(value, s.eligible[:, k], s.gpus, s.milli, s.count, int(s.kind_gpus[k]),
                             None if request is None else request[0], 0 if request is None else int(request[1][k]))


def fits_node(s: Shapes, k: int, counts: IntArray) -> bool:
    return bool(s.cpu @ counts <= s.kind_cpu[k] and s.mem @ counts <= s.kind_mem[k])


@dataclass(frozen=True)
class Column:
    """What one node of kind ``kind`` holds (pods per class), on ``nodes`` nodes in the LP's solution."""

    kind: int
    counts: IntArray
    nodes: float


@dataclass(frozen=True)
class UpperBound:
    milli: float
    """No placement of the pods allocates more GPU milli."""
    lp_milli: float
    """The master LP's value when the generation stopped (the bound's, once converged)."""
    converged: bool
    iterations: int
    seconds: float
    columns: tuple[Column, ...]
    """The LP's solution (columns on no node left out)."""


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
        self.solved = 0  # columns at the last solve

    def add(self, k: int, counts: IntArray) -> None:
        s, (cls,) = self.s, np.nonzero(counts)
        n = counts[cls].astype(np.float64)
        rows = np.array([k, *(self.n_kinds + cls), self.n_kinds + self.n_classes + k,
                         2 * self.n_kinds + self.n_classes + k], dtype=np.int32)
        vals = np.array([1.0, *n, float(s.cpu[cls] @ n) / CPU_UNIT, float(s.mem[cls] @ n) / MEM_UNIT])
        self.h.add_col(float(s.weight[cls] @ n), 0.0, self.inf, rows, vals)
        self.columns.append((k, counts))

    def solve(self) -> tuple[float, FloatArray, FloatArray, FloatArray, FloatArray]:
        """(LP value, node duals mu, count duals pi, cpu duals theta, memory duals phi), all >= 0
        (any duals >= 0 give a valid bound; before the first column: 0, and all duals 0)."""
        nk, nc = self.n_kinds, self.n_classes
        if not self.columns:
            return 0.0, np.zeros(nk), np.zeros(nc), np.zeros(nk), np.zeros(nk)
        optimal = self.h.solve(600.0)
        self.solved = len(self.columns)
        d = np.maximum(self.h.row_duals(), 0.0)
        return self.h.objective() if optimal else 0.0, d[:nk], d[nk:nk + nc], d[nk + nc:2 * nk + nc], d[2 * nk + nc:]

    def solution(self) -> tuple[Column, ...]:
        if self.solved != len(self.columns):
            self.solve()
        if not self.columns:
            return ()
        values = self.h.values()
        return tuple(Column(k, counts, float(lam)) for (k, counts), lam in zip(self.columns, values, strict=True)
                     if lam > 1e-9)


Pricing = Callable[[int, FloatArray, float], tuple[float, list[IntArray]]]
"""(kind, reduced value per class, the kind's node dual) -> (a bound on one node's best reduced
value, columns worth adding)."""


def _generate(s: Shapes, seconds: float, price: Pricing) -> UpperBound:
    """Column generation: every iteration the Lagrangian bound at the master's duals (the least
    kept), until no column is added, the bound meets the LP, or ``seconds`` have passed."""
    started = time.monotonic()
    master = _Master(s)
    best, lp, iterations, converged = float(min(s.capacity_milli, int(s.weight @ s.count))), 0.0, 0, False
    cpu, mem = s.cpu / CPU_UNIT, s.mem / MEM_UNIT
    while iterations < MAX_ITERATIONS and time.monotonic() - started < seconds:
        iterations += 1
        lp, mu, pi, theta, phi = master.solve()
        bound = float(pi @ s.count) + float((s.kind_nodes * (theta * s.kind_cpu / CPU_UNIT
                                                              + phi * s.kind_mem / MEM_UNIT)).sum())
        added = 0
        for k in range(len(s.kind_nodes)):
            z, found = price(k, s.weight - pi - theta[k] * cpu - phi[k] * mem, float(mu[k]))
            bound += float(s.kind_nodes[k]) * max(0.0, z)
            for counts in found:
                master.add(k, counts)
                added += 1
        best = min(best, bound)
        if added == 0 or best - lp <= GAP * s.capacity_milli:
            converged = True
            break
    return UpperBound(best, lp, converged, iterations, time.monotonic() - started, master.solution())


def _improving(value: FloatArray, dual: float, counts: IntArray) -> bool:
    return bool(counts.any() and float(value @ counts) > dual * (1 + 1e-9) + 1e-6)


def upper_bound(s: Shapes, seconds: float = 60.0) -> UpperBound:
    """The configuration LP's Lagrangian bound (see the module's text), by column generation; never
    above the cluster's GPU milli or what the pods ask for."""
    def pooled(k: int, value: FloatArray, dual: float) -> tuple[float, list[IntArray]]:
        z, counts = best_node(s, k, value)
        return z, [counts] if _improving(value, dual, counts) else []

    return _generate(s, seconds, pooled)


def node_columns(s: Shapes, seconds: float) -> UpperBound:
    """The same LP with columns that fit one real node (cpu and memory per node too), for the
    offline placement: the pricings that keep cpu, or memory, per node (``offline_pricing``), their
    nodes cut down to the other resource by dropping the pods of least value per request. The pricing is a
    heuristic here, so its LP is no bound; its Lagrangian values still are (each pricing bounds
    the best real node from above)."""
    def fitting(k: int, value: FloatArray, dual: float) -> tuple[float, list[IntArray]]:
        z, found = math.inf, []
        for exact in ("cpu", "memory"):
            bound, counts = best_node(s, k, value, exact)
            z = min(z, bound)
            counts = fitted(s, k, counts, value)
            if _improving(value, dual, counts):
                found.append(counts)
        return z, found

    return _generate(s, seconds, fitting)


def fitted(s: Shapes, k: int, counts: IntArray, value: FloatArray) -> IntArray:
    """``counts`` less pods, one at a time, until one node of kind ``k`` holds their cpu and
    memory: each time a pod of the class of least value per unit of the resources short."""
    counts = counts.copy()
    while True:
        over_cpu, over_mem = s.cpu @ counts > s.kind_cpu[k], s.mem @ counts > s.kind_mem[k]
        if not (over_cpu or over_mem):
            return counts
        (on,) = np.nonzero(counts)
        use = over_cpu * s.cpu[on] / s.kind_cpu[k] + over_mem * s.mem[on] / s.kind_mem[k]
        counts[on[int(np.argmin(value[on] / np.maximum(use, 1e-12)))]] -= 1


def quotas(s: Shapes, columns: Sequence[Column]) -> IntArray:
    """(C, K) pods per class and kind in an LP solution, rounded down."""
    x = np.zeros((len(s.count), len(s.kind_nodes)))
    for col in columns:
        x[:, col.kind] += col.nodes * col.counts
    return np.floor(x + 1e-6).astype(np.int64)


def spill_milli(s: Shapes, columns: Sequence[Column]) -> float:
    """GPU milli of an LP solution on columns no real node holds (cpu or memory over a node's)."""
    return sum(col.nodes * float(s.weight @ col.counts) for col in columns
               if not fits_node(s, col.kind, col.counts))
