"""Independent sub-problems: found, solved apart, lifted back."""

from __future__ import annotations

from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.evaluate import nodes_used, pods_placed
from kubeplace.models.framework import Objective
from kubeplace.solver.solve import solve
from kubeplace.solver.split import components
from tests.builders import node, pod, snapshot_of


def problem_and_terms(objective: Objective = Objective.BINPACK):  # type: ignore[no-untyped-def]
    snap = snapshot_of(
        node("a1").cpu("4").memory("8Gi").label("pool", "a"), node("a2").cpu("4").memory("8Gi").label("pool", "a"),
        node("b1").cpu("4").memory("8Gi").label("pool", "b"),
        *[pod(f"pa{i}").cpu("1").selector("pool", "a") for i in range(5)],
        *[pod(f"pb{i}").cpu("2").selector("pool", "b") for i in range(3)],
        pod("nowhere").cpu("1").selector("pool", "c"),
    )
    profile = Profile(objective=objective)
    plugins = instantiate(Configuration(), profile, snap)
    problem = aggregate(snap, plugins).problem
    return problem, plugins.terms(problem)


def test_pools_that_no_class_shares_are_separate_parts() -> None:
    problem, _ = problem_and_terms()
    parts = components(problem)
    nodes_of = sorted(tuple(problem.node_names[i] for i in n) for _, n in parts)
    assert nodes_of == [(), ("a1", "a2"), ("b1",)]


def test_split_solve_is_optimal_and_lifts_back() -> None:
    problem, terms = problem_and_terms()
    report = solve(problem, terms, SolverSettings(time_limit=5, workers=1))
    assert report.status == "optimal"
    assert pods_placed(report.assignment) == 5 + 2
    assert nodes_used(problem, report.assignment) == 3
    assert any(step.startswith("part 2/2") for step in report.steps)


def test_balance_is_not_split() -> None:
    problem, terms = problem_and_terms(Objective.BALANCE)
    report = solve(problem, terms, SolverSettings(time_limit=5, workers=1))
    assert not any(step.startswith("part") for step in report.steps)
