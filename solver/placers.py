"""The greedy policies' implementations: how one class's pods pick their nodes (a :data:`Placer`).

Each policy is one line of ``solver.policies.POLICIES`` (its name, the factory of its placer and
whether ``simulate`` compares it); ``solver.greedy`` runs them class by class or in queue order.
A new policy's placer may live in a module of its own, built on :func:`candidates` and
:func:`leftover` (docs/development.md, Adding a simulate policy).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from kubeplace.models.fragmentation import TaskShapes, popular
from kubeplace.models.problem import BoolArray, IntArray, Problem
from kubeplace.solver.fragmentation_deltas import FragmentationTables, best_device_delta, fragmentation_after
from kubeplace.solver.state import PlacementState

FloatArray = npt.NDArray[np.float64]
Placer = Callable[[PlacementState, int, int], int]
"""(state, class, pods wanted) -> pods placed (taken into ``state``)."""
Within = Callable[[PlacementState, int, int, BoolArray | None], int]
"""A placer on a subset of nodes (None: every node)."""
EXACT_FGD_PODS = 400
"""Up to this many pending pods, FGD evaluates full node fragmentation per candidate."""
TIE_BREAK = 1e-3
"""Weight of best-fit's leftover capacity among nodes of equal fragmentation delta."""


def preferred_first(state: PlacementState, c: int, want: int, preferred: BoolArray,
                     place: Callable[[PlacementState, int, int, BoolArray | None], int],
                     rest: Callable[[int], int] | None = None) -> int:
    """``place`` on the ``preferred`` nodes, then what is left by ``rest`` (default:
    ``place`` anywhere)."""
    got = place(state, c, want, preferred)
    if got >= want:
        return got
    return got + (rest(want - got) if rest is not None else place(state, c, want - got, None))


def candidates(state: PlacementState, c: int, within: BoolArray | None = None) -> tuple[IntArray, IntArray]:
    allowed = state.problem.eligible[c] if within is None else state.problem.eligible[c] & within
    if state.within is not None:
        allowed = allowed & state.within
    nodes = np.nonzero(allowed)[0]
    m = state.fit(c, nodes)
    return nodes[m > 0], m[m > 0]


def leftover(problem: Problem, nodes: IntArray, free: IntArray, c: int) -> FloatArray:
    """Free capacity left after one more pod, as a sum of fractions of capacity."""
    cap = np.maximum(problem.capacity[nodes], 1)
    return np.asarray(((free - problem.demand[c]) / cap).sum(axis=1), dtype=np.float64)


def best_fit(state: PlacementState, c: int, want: int, within: BoolArray | None = None) -> int:
    nodes, m = candidates(state, c, within)
    if len(nodes) == 0 or want <= 0:
        return 0
    order = np.argsort(leftover(state.problem, nodes, state.free[nodes], c), kind="stable")
    placed = 0
    for j in order:
        if placed >= want:
            break
        k = int(min(want - placed, m[j]))
        state.take(c, int(nodes[j]), k)
        placed += k
    return placed


def spread(state: PlacementState, c: int, want: int, within: BoolArray | None = None) -> int:
    nodes, m = candidates(state, c, within)
    if len(nodes) == 0 or want <= 0:
        return 0
    p = state.problem
    cap = np.maximum(p.capacity[nodes], 1).astype(np.float64)
    load = p.base(measured=True)[nodes] + (p.free[nodes] - state.free[nodes])  # measured load where known
    used_frac = (load / cap).sum(axis=1)
    step = (p.demand[c] / cap).sum(axis=1)
    first = used_frac + step
    # only the ``want`` nodes that come first can receive a pod before ``want`` are placed
    ahead = np.lexsort((np.arange(len(nodes)), first))[:want]
    heap = [(float(first[j]), int(j)) for j in ahead]
    heapq.heapify(heap)
    given = np.zeros(len(nodes), dtype=np.int64)
    placed = 0
    while heap and placed < want:
        score, j = heapq.heappop(heap)
        given[j] += 1
        placed += 1
        if given[j] < m[j]:
            heapq.heappush(heap, (score + float(step[j]), j))
    for g in np.nonzero(given)[0]:
        state.take(c, int(nodes[g]), int(given[g]))
    return placed


def fgd_onto(state: PlacementState, tables: FragmentationTables, c: int, want: int,
         exact: TaskShapes | None = None) -> int:
    """One pod at a time onto the node (and device) whose fragmentation grows least, ties
    to the fuller node; only the node that received the pod is re-evaluated. With
    ``exact`` shapes (small batches) the full node fragmentation is evaluated, CPU and
    memory included; otherwise the tabulated GPU part."""
    nodes, _ = candidates(state, c)
    if len(nodes) == 0 or want <= 0:
        return 0
    need = state.need(c)

    def deltas(at: IntArray) -> tuple[FloatArray, IntArray]:
        if exact is not None:
            return fragmentation_after(state, exact, c, at)
        return best_device_delta(tables, state.device_free[at], need.milli, need.count)

    left_all = leftover(state.problem, nodes, state.free[nodes], c)
    delta, device = deltas(nodes)
    score = delta + TIE_BREAK * left_all
    placed = 0
    while placed < want:
        j = int(np.argmin(score))
        if not np.isfinite(score[j]):
            break
        node = int(nodes[j])
        state.take(c, node, 1, (int(device[j]),) if device[j] >= 0 and need.count == 1 else None)
        placed += 1
        if state.fit(c, np.array([node]))[0] > 0:
            d, dev = deltas(np.array([node]))
            left = leftover(state.problem, np.array([node]), state.free[[node]], c)
            score[j], device[j] = d[0] + TIE_BREAK * left[0], dev[0]
        else:
            score[j] = np.inf
    return placed


def best_fit_placer(_problem: Problem, _exact: bool | None) -> Placer:
    return best_fit


def spread_placer(_problem: Problem, _exact: bool | None) -> Placer:
    return spread


def fgd_placer(problem: Problem, exact_fgd: bool | None) -> Placer:
    """FGD for GPU pods; ``exact_fgd``: full node fragmentation per candidate (None: up to
    EXACT_FGD_PODS pending pods)."""
    tables = FragmentationTables.of(problem)
    if exact_fgd is None:
        exact_fgd = int(problem.count.sum()) <= EXACT_FGD_PODS
    exact = popular(TaskShapes.of(problem, by_devices=True)) if exact_fgd else None

    def fgd(state: PlacementState, c: int, want: int) -> int:
        if state.need(c).count > 0:
            return fgd_onto(state, tables, c, want, exact)
        # CPU and memory taken from a node with free GPUs can strand them (FGD counts
        # that as fragmentation): nodes with no free GPU first, best-fit
        no_free_gpu = state.device_free.max(axis=1, initial=0) <= 0
        if exact is None:
            return preferred_first(state, c, want, no_free_gpu, best_fit)
        return preferred_first(state, c, want, no_free_gpu, best_fit,
                               lambda k: fgd_onto(state, tables, c, k, exact))
    return fgd
