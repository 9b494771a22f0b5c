"""solver.budget: one shape for time (a deadline on a clock, split into phases)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from kubeplace.models.config import SolverSettings
from kubeplace.solver.budget import NO_DEADLINE, Budget, CountedClock
from kubeplace.solver.run import run_budget


class Manual:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_split_takes_its_share_of_what_is_left_now() -> None:
    clock = Manual()
    budget = Budget.of(10.0, clock)
    clock.now += 4.0
    phase = budget.split(0.5)
    assert phase.total == 3.0 and phase.left() == 3.0
    assert phase.deadline <= budget.deadline


def test_part_and_first_take_shares_of_the_whole() -> None:
    clock = Manual()
    budget = Budget.of(10.0, clock)
    clock.now += 4.0
    assert budget.part(0.25).left() == 2.5  # of the whole, from now
    assert budget.first(0.5).left() == 1.0  # ends at start + 5
    assert budget.first(0.2).left() == 0.0  # already past its end: nothing, never negative


def test_left_is_never_negative_and_expired_after_the_deadline() -> None:
    clock = Manual()
    budget = Budget.of(1.0, clock)
    assert not budget.expired()
    clock.now += 5.0
    assert budget.left() == 0.0 and budget.expired()
    assert budget.split(0.5).left() == 0.0


def test_within_caps_at_least_floors() -> None:
    clock = Manual()
    budget = Budget.of(10.0, clock)
    assert budget.within(3.0).left() == 3.0
    assert budget.within(30.0).left() == 10.0  # never past the parent
    assert budget.at_least(30.0).left() == 30.0  # a floor may go past it (stated where used)
    assert budget.shortened(4.0).left() == 6.0


@given(st.floats(0.0, 1e4), st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 100.0)), max_size=6))
def test_nested_splits_stay_within_their_parents(seconds: float, steps: list[tuple[float, float]]) -> None:
    clock = Manual()
    budget = Budget.of(seconds, clock)
    for share, elapsed in steps:
        child = budget.split(share)
        assert 0.0 <= child.left() <= budget.left() + 1e-9
        assert child.deadline <= budget.deadline + 1e-9 or child.expired()
        clock.now += elapsed
        assert 0.0 <= child.left() <= budget.left() + 1e-9
        assert child.expired() or not budget.expired()
        budget = child


def test_a_counted_budget_moves_only_by_what_is_charged() -> None:
    """One worker: the solve's budget is counted in slices handed out, so runs repeat exactly."""
    budget = run_budget(SolverSettings(time_limit=2.0, workers=1), started=12345.0)
    assert budget.counted and budget.left() == 2.0
    repair = budget.split(0.5)
    assert repair.total == 1.0 and repair.counted
    budget.charge(0.75)
    assert budget.left() == 1.25 and repair.left() == 0.25
    budget.charge(5.0)
    assert budget.left() == 0.0 and budget.expired()


def test_a_wall_clock_budget_ignores_charges() -> None:
    budget = run_budget(SolverSettings(time_limit=100.0, workers=4), started=0.0)
    assert not budget.counted
    clock = CountedClock()
    assert Budget.of(1.0, clock).counted
    wall = Budget.of(100.0)
    wall.charge(50.0)
    assert wall.left() > 99.0


def test_no_deadline() -> None:
    assert NO_DEADLINE.left() == math.inf and not NO_DEADLINE.expired()
    assert NO_DEADLINE.within(2.0).left() <= 2.0
