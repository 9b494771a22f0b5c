"""The CP-SAT integer model of the pattern pricing and the exact provisioning model."""

from __future__ import annotations

from kubeplace.solver.backends.base import Status
from kubeplace.solver.backends.cpsat_model import IntModel


def test_a_maximum_with_every_solution_on_the_way_collected() -> None:
    m = IntModel()
    a, b = m.int_var(0, 3, "a"), m.int_var(0, 10, "b")
    m.add_le([(1, a), (1, b)], 4)
    m.maximize([(3, a), (2, b)])
    m.hint(a, 0)
    m.hint(b, 1)
    solved = m.solve(5.0, workers=1, seed=0, gap=0.0, collect=[a, b])
    assert solved.status is Status.OPTIMAL
    assert solved.values == (3, 1) and solved.bound == 11.0
    assert solved.found[-1] == [3, 1]  # the last solution found is the best


def test_rows_implications_and_not_both() -> None:
    m = IntModel()
    used = [m.bool_var(f"used{s}") for s in range(3)]
    m.add_implication(used[1], used[0])  # used first
    m.add_not_both(used[0], used[2])
    m.add_ge([(1, u) for u in used], 2)
    m.add_eq([(1, used[0]), (-1, used[1])], 0)
    m.minimize([(1, used[0]), (5, used[1]), (1, used[2])])
    solved = m.solve(5.0, workers=1, seed=0)
    assert solved.status is Status.OPTIMAL and solved.values == (1, 1, 0) and solved.found == []


def test_an_infeasible_model_has_no_values() -> None:
    m = IntModel()
    x = m.int_var(0, 2, "x")
    m.add_ge([(1, x)], 3)
    m.minimize([(1, x)])
    solved = m.solve(5.0, workers=1, seed=0)
    assert solved.status is Status.INFEASIBLE and solved.values == ()


def test_the_capacity_writer_s_rows_become_le_ge_and_eq() -> None:
    """``add_rows`` takes rows as ``models.linear.Rows`` writes them (``linear.INF`` for no bound)."""
    from kubeplace.models.linear import INF

    m = IntModel()
    x, y = m.int_var(0, 10, "x"), m.int_var(0, 10, "y")
    m.add_rows([2, 1, 1], [x, y, y, x], [1, 1, 1, 1], [-INF, 3, 2], [7, INF, 2])  # x + y <= 7, y >= 3, x == 2
    m.maximize([(1, x), (1, y)])
    solved = m.solve(5.0, workers=1, seed=0)
    assert solved.status is Status.OPTIMAL and solved.values == (2, 5)
    m = IntModel()
    x = m.int_var(0, 10, "x")
    m.add_rows([1], [x], [2], -INF, 7)  # one bound for every row
    m.maximize([(1, x)])
    assert m.solve(5.0, workers=1, seed=0).values == (3,)
