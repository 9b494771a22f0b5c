"""The incremental HiGHS LP/MIP of the column-generation masters: duals, added columns, the MIP."""

from __future__ import annotations

import numpy as np

from kubeplace.solver.backends.highs_lp import INF, HighsLp


def covering_master() -> HighsLp:
    """min cost s.t. cover rows x + 2y >= 4 and y >= 1, columns added one by one."""
    lp = HighsLp()
    lp.add_empty_rows(np.array([4.0, 1.0]), np.array([INF, INF]))
    lp.add_col(1.0, 0.0, INF, np.array([0], dtype=np.int32), np.array([1.0]))
    lp.add_col(3.0, 0.0, INF, np.array([0, 1], dtype=np.int32), np.array([2.0, 1.0]))
    return lp


def test_an_lp_answers_its_value_values_and_row_duals() -> None:
    lp = covering_master()
    assert lp.solve(5.0)
    assert lp.optimal() and lp.feasible()
    assert abs(lp.objective() - 5.0) < 1e-9  # y = 1 (3), x = 2 (2)
    assert np.allclose(lp.values(), [2.0, 1.0])
    assert np.allclose(lp.row_duals(), [1.0, 1.0])  # the cover rows' prices
    assert lp.option("time_limit") == 5.0


def test_an_added_column_is_used_by_the_next_solve() -> None:
    lp = covering_master()
    lp.solve(5.0)
    lp.add_col(2.5, 0.0, INF, np.array([0, 1], dtype=np.int32), np.array([4.0, 1.0]))  # covers both at once
    assert lp.solve(5.0)
    assert abs(lp.objective() - 2.5) < 1e-9
    assert np.allclose(lp.values(), [0.0, 0.0, 1.0])


def test_the_columns_made_integer_give_a_mip_with_its_bound() -> None:
    lp = HighsLp(maximize=True)
    lp.add_vars(np.zeros(2), np.array([10.0, 10.0]))
    lp.set_costs(np.array([0, 1], dtype=np.int32), np.array([5.0, 4.0]))
    lp.add_row(-INF, 7.5, np.array([0, 1], dtype=np.int32), np.array([3.0, 2.0]))
    assert lp.solve(5.0)
    assert abs(lp.objective() - 15.0) < 1e-9  # the LP relaxation: y = 3.75
    lp.set_integer(np.array([0, 1], dtype=np.int32))
    assert lp.solve(5.0, mip_gap=1e-9, hint=np.array([1.0, 0.0]))
    assert abs(lp.objective() - 13.0) < 1e-9 and abs(lp.dual_bound() - 13.0) < 1e-6  # x = 1, y = 2
    assert lp.feasible() and float(lp.values() @ np.array([3.0, 2.0])) <= 7.5 + 1e-9


def test_an_infeasible_model_has_no_feasible_values() -> None:
    lp = HighsLp()
    lp.add_vars(np.zeros(1), np.array([1.0]))
    lp.add_row(2.0, INF, np.array([0], dtype=np.int32), np.array([1.0]))
    assert not lp.solve(5.0)
    assert not lp.optimal() and not lp.feasible() and not lp.timed_out()


def test_the_capacity_writer_s_rows_go_in_with_its_infinity_as_none() -> None:
    """``add_rows`` takes rows as ``models.linear.Rows`` writes them: integer bounds, ``linear.INF``
    for none (a finite bound of 2^53 would be a row HiGHS keeps)."""
    from kubeplace.models.linear import INF as NONE

    lp = HighsLp(maximize=True)
    lp.add_vars(np.zeros(2), np.array([10.0, 10.0]))
    lp.set_costs(np.array([0, 1], dtype=np.int32), np.array([1.0, 1.0]))
    lp.add_rows(np.array([2, 1]), np.array([0, 1, 1]), np.array([1, 1, 1]), np.array([-NONE, 2]), np.array([7, NONE]))
    assert lp.solve(5.0)
    assert abs(lp.objective() - 7.0) < 1e-9 and lp.values()[1] >= 2.0 - 1e-9
    rows = lp._h.getLp()
    assert list(rows.row_lower_) == [-INF, 2.0] and list(rows.row_upper_) == [7.0, INF]
