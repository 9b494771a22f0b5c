"""Ruin and recreate for the gangs a placement leaves out (Schrimpf et al., J. Comp. Phys. 2000).

A gang left out usually fits only once other pods move: its members need room on several
nodes at once, of a kind that others hold (GPU nodes whose CPU went to CPU-only pods, ...).
The greedy cannot undo its early choices, and a CP-SAT neighbourhood of a few dozen nodes
rarely holds both the room a gang needs and the room its displaced pods need in turn.

Each round picks a unit left out (a gang, or a class of plain pods) and frees a few of
the nodes its most constrained class may run on: every plain pod on them, and every gang
with a member there as a whole, so no gang ever stays below min-member. The unit is
re-placed first, then everything freed and everything still left out, in the greedy's
order, by best-fit or spread, steered or not (drawn at random). The result becomes the
current placement when it places no less weight (sideways moves let the search walk
across plateaus), and the best one is kept. A walk that stalls starts again from its
origin (how many rounds a walk needs varies widely with its random draws; restarts cut
the long ones), and if the walk from the incumbent has not placed everything after
ALONE_ROUNDS, walks from other greedy starts join it. A round is one greedy pass over the
freed pods and those left out, 15-60 ms on the gang benchmark (300 nodes, ~200 gangs of
2-64 pods, ~3,400 pods), where each of seeds 1-32 was placed whole within 12 rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kubeplace.models import evaluate
from kubeplace.models.problem import Assignment, BoolArray, IntArray, Problem
from kubeplace.solver.greedy import BEST_FIT, SPREAD, class_order, greedy
from kubeplace.solver.state import PlacementState

RUIN_SHARE = 0.1
"""A round frees between one node and this share of the nodes the unit's most constrained
class may run on (plus the gangs that have members there). Large ruins pay: on the hardest
gang benchmark seed found (15, 300 nodes), at most 5 nodes took 120 to over 600 rounds to
place every gang (some runs failed in 10 s), at most 10% of them 1-43; a quarter or more
did no better, at a higher cost per round, and worse on 100 nodes."""
STALL_ROUNDS = 50
"""Rounds in a row without a better placement after which a walk starts again from its origin."""
ALONE_ROUNDS = 20
"""Rounds the walk from the incumbent has to itself before the other starts join."""
STARTS = ((BEST_FIT, True), (SPREAD, True), (BEST_FIT, False), (SPREAD, False))
"""The greedy placements (policy, steered) that walks start from besides the incumbent."""


@dataclass(frozen=True)
class Repaired:
    assignment: Assignment
    rounds: int


@dataclass(frozen=True)
class _Units:
    """What a round frees and re-places together: a gang's classes, or one plain class."""

    gang_classes: tuple[tuple[int, ...], ...]  # per class: its gang's classes, or () if plain
    in_gang: BoolArray  # (K,)
    rank: IntArray  # (K,) position in the greedy's order

    @staticmethod
    def of(problem: Problem) -> _Units:
        gang_classes: list[tuple[int, ...]] = [() for _ in range(problem.n_classes)]
        for gang in problem.gangs:
            for c in gang.classes:
                gang_classes[c] = gang.classes
        rank = np.zeros(problem.n_classes, dtype=np.int64)
        rank[class_order(problem)] = np.arange(problem.n_classes)
        in_gang = np.array([bool(g) for g in gang_classes], dtype=np.bool_)
        return _Units(tuple(gang_classes), in_gang, rank)

    def unit(self, c: int) -> tuple[int, ...]:
        return self.gang_classes[c] or (c,)


@dataclass
class _Walk:
    """One search: where it started, where it is, the best it found."""

    origin: Assignment
    current: Assignment
    current_w: int
    best: Assignment
    best_w: int
    stale: int = 0

    @staticmethod
    def of(problem: Problem, origin: Assignment) -> _Walk:
        w = evaluate.placed_weight(problem, origin)
        return _Walk(origin, origin, w, origin, w)

    def step(self, problem: Problem, units: _Units, rng: np.random.Generator) -> None:
        """One round; after STALL_ROUNDS without a better placement, back to the origin
        (a run's length varies widely with its random draws: restarts cut the long ones)."""
        left = problem.count - self.current.placed_per_class(problem.n_classes)
        if not (left > 0).any():
            return
        candidate = _round(problem, units, self.current, left, rng)
        weight = evaluate.placed_weight(problem, candidate)
        self.stale += 1
        if weight >= self.current_w:
            self.current, self.current_w = candidate, weight
        if weight > self.best_w:
            self.best, self.best_w, self.stale = candidate, weight, 0
        elif self.stale >= STALL_ROUNDS:
            self.current, self.current_w, self.stale = self.origin, evaluate.placed_weight(problem, self.origin), 0


