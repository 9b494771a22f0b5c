"""Quotas by node kind from the aggregated model, for the guided greedy.

The kind model (solver/bound.py) sees every class at once, so its solution says which
node shapes each class should use (CPU-heavy GPU pods on CPU-rich GPU nodes, ...);
solved with integer counts under a short budget, it becomes a placement plan by kind.
"""

from __future__ import annotations

import numpy as np

from kubeplace.models.config import SolverSettings
from kubeplace.models.problem import IntArray, Problem
from kubeplace.solver.backends import get_backend
from kubeplace.solver.bound import kind_model, lp_backend
from kubeplace.solver.budget import Budget


def kind_quotas(problem: Problem, budget: Budget) -> tuple[IntArray, IntArray] | None:
    """(quotas (K, kinds), kind per node), or None when no solution came in time. With a
    counted ``budget``, CP-SAT solves it on deterministic time, so runs repeat exactly."""
    km = kind_model(problem, integer=True)
    backend = "cpsat" if budget.counted else (lp_backend() or "cpsat")
    result = get_backend(backend).solve(km.model, SolverSettings(backend, workers=1), budget)
    if not result.status.has_solution or result.values is None:
        return None
    n_kinds = int(km.node_kind.max()) + 1 if len(km.node_kind) else 0
    quotas = np.zeros((problem.n_classes, n_kinds), dtype=np.int64)
    np.add.at(quotas, (km.cls, km.kind), result.values)
    return quotas, km.node_kind
