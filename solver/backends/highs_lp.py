"""An incremental LP/MIP on HiGHS, for column generation: the master grows column by column and
is re-solved warm; its row duals price the next columns; at the end the same model, its columns
made integer, is solved as a MIP started from a hint.

Coefficients and bounds are floats (a master's costs are prices per hour, its values fractional),
which is why this is not a ``LinearModel``. ``math.inf`` is "no bound". HiGHS is loaded with this
module, after OR-tools (``milp._import_pulp`` says why): its callers import it at their own import,
so loading the library never counts against a solve's time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

import numpy as np
import numpy.typing as npt

from kubeplace.models.linear import INF as LINEAR_INF

FloatArray = npt.NDArray[np.float64]
Ints = npt.NDArray[np.integer[Any]] | Sequence[int]
Floats = npt.NDArray[np.floating[Any]] | Sequence[float]

INF = math.inf


with suppress(ImportError):
    import ortools.sat.python.cp_model_helper  # noqa: F401
import highspy  # noqa: E402


def _bounds(bound: Ints | int, n: int) -> FloatArray:
    """Integer row bounds as floats, ``models.linear.INF`` (either sign) as HiGHS's infinity."""
    out = np.broadcast_to(np.asarray(bound, dtype=np.float64), (n,)).copy()
    out[np.abs(out) >= LINEAR_INF] = np.sign(out[np.abs(out) >= LINEAR_INF]) * INF
    return out


class HighsLp:
    """One HiGHS model: rows and columns added in turn, solved as often as wanted.

    ``options`` are HiGHS options set once (e.g. ``large_matrix_value``). Every solve takes its
    own time limit in seconds; after it ``optimal()``, ``feasible()``, ``objective()``,
    ``dual_bound()``, ``values()`` and ``row_duals()`` read its answer.
    """

    def __init__(self, maximize: bool = False, options: dict[str, float] | None = None) -> None:
        self._lib = highspy
        self._h = highspy.Highs()
        self._h.setOptionValue("output_flag", False)
        for name, value in (options or {}).items():
            self._h.setOptionValue(name, value)
        if maximize:
            self._h.changeObjectiveSense(highspy.ObjSense.kMaximize)

    def add_empty_rows(self, lower: Floats, upper: Floats) -> None:
        """Rows without terms yet (columns added later fill them)."""
        n = len(lower)
        self._h.addRows(n, np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64), 0,
                        np.zeros(n, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0))

    def add_row(self, lower: float, upper: float, cols: Ints, coefs: Floats) -> None:
        self._h.addRow(lower, upper, len(cols), np.asarray(cols, dtype=np.int32), np.asarray(coefs, dtype=np.float64))

    def add_rows(self, counts: Ints, cols: Ints, coefs: Ints | Floats, lower: Ints | int,
                 upper: Ints | int) -> None:
        """Rows as ``models.linear.Rows`` writes them (integer bounds, ``linear.INF`` for none):
        row r uses the next counts[r] entries of cols/coefs."""
        counts = np.asarray(counts, dtype=np.int64)
        n = len(counts)
        starts = (np.cumsum(counts) - counts).astype(np.int32)
        self._h.addRows(n, _bounds(lower, n), _bounds(upper, n), int(counts.sum()), starts,
                        np.asarray(cols, dtype=np.int32), np.asarray(coefs, dtype=np.float64))

    def add_col(self, cost: float, lower: float, upper: float, rows: Ints, coefs: Floats) -> None:
        """One column with its entries in existing rows."""
        self._h.addCol(cost, lower, upper, len(rows), np.asarray(rows, dtype=np.int32),
                       np.asarray(coefs, dtype=np.float64))

    def add_vars(self, lower: Floats, upper: Floats) -> None:
        """Columns without entries or cost (``set_costs`` and rows give them some)."""
        self._h.addVars(len(lower), np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64))

    def set_costs(self, cols: Ints, costs: Floats) -> None:
        self._h.changeColsCost(len(cols), np.asarray(cols, dtype=np.int32), np.asarray(costs, dtype=np.float64))

    def set_integer(self, cols: Ints) -> None:
        """These columns integral from now on (the model becomes a MIP)."""
        n = len(cols)
        self._h.changeColsIntegrality(n, np.asarray(cols, dtype=np.int32), np.full(n, self._lib.HighsVarType.kInteger))

    def solve(self, seconds: float, mip_gap: float | None = None, hint: FloatArray | None = None) -> bool:
        """Solves within ``seconds`` (HiGHS has no limit unless told), a MIP stopping at relative
        gap ``mip_gap``, started from the column values ``hint``; True when proved optimal."""
        self._h.setOptionValue("time_limit", seconds)
        if mip_gap is not None:
            self._h.setOptionValue("mip_rel_gap", mip_gap)
        if hint is not None:
            solution = self._lib.HighsSolution()
            solution.col_value = hint.tolist()
            solution.value_valid = True
            self._h.setSolution(solution)
        self._h.run()
        return self.optimal()

    def option(self, name: str) -> Any:
        """The value of HiGHS option ``name`` (as set, or its default)."""
        return self._h.getOptionValue(name)[1]

    def optimal(self) -> bool:
        return bool(self._h.getModelStatus() == self._lib.HighsModelStatus.kOptimal)

    def timed_out(self) -> bool:
        return bool(self._h.getModelStatus() == self._lib.HighsModelStatus.kTimeLimit)

    def objective(self) -> float:
        """The last solve's objective value (an LP's optimum, a MIP's incumbent)."""
        return float(self._h.getInfo().objective_function_value)

    def dual_bound(self) -> float:
        """The last MIP's proved bound on its objective (infinite when it has none)."""
        return float(self._h.getInfo().mip_dual_bound)

    def feasible(self) -> bool:
        """Whether the last solve found a feasible point (a MIP may stop without one)."""
        return bool(self._h.getInfo().primal_solution_status == 2)  # kSolutionStatusFeasible

    def values(self) -> FloatArray:
        """Column values of the last solve (meaningful when ``feasible()``)."""
        return np.asarray(self._h.getSolution().col_value, dtype=np.float64)

    def row_duals(self) -> FloatArray:
        """Row duals of the last (LP) solve, in the objective's sense."""
        return np.asarray(self._h.getSolution().row_dual, dtype=np.float64)
