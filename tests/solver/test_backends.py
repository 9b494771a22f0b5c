"""One catalogue of small integer models with known optima, run against every available backend."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.models.config import BACKEND_NAMES, SolverSettings
from kubeplace.models.linear import INF, LinearBuilder, LinearModel
from kubeplace.solver.backends import BACKENDS, available_backends, get_backend
from kubeplace.solver.backends.base import Progress, Status
from kubeplace.solver.budget import Budget

AVAILABLE = available_backends()
SETTINGS = SolverSettings(time_limit=10.0, workers=1, seed=0)

Row = tuple[Sequence[int], Sequence[int], int, int]  # columns, coefficients, lb, ub


def linear_model(lb: Sequence[int], ub: Sequence[int], rows: Sequence[Row], objective: Sequence[int],
                 maximize: bool, offset: int = 0, hint: Sequence[int] | None = None) -> LinearModel:
    builder = LinearBuilder()
    builder.add_vars(np.array(lb, dtype=np.int64), np.array(ub, dtype=np.int64))
    for cols, coefs, row_lb, row_ub in rows:
        builder.add_row(np.array(cols, dtype=np.int64), np.array(coefs, dtype=np.int64), row_lb, row_ub)
    builder.add_objective(np.arange(len(lb)), np.array(objective, dtype=np.int64))
    return builder.build(maximize, offset, None if hint is None else np.array(hint, dtype=np.int64))


@dataclass(frozen=True)
class Case:
    name: str
    model: LinearModel
    optimum: int | None  # None: infeasible


def _knapsack() -> LinearModel:
    values, weights = [10, 13, 18, 31, 7, 15], [11, 15, 20, 35, 10, 33]
    return linear_model([0] * 6, [1] * 6, [(range(6), weights, -INF, 47)], values, maximize=True)


def _assignment() -> LinearModel:
    """Pods of sizes 4, 3, 2 (priorities 3, 2, 2) onto nodes of capacity 5 and 4; x[3*node + pod]."""
    sizes, priority = [4, 3, 2], [3, 2, 2]
    capacity: list[Row] = [(range(3 * n, 3 * n + 3), sizes, -INF, cap) for n, cap in enumerate([5, 4])]
    once: list[Row] = [([p, 3 + p], [1, 1], -INF, 1) for p in range(3)]
    return linear_model([0] * 6, [1] * 6, capacity + once, priority * 2, maximize=True)


def _market_split(n: int = 50, m: int = 5, hint: bool = True) -> LinearModel:
    """Equality rows met by a planted 0/1 vector, handed over as the hint; zero objective.

    Without the hint no backend finds a solution in 3 s (measured); with it all prove
    optimality in about 10 ms, so this case fails by timing out if a backend drops the hint.
    """
    rng = np.random.default_rng(11)
    a = rng.integers(0, 100, size=(m, n))
    planted = rng.integers(0, 2, size=n)
    rows = [(range(n), a[i].tolist(), int(a[i] @ planted), int(a[i] @ planted)) for i in range(m)]
    return linear_model([0] * n, [1] * n, rows, [0] * n, maximize=False, offset=7,
                        hint=planted.tolist() if hint else None)


def _market_split_slack(n: int = 50, m: int = 5) -> LinearModel:
    """Market split minimising the slack: incumbents come at once, proofs take far longer."""
    rng = np.random.default_rng(11)
    a = rng.integers(0, 100, size=(m, n))
    rows = [([*range(n), n + i, n + m + i], [*a[i].tolist(), 1, -1], int(a[i].sum()) // 2,
             int(a[i].sum()) // 2) for i in range(m)]
    return linear_model([0] * (n + 2 * m), [1] * n + [5000] * (2 * m), rows, [0] * n + [1] * (2 * m),
                        maximize=False)


CATALOGUE = [
    Case("knapsack-max", _knapsack(), 41),
    Case("assignment-capacity", _assignment(), 7),
    Case("equality-rows-min", linear_model(
        [0] * 3, [10] * 3, [([0, 1, 2], [1, 1, 1], 10, 10), ([0, 1], [1, -1], 2, 2)],
        [3, 2, 1], maximize=False), 14),
    Case("infeasible", linear_model(
        [0, 0], [5, 5], [([0, 1], [1, 1], 5, INF), ([0, 1], [1, 1], -INF, 3)], [1, 1], maximize=True), None),
    Case("hint-only-feasible", _market_split(), 7),
    Case("negative-coefficients-duplicate-column", linear_model(
        [-3, -3, -2], [3, 3, 2],
        [([0, 1], [-1, 2], -4, INF), ([0, 1, 1], [1, 1, 1], -INF, 3), ([2, 0], [-1, 1], -INF, 2)],
        [-2, 3, -1], maximize=False), -9),
    Case("one-sided-and-range-rows", linear_model(
        [0] * 3, [5] * 3,
        [([0, 1], [1, 1], 3, INF), ([1, 2], [1, 1], -INF, 4), ([0, 2], [1, -1], 2, 3)],
        [1, 2, 3], maximize=True, offset=-4), 12),
    Case("zero-variables", linear_model([], [], [], [], maximize=True, offset=5), 5),
]


def check_solution(model: LinearModel, result_values: np.ndarray | None, objective: float | None) -> None:
    assert result_values is not None and objective is not None
    assert result_values.dtype == np.int64 and result_values.shape == (model.n_vars,)
    assert model.violations(result_values) == []
    assert model.evaluate(result_values) == objective


@pytest.mark.parametrize("backend_name", AVAILABLE)
@pytest.mark.parametrize("case", CATALOGUE, ids=lambda c: c.name)
def test_catalogue(backend_name: str, case: Case) -> None:
    result = get_backend(backend_name).solve(case.model, SETTINGS, Budget.of(SETTINGS.time_limit))
    if case.optimum is None:
        assert result.status is Status.INFEASIBLE, result.message
        assert result.values is None
        return
    assert result.status is Status.OPTIMAL, result.message
    assert result.objective == case.optimum
    assert result.bound == pytest.approx(case.optimum)
    check_solution(case.model, result.values, result.objective)
    assert result.seconds >= 0


# --- random models against brute force -------------------------------------------------------


@st.composite
def small_models(draw: st.DrawFn) -> LinearModel:
    n = draw(st.integers(1, 6))
    lb = draw(st.lists(st.integers(-3, 1), min_size=n, max_size=n))
    ub = [lo + draw(st.integers(0, 3)) for lo in lb]
    rows: list[Row] = []
    for _ in range(draw(st.integers(0, 5))):
        cols = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n))
        coefs = draw(st.lists(st.integers(-4, 4), min_size=len(cols), max_size=len(cols)))
        low = draw(st.one_of(st.just(-INF), st.integers(-10, 10)))
        high = draw(st.one_of(st.just(INF), st.integers(-10, 10)))
        rows.append((cols, coefs, low, high))
    objective = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    return linear_model(lb, ub, rows, objective, draw(st.booleans()), draw(st.integers(-3, 3)))


def brute_force(model: LinearModel) -> int | None:
    """Best objective over every point of the box, or None when no point is feasible."""
    ranges = [range(lo, hi + 1) for lo, hi in zip(model.var_lb.tolist(), model.var_ub.tolist(), strict=True)]
    points = np.array(list(itertools.product(*ranges)), dtype=np.int64).reshape(-1, model.n_vars)
    feasible = [x for x in points if not model.violations(x)]
    if not feasible:
        return None
    scores = [model.evaluate(x) for x in feasible]
    return max(scores) if model.maximize else min(scores)


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(small_models())
def test_random_models_match_brute_force(model: LinearModel) -> None:
    expected = brute_force(model)
    for name in AVAILABLE:
        result = get_backend(name).solve(model, SETTINGS, Budget.of(SETTINGS.time_limit))
        if expected is None:
            assert result.status is Status.INFEASIBLE, (name, result.message)
        else:
            assert result.status is Status.OPTIMAL, (name, result.message)
            assert result.objective == expected, name
            check_solution(model, result.values, result.objective)


# --- behaviour beyond the optimum ------------------------------------------------------------


def _big_knapsack(n: int = 40) -> LinearModel:
    rng = np.random.default_rng(3)
    weights = rng.integers(20, 60, size=n)
    values = weights + rng.integers(-8, 9, size=n)
    return linear_model([0] * n, [1] * n, [(range(n), weights.tolist(), -INF, int(weights.sum()) // 3)],
                        values.tolist(), maximize=True)


@pytest.mark.parametrize("backend_name", [n for n in AVAILABLE if n in ("cpsat", "highs")])
def test_progress_reports_each_incumbent(backend_name: str) -> None:
    seen: list[Progress] = []
    model = _big_knapsack()
    result = get_backend(backend_name).solve(
        model, SolverSettings(time_limit=10.0, workers=1), Budget.of(10.0), on_progress=seen.append)
    assert result.status is Status.OPTIMAL, result.message
    assert seen, "no progress reported"
    objectives = [p.objective for p in seen]
    assert objectives == sorted(objectives)  # maximising: every incumbent at least as good
    assert objectives[-1] == pytest.approx(result.objective)
    assert all(p.bound >= p.objective - 1e-6 for p in seen)
    assert [p.seconds for p in seen] == sorted(p.seconds for p in seen)


@pytest.mark.parametrize("backend_name", AVAILABLE)
def test_time_limit_with_incumbent_is_feasible(backend_name: str) -> None:
    model = _market_split_slack()
    result = get_backend(backend_name).solve(model, SolverSettings(time_limit=1.0, workers=1), Budget.of(1.0))
    assert result.status is Status.FEASIBLE, result.message
    check_solution(model, result.values, result.objective)
    assert result.bound is not None and result.objective is not None
    assert result.bound < result.objective  # minimising, optimality not proved


def test_cpsat_single_worker_is_reproducible() -> None:
    model = _big_knapsack(60)
    runs = [get_backend("cpsat").solve(model, SolverSettings(time_limit=10.0, workers=1, seed=3), Budget.of(10.0))
            for _ in range(2)]
    assert runs[0].values is not None and runs[1].values is not None
    assert np.array_equal(runs[0].values, runs[1].values)


@pytest.mark.parametrize("backend_name", AVAILABLE)
def test_gap_limit_is_not_reported_as_optimal(backend_name: str) -> None:
    result = get_backend(backend_name).solve(
        _big_knapsack(200), SolverSettings(time_limit=5.0, workers=1, relative_gap=0.2), Budget.of(5.0))
    assert result.status.has_solution, result.message
    assert result.bound is not None and result.objective is not None
    if result.status is Status.OPTIMAL:
        assert result.bound == result.objective
    else:
        assert result.bound > result.objective  # maximising, stopped by the gap limit


def test_cpsat_reports_invalid_model_as_error() -> None:
    model = linear_model([-INF] * 3, [INF] * 3, [([0, 1, 2], [4000] * 3, -INF, 5)], [1, 1, 1],
                         maximize=True)
    result = get_backend("cpsat").solve(model, SETTINGS, Budget.of(SETTINGS.time_limit))
    assert result.status is Status.ERROR
    assert "overflow" in result.message


def test_cpsat_rejects_continuous_variables() -> None:
    builder = LinearBuilder()
    builder.add_vars(np.zeros(2, dtype=np.int64), np.full(2, 4), integer=False)
    with pytest.raises(ValueError, match="continuous"):
        get_backend("cpsat").solve(builder.build(maximize=True), SETTINGS, Budget.of(SETTINGS.time_limit))


@pytest.mark.parametrize("backend_name", [n for n in AVAILABLE if n != "cpsat"])
def test_milp_accepts_continuous_variables(backend_name: str) -> None:
    builder = LinearBuilder()
    x = builder.add_vars(np.zeros(1, dtype=np.int64), np.full(1, INF), integer=False)
    y = builder.add_vars(np.zeros(1, dtype=np.int64), np.full(1, 3))
    builder.add_row(np.concatenate([x, y]), np.array([1, 1]), -INF, 5)
    builder.add_objective(np.concatenate([x, y]), np.array([1, 2]))
    model = builder.build(maximize=True)
    result = get_backend(backend_name).solve(model, SETTINGS, Budget.of(SETTINGS.time_limit))
    # A model with continuous variables is an LP relaxation: its optimum is what counts
    # (kubeplace uses it as a bound); fractional values are not returned as integers.
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(8), result.message
    assert result.values is None


@pytest.mark.parametrize("backend_name", AVAILABLE)
def test_trivially_infeasible_bounds(backend_name: str) -> None:
    model = linear_model([2], [1], [], [1], maximize=True)
    assert get_backend(backend_name).solve(model, SETTINGS, Budget.of(SETTINGS.time_limit)).status is Status.INFEASIBLE


def test_registry() -> None:
    assert tuple(BACKENDS) == BACKEND_NAMES == ("cpsat", "milp", "highs", "cbc")  # what a configuration may name
    assert set(AVAILABLE) <= set(BACKENDS)
    assert {get_backend(name).name for name in BACKENDS} == set(BACKENDS)
    with pytest.raises(ValueError, match="cpsat, milp, highs, cbc"):
        get_backend("gurobi")
