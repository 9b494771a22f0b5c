"""Large-neighbourhood search: free the pods of a few nodes, fix the rest, re-solve.

While pods are left unplaced, neighbourhoods are built around them: nodes where some
unplaced class may run, grown with nodes of the same kind (the ones whose pods could
trade places), alternating with random ones. Once everything that can be placed is,
neighbourhoods serve the objective: the most and least loaded nodes, or random ones.
Each sub-model is kept small: about PLACE_PAIRS eligible (class, node) pairs when placing,
OBJECTIVE_PAIRS when improving the objective (many small, quick rounds beat few large
ones there: measured on a synthetic 500-node cluster, 40-pair rounds of 0.1 s reduced the
balance term three times as much as 600-pair rounds of 1 s in the same 20 s). Deterministic for a given seed with
one worker.
"""

from __future__ import annotations

import numpy as np

from kubeplace.models import evaluate
from kubeplace.models.formulation.placement import Neighbourhood
from kubeplace.models.problem import Assignment, IntArray, Problem
from kubeplace.models.terms import has_linear_form
from kubeplace.solver.backends.base import Backend
from kubeplace.solver.run import Run, stage_one, stage_two
from kubeplace.solver.shares import LNS_LEFT_GUARD_SECONDS, LNS_MIN_SECONDS, LNS_OBJECTIVE_SECONDS, LNS_PLACE_SECONDS

PLACE_PAIRS = 1_500
OBJECTIVE_PAIRS = 50
GANG_PAIRS = 16_000


def improve(run: Run, backend: Backend) -> None:
    rng = np.random.default_rng(run.settings.seed)
    pairs = run.problem.eligible.sum(axis=0).astype(np.int64)
    rounds = 0
    while run.left() > LNS_MIN_SECONDS:
        unplaced = bool(_unplaced(run.problem, run.incumbent).any())
        if not unplaced and not has_linear_form(run.terms):
            break  # nothing left that the exact model can improve
        if run.settings.stop_when_placed and (not unplaced or run.placed_all()):
            break  # nothing more can be placed; the objective is not worth the wait
        if unplaced and (rounds % 4 != 3 or not has_linear_form(run.terms)):
            stage = _focus_stage(run.problem, run.incumbent, rounds)
            nodes = hungry_nodes(run.problem, run.incumbent, rng, pairs, rounds, stage)
            stage_one(run, backend, _hood(run.incumbent, nodes), _share(run, LNS_PLACE_SECONDS), stage)
        else:
            nodes = objective_nodes(run.problem, run.incumbent, rng, pairs, rounds)
            stage_two(run, backend, _hood(run.incumbent, nodes), _share(run, LNS_OBJECTIVE_SECONDS))
        rounds += 1
    run.steps.append(f"lns rounds: {rounds}")


def _share(run: Run, seconds: float) -> float:
    return min(1.0, seconds / max(run.left(), LNS_LEFT_GUARD_SECONDS))


def _hood(incumbent: Assignment, nodes: IntArray) -> Neighbourhood:
    return Neighbourhood(np.sort(nodes), incumbent.on_nodes(nodes, inside=False))


def _unplaced(problem: Problem, a: Assignment) -> IntArray:
    return problem.count - a.placed_per_class(problem.n_classes)


def _focus_stage(problem: Problem, a: Assignment, round_no: int) -> int:
    """The weight stage a placing round maximises (the stages above keep what ``a`` places):
    the highest one with pods left out on even rounds, the others in turn on odd ones (a stage
    left out for want of room must not hold back the ones below it)."""
    if problem.n_stages == 1:
        return 0
    left = _unplaced(problem, a) > 0
    stages = np.unique(problem.stage_of_class[left])
    return int(stages[0] if round_no % 2 == 0 else stages[(round_no // 2) % len(stages)])


def _fill(order: IntArray, pairs: IntArray, target: int = PLACE_PAIRS) -> IntArray:
    """The first nodes of ``order`` whose eligible pairs add up to ``target``."""
    if len(order) == 0:
        return order
    upto = int(np.searchsorted(np.cumsum(pairs[order]), target)) + 1
    return order[: max(2, upto)]


def hungry_nodes(problem: Problem, a: Assignment, rng: np.random.Generator, pairs: IntArray,
                 round_no: int, stage: int = 0) -> IntArray:
    """Nodes around a class of weight ``stage`` with pods left out (any class, without one)."""
    left = _unplaced(problem, a) > 0
    if (left & (problem.stage_of_class == stage)).any():
        left &= problem.stage_of_class == stage
    if round_no % 2 == 1:
        return _fill(rng.permutation(problem.n_nodes), pairs)
    c = int(rng.choice(np.nonzero(left)[0]))
    hungry = np.nonzero(problem.eligible[c])[0]
    if len(hungry) == 0:
        return _fill(rng.permutation(problem.n_nodes), pairs)
    if any(c in g.classes for g in problem.gangs):
        return _gang_nodes(problem, a, rng, pairs, hungry)
    seed = int(rng.choice(hungry))
    same_kind = np.nonzero((problem.capacity == problem.capacity[seed]).all(axis=1) & problem.eligible[c])[0]
    order = np.concatenate([[seed], rng.permutation(same_kind[same_kind != seed])]).astype(np.int64)
    return _fill(order, pairs)


def _gang_nodes(problem: Problem, a: Assignment, rng: np.random.Generator, pairs: IntArray,
                hungry: IntArray) -> IntArray:
    """A gang needs room on many nodes at once: the eligible nodes with the most free
    capacity first (jittered so rounds differ), a larger neighbourhood than usual."""
    free = (problem.capacity - problem.used - a.load(problem))[hungry] / np.maximum(problem.capacity[hungry], 1)
    score = free.sum(axis=1) + rng.random(len(hungry)) * 0.5
    order = hungry[np.argsort(-score, kind="stable")].astype(np.int64)
    return _fill(order, pairs, GANG_PAIRS)


def objective_nodes(problem: Problem, a: Assignment, rng: np.random.Generator, pairs: IntArray,
                    round_no: int) -> IntArray:
    if round_no % 2 == 0:
        u = evaluate.utilisation(problem, a).mean(axis=1) + rng.random(problem.n_nodes) * 0.05
        order = np.argsort(u, kind="stable")
        extremes = np.stack([order, order[::-1]], axis=1).reshape(-1)
        _, first = np.unique(extremes, return_index=True)
        return _fill(extremes[np.sort(first)].astype(np.int64), pairs, OBJECTIVE_PAIRS)
    return _fill(rng.permutation(problem.n_nodes).astype(np.int64), pairs, OBJECTIVE_PAIRS)
