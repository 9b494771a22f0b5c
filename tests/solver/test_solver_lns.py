"""Large problems: LNS under a budget is never worse than greedy, and repeats exactly with
one worker and a seed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubeplace.models import evaluate
from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.terms import objective_value
from kubeplace.solver.greedy import POLICIES, greedy
from kubeplace.solver.solve import solve
from kubeplace_bench.scale import synthetic_snapshot
from kubeplace_bench.synthetic import SyntheticSpec


def large_problem():  # type: ignore[no-untyped-def]
    snap = synthetic_snapshot(SyntheticSpec(nodes=150, pods=900, seed=7))
    plugins = instantiate(Configuration(), Profile(), snap)
    problem = aggregate(snap, plugins).problem
    assert int(problem.eligible.sum()) > SolverSettings().full_model_pairs  # the LNS path, not the whole model
    return problem, plugins.terms(problem)


def test_lns_never_worse_than_greedy_and_improves_balance() -> None:
    problem, terms = large_problem()
    report = solve(problem, terms, SolverSettings(time_limit=3, workers=1, seed=1))
    for policy in POLICIES:
        g = greedy(problem, policy)
        assert report.placed_weight >= evaluate.placed_weight(problem, g)
        if report.placed_weight == evaluate.placed_weight(problem, g):
            assert report.objective <= objective_value(problem, g, terms) + 1e-9
    assert any(step.startswith("lns rounds") for step in report.steps)


def test_one_worker_and_a_seed_repeat_exactly() -> None:
    problem, terms = large_problem()
    runs = [solve(problem, terms, SolverSettings(time_limit=2, workers=1, seed=5)) for _ in range(2)]
    a, b = (r.assignment.dense(problem.n_classes, problem.n_nodes) for r in runs)
    assert np.array_equal(a, b) and runs[0].objective == runs[1].objective


def test_stop_when_placed_ends_at_the_placement_instead_of_the_budget() -> None:
    problem, terms = large_problem()
    full = solve(problem, terms, SolverSettings(time_limit=2, workers=1, seed=1))
    quick = solve(problem, terms, SolverSettings(time_limit=2, workers=1, seed=1, stop_when_placed=True))
    assert quick.pods_placed == full.pods_placed == int(problem.count.sum())  # everything fits
    assert quick.steps[-1].startswith("stopped:")
    assert not any(step.startswith("lns rounds") for step in quick.steps)
    assert quick.seconds < 1.0 and quick.bound == quick.placed_weight


def test_a_gang_still_waiting_for_members_is_not_worth_the_budget() -> None:
    """Two of a gang's three members exist: no placement can place them, whatever the LP bound
    (capacity only) says; the solve stops once the rest is placed."""
    from kubeplace.solver.solve import placeable_weight
    from tests.builders import node, pod, snapshot_of

    member = [pod(f"w{i}").cpu("1").label("kubeplace.io/gang", "g").annotation("kubeplace.io/gang-min-member", "3")
              for i in range(2)]
    snap = snapshot_of(node("a").cpu("8").memory("8Gi"), *member, pod("solo").cpu("1"))
    plugins = instantiate(Configuration(), Profile(), snap)
    problem = aggregate(snap, plugins).problem
    assert placeable_weight(problem) == 1 and int((problem.weight * problem.count).sum()) == 3
    quick = solve(problem, plugins.terms(problem), SolverSettings(time_limit=5, workers=1, stop_when_placed=True))
    assert quick.pods_placed == 1 and quick.steps[-1] == "stopped: every pod placed" and quick.seconds < 1
    full = solve(problem, plugins.terms(problem), SolverSettings(time_limit=1, workers=1))
    assert full.bound == 1 and full.gap == 0.0  # the bound knows the gang waits


def test_when_a_plain_greedy_places_everything_serve_skips_the_guided_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubeplace.solver import solve as solve_module

    problem, terms = large_problem()
    asked: list[int] = []
    real = solve_module.kind_quotas

    def counted(*args: Any, **kwargs: Any) -> Any:
        asked.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(solve_module, "kind_quotas", counted)
    quick = solve(problem, terms, SolverSettings(time_limit=2, workers=1, seed=1, stop_when_placed=True))
    assert quick.pods_placed == int(problem.count.sum()) and asked == []
    solve(problem, terms, SolverSettings(time_limit=2, workers=1, seed=1))
    assert asked == [1]  # plan and bind still compare it
