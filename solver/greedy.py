"""Fast greedy placements: always an answer, and the exact backend's first hint.

Classes are taken in order of weight (priority), then size (largest dominant share
first, as first-fit decreasing). Within a class, nodes are ranked once (placing pods of
one class changes only the node they go to), so a class costs one sort, not one scan
per pod:

- ``best-fit`` fills the node that will have the least free capacity left;
- ``spread`` gives each next pod to the node with the most free capacity left
  (LeastAllocated), with a heap.

Gangs are placed as a unit and rolled back when they stay below min-member.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from models.problem import Assignment, Gang, IntArray, Problem

FloatArray = npt.NDArray[np.float64]
BEST_FIT = "best-fit"
SPREAD = "spread"
POLICIES = (BEST_FIT, SPREAD)


@dataclass
class _State:
    free: IntArray  # (N, R)
    cap_left: list[IntArray]  # per group cap: (N,)
    placed: dict[tuple[int, int], int]

    def copy(self) -> _State:
        return _State(self.free.copy(), [c.copy() for c in self.cap_left], dict(self.placed))


def class_order(problem: Problem) -> list[int]:
    scale = np.maximum(problem.capacity.max(axis=0), 1)
    share = (problem.demand / scale).max(axis=1) if problem.n_classes else np.zeros(0)
    return sorted(range(problem.n_classes), key=lambda c: (-problem.weight[c], -share[c], c))


def greedy(problem: Problem, policy: str = BEST_FIT, order: list[int] | None = None) -> Assignment:
    if policy not in POLICIES:
        raise ValueError(f"unknown greedy policy {policy!r}")
    state = _State(problem.free.copy(), [c.cap.copy() for c in problem.group_caps], {})
    caps_of = _caps_of_class(problem)
    place = _best_fit if policy == BEST_FIT else _spread
    gang_of = {c: g for g in problem.gangs for c in g.classes}
    done_gangs: set[str] = set()
    for c in order if order is not None else class_order(problem):
        gang = gang_of.get(c)
        if gang is None:
            place(problem, state, caps_of, c, int(problem.count[c]))
        elif gang.name not in done_gangs:
            done_gangs.add(gang.name)
            state = _place_gang(problem, state, caps_of, gang, place)
    return _to_assignment(state)


Placer = Callable[[Problem, _State, dict[int, list[int]], int, int], int]


def _place_gang(problem: Problem, state: _State, caps_of: dict[int, list[int]], gang: Gang,
                place: Placer) -> _State:
    trial = state.copy()
    placed = sum(place(problem, trial, caps_of, c, int(problem.count[c])) for c in gang.classes)
    return trial if placed >= gang.min_member else state


def _caps_of_class(problem: Problem) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for k, cap in enumerate(problem.group_caps):
        for c in cap.classes:
            out.setdefault(c, []).append(k)
    return out


def _fit(problem: Problem, state: _State, caps: list[int], c: int, nodes: IntArray) -> IntArray:
    d = problem.demand[c]
    need = d > 0
    if need.any():
        m = (state.free[np.ix_(nodes, np.nonzero(need)[0])] // d[need]).min(axis=1)
    else:
        m = np.full(len(nodes), np.iinfo(np.int64).max // 4, dtype=np.int64)
    for k in caps:
        m = np.minimum(m, state.cap_left[k][nodes])
    return np.asarray(np.clip(m, 0, None), dtype=np.int64)


def _commit(problem: Problem, state: _State, caps: list[int], c: int, node: int, k: int) -> None:
    state.free[node] -= problem.demand[c] * k
    for g in caps:
        state.cap_left[g][node] -= k
    state.placed[(c, node)] = state.placed.get((c, node), 0) + k


def _leftover(problem: Problem, nodes: IntArray, free: IntArray, c: int) -> FloatArray:
    """Free capacity left after one more pod, as a sum of fractions of capacity."""
    cap = np.maximum(problem.capacity[nodes], 1)
    return np.asarray(((free - problem.demand[c]) / cap).sum(axis=1), dtype=np.float64)


def _best_fit(problem: Problem, state: _State, caps_of: dict[int, list[int]], c: int, want: int) -> int:
    nodes = np.nonzero(problem.eligible[c])[0]
    caps = caps_of.get(c, [])
    m = _fit(problem, state, caps, c, nodes)
    nodes, m = nodes[m > 0], m[m > 0]
    order = np.argsort(_leftover(problem, nodes, state.free[nodes], c) if len(nodes) else m, kind="stable")
    placed = 0
    for j in order:
        if placed >= want:
            break
        k = int(min(want - placed, m[j]))
        _commit(problem, state, caps, c, int(nodes[j]), k)
        placed += k
    return placed


def _spread(problem: Problem, state: _State, caps_of: dict[int, list[int]], c: int, want: int) -> int:
    nodes = np.nonzero(problem.eligible[c])[0]
    caps = caps_of.get(c, [])
    m = _fit(problem, state, caps, c, nodes)
    keep = m > 0
    nodes, m = nodes[keep], m[keep]
    if len(nodes) == 0 or want <= 0:
        return 0
    cap = np.maximum(problem.capacity[nodes], 1).astype(np.float64)
    used_frac = ((problem.capacity[nodes] - state.free[nodes]) / cap).sum(axis=1)
    step = (problem.demand[c] / cap).sum(axis=1)
    heap = [(float(used_frac[j] + step[j]), j) for j in range(len(nodes))]
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
        _commit(problem, state, caps, c, int(nodes[g]), int(given[g]))
    return placed


def _to_assignment(state: _State) -> Assignment:
    items = [(c, i, k) for (c, i), k in state.placed.items() if k > 0]
    if not items:
        return Assignment.empty()
    arr = np.array(items, dtype=np.int64)
    return Assignment(arr[:, 0], arr[:, 1], arr[:, 2])
