"""MILP backends through PuLP: HiGHS (highspy API) and CBC (the binary bundled with PuLP).

Names: ``"highs"``, ``"cbc"``, and ``"milp"`` = HiGHS when highspy is usable, else CBC.

Building: every variable is registered through the objective (zero coefficients included, so
unused variables keep their bounds); each row becomes one ``LpAffineExpression`` made from a
list of pairs (duplicate columns summed first, since an expression is a dict) wrapped in
``LpConstraint`` objects: EQ when lb == ub, otherwise GE and/or LE sharing the expression.

HiGHS runs through a small subclass of PuLP's ``HiGHS`` (the highspy API class) that changes
two steps: ``buildSolverModel`` loads the columns and rows with one vectorised call each (PuLP's
loop calls ``changeColIntegrality`` per column: 1.4 s of a 2 s transfer at 20k variables), and
``callSolver`` passes the hint through ``Highs.setSolution`` (PuLP 3.3.2 has no HiGHS warm start)
and subscribes the progress callback. CBC gets the hint through PuLP's ``warmStart`` (.mst file).

Best bound: HiGHS reports ``mip_dual_bound`` in its info (PuLP minimises the negated objective
for a maximisation, so the sign is flipped back). CBC only prints it: the run is logged to a
temporary file and its final "Lower bound:" / "Upper bound:" line parsed; when the log has no
such line (proved optimal, or the line is missing) the bound is the objective when optimal and
None otherwise. CBC reads the model from an MPS file written with 12 significant digits, so
coefficients beyond 1e12 are not exact there.

Library clash: OR-tools 9.15 and highspy 1.15 both ship a ``libhighs.so.1`` (HiGHS 1.12 and
1.15); whichever is loaded first wins and the other fails to import (google/or-tools#5246).
``import pulp`` imports highspy, so ``_import_pulp`` loads OR-tools first: CP-SAT keeps working
and HiGHS reports itself unavailable ("milp" then runs CBC). highspy 1.13.1 links HiGHS
statically and coexists with OR-tools (1.14.0 does too, but its MIP presolve returns wrong
optima, ERGO-Code/HiGHS#3043); with it HiGHS is available again with no code change.

Time: the limit covers the whole call. The solver gets what building left; CBC also loses an
estimate of the MPS write (measured to take about as long as building the problem).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from kubeplace.models.config import SolverSettings
from kubeplace.models.linear import INF, IntArray, LinearModel
from kubeplace.solver.backends.base import BackendResult, Progress, Status
from kubeplace.solver.budget import Budget

NAMES = ("milp", "highs", "cbc")
MIN_SOLVER_SECONDS = 0.05
LARGE_COEFFICIENT = float(1 << 56)
"""HiGHS refuses a model with a coefficient above 1e15 by default; requests go up to 2^53
(bytes), so capacity rows need more."""
"""Time the solver gets even when building used up the whole budget."""
_CBC_BOUND = re.compile(r"^(?:Lower|Upper) bound:\s+(\S+)", re.MULTILINE)


@dataclass
class MilpBackend:
    """MILP backend; ``name`` picks the solver ("milp", "highs" or "cbc")."""

    name: str = "milp"

    def __post_init__(self) -> None:
        if self.name not in NAMES:
            raise ValueError(f"unknown MILP solver {self.name!r}; expected one of {NAMES}")

    def solver(self) -> str | None:
        """The solver this backend runs ("highs" or "cbc"), or None when none is usable."""
        candidates = ("highs", "cbc") if self.name == "milp" else (self.name,)
        return next((s for s in candidates if _solver_available(s)), None)

    def available(self) -> bool:
        return self.solver() is not None

    def solve(self, model: LinearModel, settings: SolverSettings, budget: Budget,
              on_progress: Callable[[Progress], None] | None = None) -> BackendResult:
        limit, start = budget.left(), time.perf_counter()
        solver = self.solver()
        if solver is None:
            return BackendResult(Status.ERROR, None, None, None, 0.0,
                                 f"{self.name}: solver not available {_highs_import_error()}".strip())
        if model.hint is not None and model.hint.shape != (model.n_vars,):
            raise ValueError(f"hint has shape {model.hint.shape}, expected ({model.n_vars},)")
        rows = merged_rows(model)
        rows, model = divided_by_gcd(model, rows)
        trivial = _trivial_result(model, rows, start)
        if trivial is not None:
            return trivial
        pulp = _import_pulp()
        prob, xs = build_problem(pulp, model, rows)
        built = time.perf_counter() - start
        try:
            if solver == "highs":
                seconds = max(limit - built, MIN_SOLVER_SECONDS)
                bound = _solve_highs(pulp, prob, xs, model, rows, settings, seconds, start, on_progress)
            else:
                seconds = max(limit - 2 * built, MIN_SOLVER_SECONDS)
                bound = _solve_cbc(pulp, prob, xs, model, settings, seconds)
        except pulp.PulpSolverError as err:
            return BackendResult(Status.ERROR, None, None, None, time.perf_counter() - start,
                                 f"{solver}: {err}")
        return _read_result(pulp, prob, xs, model, bound, start, solver)


def _import_pulp() -> Any:
    """Imports PuLP after OR-tools so that highspy can never break CP-SAT (see module doc)."""
    with suppress(ImportError):
        import ortools.sat.python.cp_model_helper  # noqa: F401
    import pulp

    return pulp


def _highs_import_error() -> str:
    """Why highspy cannot be imported here, or "" when it can."""
    _import_pulp()
    try:
        import highspy  # noqa: F401
    except ImportError as err:
        return f"(highspy: {err}; see google/or-tools#5246)"
    return ""


def _solver_available(solver: str) -> bool:
    try:
        pulp = _import_pulp()
    except ImportError:
        return False
    if solver == "highs":
        return bool(pulp.HiGHS(msg=False).available())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # PULP_CBC_CMD is deprecated for PuLP 4
        return bool(pulp.PULP_CBC_CMD(msg=False).available())


def _trivial_result(model: LinearModel, rows: Rows, start: float) -> BackendResult | None:
    """Answers models the solvers mishandle: no variables, empty bound intervals, empty rows."""
    empty = rows.indptr[1:] == rows.indptr[:-1]
    bad_rows = (model.row_lb > model.row_ub) | (empty & ((model.row_lb > 0) | (model.row_ub < 0)))
    if bool(np.any(model.var_lb > model.var_ub)) or bool(np.any(bad_rows)):
        return BackendResult(Status.INFEASIBLE, None, None, None, time.perf_counter() - start,
                             "empty variable or row interval")
    if model.n_vars:
        return None
    objective = float(model.objective_offset)
    return BackendResult(Status.OPTIMAL, np.zeros(0, dtype=np.int64), objective, objective,
                         time.perf_counter() - start, "no variables")


class Rows(NamedTuple):
    """CSR rows with repeated (row, column) entries summed and zero coefficients dropped."""

    indptr: IntArray
    cols: IntArray
    coefs: IntArray


def merged_rows(model: LinearModel) -> Rows:
    """``model``'s rows as ``Rows``; an ``LpAffineExpression`` is a dict and would drop repeats."""
    width = max(model.n_vars, 1)
    keys = np.repeat(np.arange(model.n_rows, dtype=np.int64), np.diff(model.indptr)) * width
    keys += model.indices
    if bool(np.all(keys[1:] > keys[:-1])) and bool(np.all(model.data != 0)):
        return Rows(model.indptr, model.indices, model.data)
    unique, inverse = np.unique(keys, return_inverse=True)
    summed = np.zeros(unique.size, dtype=np.int64)
    np.add.at(summed, inverse.ravel(), model.data)
    unique, summed = unique[summed != 0], summed[summed != 0]
    counts = np.bincount(unique // width, minlength=model.n_rows)
    return Rows(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), unique % width, summed)


