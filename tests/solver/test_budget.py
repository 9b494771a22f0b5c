"""solver.budget: one shape for time (a deadline on a clock, split into phases)."""

from __future__ import annotations

import math
from typing import Any

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


def test_a_spent_call_budget_has_all_its_seconds_on_a_counted_clock() -> None:
    """``spend``: the call's budget starts after the charge, so a counted call is not born spent;
    ``from_now``: the same seconds again after the call's preparation."""
    run = Budget.of(10.0, CountedClock())
    call = run.spend(2.5)
    assert call.left() == 2.5 and run.left() == 7.5
    later = run.within(4.0)
    run.charge(1.0)
    assert later.left() == 3.0 and later.from_now().left() == 4.0


def test_a_run_slice_is_a_share_of_what_is_left_of_the_run() -> None:
    """Every backend call of a solve gets a slice of the run's one budget (at least the named
    floor), charged to it: the calls together never get more than the run was given."""
    from kubeplace.models.problem import Assignment
    from kubeplace.solver.run import Run
    from kubeplace.solver.shares import SLICE_MIN_SECONDS
    from tests.solver.test_solver_priority_tiers import chain  # a small problem

    settings = SolverSettings(time_limit=2.0, workers=1)
    run = Run(chain(3, 4), (), settings, run_budget(settings), None, 0.0, Assignment.empty())
    given = []
    for share in (0.5, 1.0, 0.3, 1.0, 1.0):
        left = run.left()
        call = run.slice(share)
        assert call.total == max(SLICE_MIN_SECONDS, left * share)
        assert run.left() == max(0.0, left - call.total)
        given.append(call.total)
    assert sum(given) <= 2.0 + 3 * SLICE_MIN_SECONDS


def test_a_callers_budget_reaches_the_solve_and_is_charged() -> None:
    """``make_plan(budget=...)``: the phase's budget is the solve's (no seconds recomputed from the
    settings' time limit): a counted one is charged with every backend call the solve makes."""
    from kubeplace.models.config import Configuration, Profile
    from kubeplace.plan.pipeline import make_plan
    from tests.builders import node, pod, snapshot_of

    snap = snapshot_of(node("a").cpu("4").memory("8Gi"), node("b").cpu("4").memory("8Gi"),
                       *[pod(f"p{i}").cpu("1").memory("1Gi") for i in range(5)])
    clock = CountedClock()
    phase = Budget.of(3.0, clock)
    planned = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=100.0, workers=1), budget=phase)
    assert len(planned.plan.placements) == 5
    assert 0.0 < clock.now <= 3.0 and phase.left() == 3.0 - clock.now  # not the settings' 100 s
    wall = run_budget(SolverSettings(time_limit=100.0, workers=2), Budget.of(3.0, clock))
    assert wall.counted and wall.total == 3.0  # a counted phase stays counted, whatever the workers


def test_a_phase_of_the_wall_clock_becomes_a_counted_run_with_one_worker() -> None:
    """A caller's wall-clock phase: with one worker the solve counts its seconds from zero (runs
    repeat); with more, the same seconds on the wall clock from when the solve starts."""
    phase = Budget.of(4.0)
    counted = run_budget(SolverSettings(time_limit=100.0, workers=1), phase)
    assert counted.counted and counted.left() == 4.0
    wall = run_budget(SolverSettings(time_limit=100.0, workers=2), phase)
    assert not wall.counted and wall.total == 4.0


ENTRIES = {
    ("solver/run.py", "run_budget"): "a solve's budget, from the settings or a caller's phase",
    ("plan/preemption_plan.py", "make_preemption_plan"): "plan --preempt's entry: the plan, then the preemption solve",
    ("plan/provision.py", "make_provision_plan"): "plan --provision's entry",
    ("rebalance/solve_moves.py", "rebalance"): "rebalance's entry",
    ("rebalance/consolidate.py", "consolidate"): "rebalance --consolidate's entry",
    ("rebalance/makeroom.py", "make_room"): "make-room's entry",
}
"""Where the user's seconds (``SolverSettings.time_limit``) become a Budget: once per entry point.
Everything under an entry takes a part of that Budget, and a backend call gets a Budget too."""


