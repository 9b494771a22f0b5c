"""A small integer model written term by term and solved by CP-SAT, for the searches that build
their own model (the pricing of node patterns, the exact provisioning model over node slots).

Variables are handles (ints, in creation order); a row is a list of (coefficient, variable) terms
with bounds; besides rows it knows the two logical constraints those models use (an implication
and "not both") and a hint per variable. ``solve`` takes its CP-SAT parameters explicitly (time,
workers, seed, gap: nothing else is set) and can keep the values of every solution found on the
way. OR-tools is loaded with this module (its callers import it at their own import, so loading
the library never counts against a solve's time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from kubeplace.models.linear import INF as NO_BOUND
from kubeplace.solver.backends.base import Status

Terms = Sequence[tuple[int, int]]
"""(coefficient, variable) pairs."""


def _each(bound: npt.ArrayLike, n: int) -> list[int]:
    """One integer bound per row, from one for all or one each."""
    return [int(b) for b in np.broadcast_to(np.asarray(bound, dtype=np.int64), (n,))]


@dataclass(frozen=True)
class IntResult:
    status: Status  # OPTIMAL or FEASIBLE with a solution; INFEASIBLE, UNKNOWN or ERROR without
    values: tuple[int, ...]  # one value per variable of the best solution, () without one
    bound: float  # CP-SAT's best objective bound (in the objective's sense)
    found: list[list[int]] = field(default_factory=list)  # values of ``collect`` in each solution found


class IntModel:
    """Integer and boolean variables, linear rows, implications, hints; solved by CP-SAT."""

    def __init__(self) -> None:
        self._cp = cp_model
        self._m = cp_model.CpModel()
        self._vars: list[Any] = []

    def int_var(self, lb: int, ub: int, name: str) -> int:
        self._vars.append(self._m.new_int_var(lb, ub, name))
        return len(self._vars) - 1

    def bool_var(self, name: str) -> int:
        self._vars.append(self._m.new_bool_var(name))
        return len(self._vars) - 1

    def _sum(self, terms: Terms) -> Any:
        return sum(c * self._vars[v] for c, v in terms)

    def add_le(self, terms: Terms, ub: int) -> None:
        """sum(terms) <= ub."""
        self._m.add(self._sum(terms) <= ub)

    def add_ge(self, terms: Terms, lb: int) -> None:
        """sum(terms) >= lb."""
        self._m.add(self._sum(terms) >= lb)

    def add_eq(self, terms: Terms, value: int) -> None:
        """sum(terms) == value."""
        self._m.add(self._sum(terms) == value)

    def add_rows(self, counts: npt.ArrayLike, cols: npt.ArrayLike, coefs: npt.ArrayLike, lower: npt.ArrayLike,
                 upper: npt.ArrayLike) -> None:
        """Rows as ``models.linear.Rows`` writes them (``linear.INF`` for no bound): row r is
        ``lower[r] <= sum of the next counts[r] coefficient x variable <= upper[r]``, added as
        ``add_le``, ``add_ge`` or ``add_eq``."""
        sizes = [int(c) for c in np.asarray(counts, dtype=np.int64)]
        lows, highs = _each(lower, len(sizes)), _each(upper, len(sizes))
        variables = [int(c) for c in np.asarray(cols, dtype=np.int64)]
        factors = [int(c) for c in np.asarray(coefs, dtype=np.int64)]
        start = 0
        for n, low, high in zip(sizes, lows, highs, strict=True):
            terms = list(zip(factors[start:start + n], variables[start:start + n], strict=True))
            start += n
            if low == high:
                self.add_eq(terms, low)
                continue
            if high < NO_BOUND:
                self.add_le(terms, high)
            if low > -NO_BOUND:
                self.add_ge(terms, low)

    def add_implication(self, a: int, b: int) -> None:
        """Boolean a implies boolean b."""
        self._m.add_implication(self._vars[a], self._vars[b])

    def add_not_both(self, a: int, b: int) -> None:
        """Booleans a and b are not both true."""
        self._m.add_bool_or([self._vars[a].Not(), self._vars[b].Not()])

    def minimize(self, terms: Terms) -> None:
        self._m.minimize(self._sum(terms))

    def maximize(self, terms: Terms) -> None:
        self._m.maximize(self._sum(terms))

    def hint(self, var: int, value: int) -> None:
        self._m.add_hint(self._vars[var], value)

    def solve(self, seconds: float, workers: int, seed: int, gap: float | None = None,
              collect: Sequence[int] = ()) -> IntResult:
        """CP-SAT within ``seconds`` with ``workers`` search workers and ``seed``, stopping at the
        relative ``gap``; ``found`` has the values of ``collect`` in every solution on the way."""
        solver = self._cp.CpSolver()
        solver.parameters.max_time_in_seconds = seconds
        solver.parameters.num_workers = workers
        solver.parameters.random_seed = seed
        if gap is not None:
            solver.parameters.relative_gap_limit = gap
        found: list[list[int]] = []
        callback = _collector(self._cp, [self._vars[v] for v in collect], found) if collect else None
        code = solver.solve(self._m, callback)
        if code in (self._cp.OPTIMAL, self._cp.FEASIBLE):
            status = Status.OPTIMAL if code == self._cp.OPTIMAL else Status.FEASIBLE
            values = tuple(solver.response_proto.solution)
            return IntResult(status, values, float(solver.best_objective_bound), found)
        failed = {self._cp.INFEASIBLE: Status.INFEASIBLE, self._cp.MODEL_INVALID: Status.ERROR}
        status = failed.get(code, Status.UNKNOWN)
        return IntResult(status, (), float(solver.best_objective_bound), found)


def _collector(cp_model: Any, variables: list[Any], found: list[list[int]]) -> Any:
    class _Collector(cp_model.CpSolverSolutionCallback):  # type: ignore[misc]
        def on_solution_callback(self) -> None:
            found.append([int(self.value(v)) for v in variables])

    return _Collector()
