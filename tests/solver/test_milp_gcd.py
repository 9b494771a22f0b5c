"""Integer rows are divided by the gcd of their coefficients before a MILP solver sees them."""

from __future__ import annotations

import numpy as np
import pytest

from kubeplace.models.config import SolverSettings
from kubeplace.models.linear import INF, LinearBuilder
from kubeplace.models.preempt_rows import Stage
from kubeplace.solver.backends import get_backend
from kubeplace.solver.backends.milp import divided_by_gcd, merged_rows
from kubeplace.solver.budget import Budget
from kubeplace.solver.solve_preemption import stage_model
from tests.builders import node, pod, snapshot_of
from tests.models.test_preemption_rules import running
from tests.scenarios import usable_backends
from tests.solver.test_preempt_stages import problem_of


def test_rows_are_divided_and_bounds_rounded_inwards() -> None:
    b = LinearBuilder()
    x = b.add_vars(np.zeros(2, np.int64), np.full(2, 9, np.int64))
    (c,) = b.add_vars(np.array([0]), np.array([9]), integer=False)
    b.add_row(x, np.array([3 << 30, 3 << 30]), -INF, 1 << 32)  # y1 + y2 <= 1
    b.add_row(x, np.array([4, 6]), 3, 11)  # 2a + 3b in [2, 5]
    b.add_row(np.array([x[0], c]), np.array([4, 4]), -INF, 6)  # a continuous variable: left alone
    model = b.build(maximize=True)
    rows, scaled = divided_by_gcd(model, merged_rows(model))
    assert rows.coefs.tolist() == [1, 1, 2, 3, 4, 4]
    assert scaled.row_lb.tolist() == [-INF, 2, -INF] and scaled.row_ub.tolist() == [1, 5, 6]


@pytest.mark.skipif("cbc" not in usable_backends(), reason="CBC is not usable here")
def test_warm_started_cbc_finds_the_optimum_on_byte_sized_rows() -> None:
    """CBC, given the all-kept answer as its warm start, used to call it optimal (5 < 6)."""
    pp = problem_of(snapshot_of(node("n0").cpu(4).memory("4Gi"), node("n1").cpu(2).memory("4Gi"),
                                running("r0", "n0", 2, 0), pod("p0").cpu(2).priority(0),
                                pod("p1").cpu(1).memory("3Gi").priority(3), pod("p2").cpu(3).memory("3Gi").priority(3)))
    form = stage_model(pp, Stage.PLACE, pp.all_kept(), pp.terms)
    result = get_backend("cbc").solve(form.model, SolverSettings(backend="cbc", workers=1), Budget.of(10))
    cpsat = get_backend("cpsat").solve(form.model, SolverSettings(workers=1), Budget.of(10))
    assert result.status.value == "optimal" and result.objective == cpsat.objective