def _seconds_handed_down() -> list[str]:
    """In the solver phases (``solver/`` with its backends, ``plan/``, ``rebalance/``): a read of
    ``.time_limit`` outside ENTRIES, a ``time_limit=`` keyword or positional seconds in
    ``SolverSettings(...)`` (seconds handed down in the settings instead of a Budget), and a
    deadline made by hand (``time.monotonic() + ...``) outside ``solver/budget.py``."""
    import ast

    from tests.solver.test_shares import CHECKOUT, PHASES, product_modules

    found: list[str] = []

    def visit(node: ast.AST, where: str, name: str) -> None:
        """``name``: the function ``node`` is in (the innermost)."""
        if isinstance(node, ast.FunctionDef):
            name = node.name
        if isinstance(node, ast.Attribute) and node.attr == "time_limit" and (where, name) not in ENTRIES:
            found.append(f"{where}:{node.lineno}: reads .time_limit in {name or 'the module'}")
        if isinstance(node, ast.Call):
            callee = ast.unparse(node.func)
            if any(k.arg == "time_limit" for k in node.keywords):
                found.append(f"{where}:{node.lineno}: time_limit= in {callee}(...): hand down a Budget")
            if callee == "SolverSettings" and len(node.args) > 1:
                found.append(f"{where}:{node.lineno}: seconds in SolverSettings(...): hand down a Budget")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and any(
                ast.unparse(side) in ("time.monotonic()", "time.perf_counter()") for side in (node.left, node.right)):
            found.append(f"{where}:{node.lineno}: a deadline by hand: {ast.unparse(node)}")
        for child in ast.iter_child_nodes(node):
            visit(child, where, name)

    for module in product_modules().values():
        where = module.path.relative_to(CHECKOUT).as_posix()
        if where.split("/")[0] in PHASES and where != "solver/budget.py":
            visit(ast.parse(module.path.read_text()), where, "")
    return sorted(set(found))


def test_the_users_seconds_become_a_budget_once_per_entry_point() -> None:
    found = _seconds_handed_down()
    assert not found, "\n".join(found)


def test_each_entry_still_makes_its_budget() -> None:
    """An entry of ENTRIES that no longer reads the seconds is taken off the list."""
    import ast

    from tests.solver.test_shares import CHECKOUT

    for (where, name), why in ENTRIES.items():
        tree = ast.parse((CHECKOUT / where).read_text())
        function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
        assert any(isinstance(n, ast.Attribute) and n.attr == "time_limit" for n in ast.walk(function)), (where, why)


def test_plan_preempt_is_one_budget_the_plan_then_the_preemption_solve(monkeypatch: Any) -> None:
    """plan --preempt's time limit is one Budget: the plan without preemption has it, the
    preemption solve what that plan leaves, at least PREEMPTION_SOLVE_MIN_SECONDS (before, it made
    a Budget of the whole limit of its own, so the two could take twice the limit)."""
    from kubeplace.plan import preemption_plan
    from kubeplace.solver.shares import PREEMPTION_SOLVE_MIN_SECONDS
    from tests.scenarios import load_scenario

    given: dict[str, Budget] = {}
    plan, solve = preemption_plan.make_plan, preemption_plan.solve_preemption

    def plan_with(*args: Any, budget: Budget | None = None, **kwargs: Any) -> Any:
        assert budget is not None
        given["plan"] = budget
        return plan(*args, budget=budget, **kwargs)

    def solve_with(pp: Any, start: Any, settings: SolverSettings, budget: Budget, *args: Any) -> Any:
        given["preemption"] = budget
        return solve(pp, start, settings, budget, *args)

    monkeypatch.setattr(preemption_plan, "make_plan", plan_with)
    monkeypatch.setattr(preemption_plan, "solve_preemption", solve_with)
    scenario = load_scenario("preempt-batch")
    config, profile = scenario.config()
    planned = preemption_plan.make_preemption_plan(scenario.snapshot(), config, profile,
                                                   SolverSettings(time_limit=20.0, workers=1))
    assert planned.plan.preemptions  # the preemption solve ran, and evicted
    whole, then = given["plan"], given["preemption"]
    assert whole.total == 20.0
    assert then.start >= whole.start and then.deadline <= whole.deadline + 1e-6
    assert then.total >= PREEMPTION_SOLVE_MIN_SECONDS
