"""An upper bound on the priority-weighted number of pods any placement can achieve.

The LP relaxation of the aggregated model with nodes merged into node kinds (identical
eligibility column and identical free capacity): capacities of a kind add up, counts
become continuous. Everything dropped only loosens the model, so its optimum bounds
every integer placement from above, and it stays small on any cluster size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from kubeplace.models.config import SolverSettings
from kubeplace.models.formulation.capacity_rows import ExistingNodes, Pairs, capacity_rows
from kubeplace.models.linear import INF, LinearBuilder, LinearModel
from kubeplace.models.problem import IntArray, Problem, summed_rows
from kubeplace.solver.backends import available_backends, get_backend
from kubeplace.solver.budget import Budget
from kubeplace.solver.shares import LP_BOUND_DEFAULT_SECONDS


def node_kinds(problem: Problem) -> tuple[IntArray, int]:
    """Kind index per node: nodes with equal free capacity and eligibility columns."""
    keys = np.concatenate([problem.free, problem.eligible.T.astype(np.int64)], axis=1)
    _, kind = np.unique(keys, axis=0, return_inverse=True)
    kind = kind.reshape(-1).astype(np.int64)
    return kind, int(kind.max()) + 1 if len(kind) else 0


@dataclass(frozen=True)
class KindModel:
    """The aggregated model over node kinds: x[k] pods of class cls[k] on kind kd[k]."""

    model: LinearModel
    cls: IntArray
    kind: IntArray
    node_kind: IntArray  # (N,)


def kind_model(problem: Problem, integer: bool) -> KindModel:
    """Capacities of a kind summed; counts continuous unless ``integer``. Every rule
    dropped only loosens it, so its LP optimum bounds every real placement."""
    node_kind, n_kinds = node_kinds(problem)
    free = summed_rows(n_kinds, node_kind, np.maximum(problem.free, 0))  # saturated: never wraps
    elig_kind = np.zeros((problem.n_classes, n_kinds), dtype=np.bool_)
    elig_kind[:, node_kind] = problem.eligible
    cls, kd = np.nonzero(elig_kind)
    b = LinearBuilder()
    x = b.add_vars(np.zeros(len(cls), dtype=np.int64), problem.count[cls], integer=integer)
    for c in range(problem.n_classes):
        sel = cls == c
        if sel.sum() > 1:
            b.add_row(x[sel], np.ones(int(sel.sum()), dtype=np.int64), -INF, int(problem.count[c]))
    pairs = Pairs(cls.astype(np.int64), kd.astype(np.int64), x, problem.count[cls], problem.demand)
    capacity_rows(b, pairs, ExistingNodes(np.arange(n_kinds, dtype=np.int64), free))
    b.add_objective(x, problem.weight[cls])
    return KindModel(b.build(maximize=True), cls.astype(np.int64), kd.astype(np.int64), node_kind)


def lp_backend() -> str | None:
    return next((b for b in ("highs", "cbc") if b in available_backends()), None)


def placed_weight_bound(problem: Problem, budget: Budget | None = None) -> int | None:
    """The LP bound within ``budget`` (LP_BOUND_DEFAULT_SECONDS), or None when no LP-capable
    backend is installed."""
    if problem.n_classes == 0 or problem.n_nodes == 0:
        return 0
    backend = lp_backend()
    if backend is None:
        return None
    result = get_backend(backend).solve(kind_model(problem, integer=False).model, SolverSettings(backend, workers=1),
                                        budget or Budget.of(LP_BOUND_DEFAULT_SECONDS))
    if not result.status.has_solution or result.objective is None:
        return None
    return int(np.floor(result.objective + 1e-6))


def stage_room_gone(problem: Problem, floors: Sequence[int]) -> bool:
    """True when no pod of weight stage ``len(floors)`` can be placed while the stages above
    place at least ``floors``: pooled over the nodes, the least of each resource that reaching
    each floor takes (a fractional knapsack, the classes that weigh most per unit of it first)
    leaves less than every class of the stage requests. Cheap (no solve), and only ever says so
    when it is true (every rule it leaves out takes more room, never less): the staged solves
    skip the stages below a full cluster with it."""
    stage = problem.stage_of_class
    mine = np.nonzero((stage == len(floors)) & problem.eligible.any(axis=1))[0]
    if len(mine) == 0:
        return True
    room = np.maximum(problem.free, 0).astype(object).sum(axis=0)  # exact: Python integers
    left = [int(room[r]) - sum(_least_taken(problem, np.nonzero(stage == s)[0], floor, r)
                               for s, floor in enumerate(floors)) for r in range(len(problem.resources))]
    return all(any(int(problem.demand[c, r]) > left[r] for r in range(len(left))) for c in mine)


def _least_taken(problem: Problem, classes: IntArray, floor: int, r: int) -> int:
    """The least of resource ``r`` that classes ``classes`` take to place weight ``floor``: the
    fractional knapsack's optimum (the least per unit of weight first), rounded up as any integer
    placement takes a whole amount; exact in Python integers and fractions."""
    short, taken = floor, Fraction(0)
    for c in sorted(classes.tolist(), key=lambda c: Fraction(int(problem.demand[c, r]), int(problem.weight[c]))):
        if short <= 0:
            break
        weight, demand = int(problem.weight[c]), int(problem.demand[c, r])
        pods = min(Fraction(int(problem.count[c])), Fraction(short, weight))
        taken += pods * demand
        short -= math.ceil(pods * weight)
    return math.ceil(taken)
