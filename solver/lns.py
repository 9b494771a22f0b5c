"""Large-neighbourhood search: free the pods of a few nodes, fix the rest, re-solve.

Neighbourhoods alternate between (a) nodes where unplaced pods could go, (b) the most
and least loaded nodes, (c) random nodes, sized so that each sub-model stays small
enough for the backend to prove or nearly prove it in a fraction of a second.
Deterministic for a given seed with one worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from models import evaluate
from models.formulation import Neighbourhood
from models.problem import Assignment, IntArray, Problem
from solver.backends.base import Backend

if TYPE_CHECKING:
    from solver.solve import _Run

TARGET_PAIRS = 2_500
SLICE_SECONDS = 2.0
MIN_SECONDS = 0.2


def improve(run: _Run, backend: Backend) -> None:
    from solver.solve import stage_one, stage_two

    rng = np.random.default_rng(run.options.seed)
    pairs_per_node = np.maximum(run.problem.eligible.sum(axis=0), 1)
    n_nodes_hood = max(2, int(TARGET_PAIRS / max(float(pairs_per_node.mean()), 1.0)))
    rounds = 0
    while run.left() > MIN_SECONDS:
        nodes = choose_nodes(run.problem, run.incumbent, rng, n_nodes_hood, rounds)
        hood = _hood(run.incumbent, nodes)
        share = min(1.0, SLICE_SECONDS / max(run.left(), 1e-3))
        unplaced = evaluate.placed_weight(run.problem, run.incumbent) < (run.bound or 0)
        if unplaced:
            stage_one(run, backend, hood, share / 2)
        if run.left() > MIN_SECONDS:
            stage_two(run, backend, _hood(run.incumbent, nodes), share)
        rounds += 1


def _hood(incumbent: Assignment, nodes: IntArray) -> Neighbourhood:
    return Neighbourhood(np.sort(nodes), incumbent.on_nodes(nodes, inside=False))


def choose_nodes(problem: Problem, incumbent: Assignment, rng: np.random.Generator, size: int,
                 round_no: int) -> IntArray:
    size = min(size, problem.n_nodes)
    kind = round_no % 3
    if kind == 0:
        left = problem.count - incumbent.placed_per_class(problem.n_classes)
        hungry = np.nonzero(problem.eligible[left > 0].any(axis=0))[0] if (left > 0).any() else np.zeros(0)
        if len(hungry):
            return rng.choice(hungry, size=min(size, len(hungry)), replace=False).astype(np.int64)
    if kind == 1:
        u = evaluate.utilisation(problem, incumbent).mean(axis=1)
        order = np.argsort(u, kind="stable")
        half = max(1, size // 2)
        picks = np.unique(np.concatenate([order[:half], order[-half:]]))
        return picks.astype(np.int64)
    return rng.choice(problem.n_nodes, size=size, replace=False).astype(np.int64)