def repair(problem: Problem, start: Assignment, target: int, rng: np.random.Generator, max_rounds: int,
           out_of_time: Callable[[], bool]) -> Repaired:
    """The best placement found; stops once it places ``target`` weight (an upper bound),
    after ``max_rounds`` rounds or when ``out_of_time``. A walk starts from ``start``;
    after ALONE_ROUNDS, walks from the greedy placements of STARTS join it, one round each
    in turn. With small ruins, which start led to a placement of every gang differed from
    workload to workload (from spread on some, from best-fit, which leaves whole nodes
    free, on others); with RUIN_SHARE the incumbent's walk sufficed on every workload
    measured, so the others are a fallback."""
    units = _Units.of(problem)
    walks = [_Walk.of(problem, start)]
    best = walks[0]
    rounds = 0
    while best.best_w < target and rounds < max_rounds and not out_of_time():
        if rounds == ALONE_ROUNDS:
            walks += _other_walks(problem, start)
            best = max(walks, key=lambda w: w.best_w)
            if best.best_w >= target:
                break
        walk = walks[rounds % len(walks)]
        walk.step(problem, units, rng)
        rounds += 1
        if walk.best_w > best.best_w:
            best = walk
    return Repaired(best.best, rounds)


def _other_walks(problem: Problem, start: Assignment) -> list[_Walk]:
    """Walks from the greedy placements of STARTS that differ from ``start`` and each other."""
    seen = {_key(start)}
    walks = []
    for policy, steer in STARTS:
        a = greedy(problem, policy, steer=steer)
        if _key(a) not in seen:
            seen.add(_key(a))
            walks.append(_Walk.of(problem, a))
    return walks


def _key(a: Assignment) -> bytes:
    order = np.lexsort((a.node, a.cls))
    return np.stack([a.cls[order], a.node[order], a.counts[order]]).tobytes()


def _round(problem: Problem, units: _Units, a: Assignment, left: IntArray, rng: np.random.Generator) -> Assignment:
    target = units.unit(int(rng.choice(np.nonzero(left > 0)[0])))
    nodes = _ruin_nodes(problem, a, target, rng)
    touched = {c for c in a.cls[np.isin(a.node, nodes)].tolist() if units.in_gang[c]}
    freed_gangs = np.array(sorted({m for c in touched for m in units.unit(c)} | set(target)), dtype=np.int64)
    kept = _without(a, freed_gangs, nodes, units.in_gang)
    state = PlacementState.start(problem, kept)
    rest = np.nonzero(problem.count - state.per_class > 0)[0]
    rest = rest[~np.isin(rest, target)]
    order = [*target, *rest[np.argsort(units.rank[rest], kind="stable")].tolist()]
    return greedy(problem, BEST_FIT if rng.random() < 0.5 else SPREAD, order, state, steer=rng.random() < 0.5)


def _ruin_nodes(problem: Problem, a: Assignment, target: tuple[int, ...], rng: np.random.Generator) -> IntArray:
    """Up to RUIN_SHARE of the nodes where the unit's most constrained class (fewest eligible
    nodes, then largest) may run, those with the most room for it first, jittered so
    rounds differ."""
    c = min(target, key=lambda k: (int(problem.eligible[k].sum()), -int(problem.demand[k].sum()), k))
    candidates = np.nonzero(problem.eligible[c])[0]
    if len(candidates) == 0:
        return candidates.astype(np.int64)
    free = (problem.free - a.load(problem))[candidates] / np.maximum(problem.capacity[candidates], 1)
    score = free[:, problem.demand[c] > 0].sum(axis=1) + rng.random(len(candidates))
    k = int(rng.integers(1, max(2, round(RUIN_SHARE * len(candidates))) + 1))
    return np.asarray(candidates[np.argsort(-score, kind="stable")[:k]], dtype=np.int64)


def _without(a: Assignment, gang_classes: IntArray, nodes: IntArray, in_gang: BoolArray) -> Assignment:
    """``a`` less every pod of ``gang_classes`` and every plain pod on ``nodes``."""

    def dropped(cls: IntArray, node: IntArray) -> BoolArray:
        return np.isin(cls, gang_classes) | (np.isin(node, nodes) & ~in_gang[cls])

    keep = ~dropped(a.cls, a.node)
    d = a.devices
    return Assignment(a.cls[keep], a.node[keep], a.counts[keep], d.select(~dropped(d.cls, d.node)))