def divided_by_gcd(model: LinearModel, rows: Rows) -> tuple[Rows, LinearModel]:
    """Each row over integer variables only divided by the gcd of its coefficients, its bounds
    rounded inwards (the same integer points, so the hint stays feasible). Capacity rows count
    bytes (3 GiB = 3221225472): CBC, warm-started, declared a worse answer optimal on such a row
    that divides down to ``y1 + y2 <= 1``."""
    counts = np.diff(rows.indptr)
    if rows.coefs.size == 0:
        return rows, model
    starts = rows.indptr[:-1][counts > 0]
    gcd = np.ones(model.n_rows, dtype=np.int64)
    gcd[counts > 0] = np.gcd.reduceat(np.abs(rows.coefs), starts)
    whole = np.ones(model.n_rows, dtype=np.bool_)
    integer = model.var_integer[rows.cols].astype(np.int64)
    whole[counts > 0] = np.minimum.reduceat(integer, starts).astype(np.bool_)
    gcd = np.where(whole, gcd, 1)
    if bool(np.all(gcd == 1)):
        return rows, model
    coefs = rows.coefs // np.repeat(gcd, counts)
    lb, ub = model.row_lb, model.row_ub
    row_lb = np.where(lb <= -INF, lb, -(-lb // gcd)).astype(np.int64)
    row_ub = np.where(ub >= INF, ub, ub // gcd).astype(np.int64)
    scaled = replace(model, data=coefs, indptr=rows.indptr, indices=rows.cols, row_lb=row_lb, row_ub=row_ub)
    return Rows(rows.indptr, rows.cols, coefs), scaled


def build_problem(pulp: Any, model: LinearModel, rows: Rows | None = None) -> tuple[Any, list[Any]]:
    """``model`` as a ``pulp.LpProblem``, with its variables in model order.

    Row r becomes constraint "r{r}" (EQ or GE) and/or "r{r}u" (LE); rows without terms are left
    out (``MilpBackend.solve`` checks them first).
    """
    prob = pulp.LpProblem("kubeplace", pulp.LpMaximize if model.maximize else pulp.LpMinimize)
    cats = np.where(model.var_integer, pulp.LpInteger, pulp.LpContinuous).tolist()
    lbs = [None if b <= -INF else b for b in model.var_lb.tolist()]
    ubs = [None if b >= INF else b for b in model.var_ub.tolist()]
    xs = [prob.add_variable(f"x{j}", lb, ub, cat)
          for j, (lb, ub, cat) in enumerate(zip(lbs, ubs, cats, strict=True))]
    prob.setObjective(pulp.LpAffineExpression(list(zip(xs, model.objective.tolist(), strict=True))))
    _add_rows(pulp, prob, xs, model, merged_rows(model) if rows is None else rows)
    return prob, xs


def _add_rows(pulp: Any, prob: Any, xs: list[Any], model: LinearModel, rows: Rows) -> None:
    ptr, col_list, coef_list = rows.indptr.tolist(), rows.cols.tolist(), rows.coefs.tolist()
    affine, constraint, add = pulp.LpAffineExpression, pulp.LpConstraint, prob.addConstraint
    eq, ge, le = pulp.LpConstraintEQ, pulp.LpConstraintGE, pulp.LpConstraintLE
    bounds = zip(ptr[:-1], ptr[1:], model.row_lb.tolist(), model.row_ub.tolist(), strict=True)
    for r, (lo, hi, lb, ub) in enumerate(bounds):
        if lo == hi:
            continue
        expr = affine([(xs[c], a) for c, a in zip(col_list[lo:hi], coef_list[lo:hi], strict=True)])
        if lb == ub:
            add(constraint(expr, eq, rhs=lb), f"r{r}")
            continue
        if lb > -INF:
            add(constraint(expr, ge, rhs=lb), f"r{r}")
        if ub < INF:
            add(constraint(expr, le, rhs=ub), f"r{r}u")


def _solve_highs(pulp: Any, prob: Any, xs: list[Any], model: LinearModel, rows: Rows,
                 settings: SolverSettings, seconds: float, start: float,
                 on_progress: Callable[[Progress], None] | None) -> float | None:
    sign = -1.0 if model.maximize else 1.0  # like PuLP: HiGHS minimises the negated objective
    offset = model.objective_offset

    def report(event: Any) -> None:
        assert on_progress is not None
        out = event.data_out
        on_progress(Progress(objective=sign * out.objective_function_value + offset,
                             bound=sign * out.mip_dual_bound + offset,
                             seconds=time.perf_counter() - start))

    class _HiGHS(pulp.HiGHS):  # type: ignore[misc]
        def buildSolverModel(self, lp: Any) -> None:
            _load_highs(lp.solverModel, model, rows, sign)
            for j, x in enumerate(xs):
                x.index = j
            for name, row in lp._constraints.items():  # names are "r{r}" or "r{r}u"
                row.index = int(name[1:].rstrip("u"))

        def callSolver(self, lp: Any) -> None:
            if model.hint is not None:
                lp.solverModel.setSolution(model.n_vars, np.arange(model.n_vars, dtype=np.int32),
                                           model.hint.astype(np.float64))
            if on_progress is not None:
                lp.solverModel.cbMipImprovingSolution.subscribe(report)
            super().callSolver(lp)

    # No ``threads``: HiGHS fixes its thread pool on first use in a process and refuses a
    # later run asking for another size (it would return no solution), and its MIP search
    # is serial anyway.
    prob.solve(_HiGHS(msg=False, timeLimit=seconds, gapRel=settings.relative_gap, random_seed=settings.seed))
    bound = float(prob.solverModel.getInfo().mip_dual_bound)
    return sign * bound + offset if math.isfinite(bound) else None


def _load_highs(highs: Any, model: LinearModel, rows: Rows, sign: float) -> None:
    """Columns in model order and one (ranged) row per model row, in bulk."""
    from highspy import kHighsInf

    def bounds(values: IntArray) -> npt.NDArray[np.float64]:
        return np.where(values <= -INF, -kHighsInf, np.where(values >= INF, kHighsInf, values))

    highs.setOptionValue("large_matrix_value", LARGE_COEFFICIENT)
    n, no_int, no_float = model.n_vars, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64)
    highs.addCols(n, sign * model.objective.astype(np.float64), bounds(model.var_lb),
                  bounds(model.var_ub), 0, no_int, no_int, no_float)
    highs.changeColsIntegrality(n, np.arange(n, dtype=np.int32), model.var_integer.astype(np.uint8))
    highs.addRows(model.n_rows, bounds(model.row_lb), bounds(model.row_ub), rows.cols.size,
                  rows.indptr[:-1].astype(np.int32), rows.cols.astype(np.int32),
                  rows.coefs.astype(np.float64))


def _solve_cbc(pulp: Any, prob: Any, xs: list[Any], model: LinearModel, settings: SolverSettings,
               seconds: float) -> float | None:
    if model.hint is not None:
        for x, value in zip(xs, model.hint.tolist(), strict=True):
            x.setInitialValue(value, check=False)
    fd, log_path = tempfile.mkstemp(prefix="kubeplace-cbc-", suffix=".log")
    os.close(fd)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # PULP_CBC_CMD is deprecated for PuLP 4
            solver = pulp.PULP_CBC_CMD(
                msg=False, timeLimit=seconds, gapRel=settings.relative_gap,
                threads=settings.workers if settings.workers > 1 else None,
                warmStart=model.hint is not None, logPath=log_path,
                options=[f"randomCbcSeed {settings.seed}"] if settings.seed > 0 else None)
        prob.solve(solver)
        with open(log_path) as log:
            found = _CBC_BOUND.findall(log.read())
    finally:
        os.unlink(log_path)
    return float(found[-1]) + model.objective_offset if found else None


def _read_result(pulp: Any, prob: Any, xs: list[Any], model: LinearModel, bound: float | None,
                 start: float, solver: str) -> BackendResult:
    def result(status: Status, values: IntArray | None = None, objective: float | None = None,
               bound: float | None = None, message: str = "") -> BackendResult:
        return BackendResult(status, values, objective, bound, time.perf_counter() - start,
                             f"{solver}: {message or pulp.LpSolution[prob.sol_status]}")

    sol = prob.sol_status
    if sol not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        if sol == pulp.LpSolutionInfeasible or prob.status == pulp.LpStatusInfeasible:
            return result(Status.INFEASIBLE)
        if sol == pulp.LpSolutionUnbounded or prob.status == pulp.LpStatusUnbounded:
            return result(Status.ERROR, message="unbounded (give every variable finite bounds)")
        if model.hint is not None and not model.violations(model.hint):
            return result(Status.FEASIBLE, model.hint.copy(), float(model.evaluate(model.hint)), bound,
                          "no solution found in time; returning the hint")
        return result(Status.UNKNOWN, bound=bound)
    if not bool(np.all(model.var_integer)):
        # An LP (relaxation): its optimum is a bound, its values are not integers to return.
        raw = np.array([0.0 if x.varValue is None else x.varValue for x in xs], dtype=np.float64)
        value = float(raw @ model.objective.astype(np.float64)) + model.objective_offset
        optimal = sol == pulp.LpSolutionOptimal
        return result(Status.OPTIMAL if optimal else Status.FEASIBLE, None, value, value if optimal else bound)
    values, problem = _rounded_values(xs, model)
    if values is None:
        return result(Status.ERROR, message=problem)
    objective = model.evaluate(values)
    proved = sol == pulp.LpSolutionOptimal and not _gap_left(model, objective, bound)
    if proved:
        bound = float(objective)
    return result(Status.OPTIMAL if proved else Status.FEASIBLE, values, float(objective), bound)


def _rounded_values(xs: list[Any], model: LinearModel) -> tuple[IntArray | None, str]:
    """Solver values rounded to int64, or None with the reason when rounding breaks the model."""
    raw = np.array([np.nan if x.varValue is None else x.varValue for x in xs], dtype=np.float64)
    if not bool(np.all(np.isfinite(raw))):
        return None, "solver returned no value for some variables"
    values = np.round(raw).astype(np.int64)
    off = np.abs(raw - values) > 1e-4
    if bool(np.any(off & model.var_integer)):
        j = int(np.flatnonzero(off & model.var_integer)[0])
        return None, f"var {j} = {raw[j]} is not integral"
    broken = model.violations(values)
    if broken:
        return None, f"rounded values violate the model: {broken[0]}"
    return values, ""


def _gap_left(model: LinearModel, objective: int, bound: float | None) -> bool:
    """True when ``bound`` still leaves room to improve ``objective`` (e.g. a gap-limit stop)."""
    if bound is None:
        return False
    used = model.objective != 0
    if bool(np.all(model.var_integer[used])):  # integral objective: round the bound inwards
        bound = math.floor(bound + 1e-6) if model.maximize else math.ceil(bound - 1e-6)
    return (bound > objective + 1e-6) if model.maximize else (bound < objective - 1e-6)

