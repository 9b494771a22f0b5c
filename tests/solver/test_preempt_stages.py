"""The preemption model's rows and stages, each on its own, on every backend.

Each stage is solved from a valid but worse incumbent and must find the better answer by its own
objective; the rows must refuse what the rules forbid (an eviction nobody needs, a pod counting
on room a victim above it frees, a gang split).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.models.preempt_problem import PreemptionProblem, preemption_problem
from kubeplace.models.preempt_rows import Stage, victim_values
from kubeplace.models.problem import Assignment
from kubeplace.solver.backends import get_backend
from kubeplace.solver.budget import Budget
from kubeplace.solver.solve_preemption import feasible, solve_preemption, stage_model
from tests.builders import node, pod, snapshot_of
from tests.models.test_preemption_rules import gang_member, pdb, running
from tests.scenarios import usable_backends

BACKENDS = usable_backends()


def problem_of(snapshot: Snapshot) -> PreemptionProblem:
    config = Configuration()
    return preemption_problem(snapshot, config, config.profiles[0])


def assignment(pp: PreemptionProblem, placed: dict[str, str], evicted: set[str]) -> Assignment:
    """Pending pods on the named nodes, every victim kept but ``evicted``."""
    p = pp.problem
    y = np.zeros((p.n_classes, p.n_nodes), dtype=np.int64)
    nodes = {name: i for i, name in enumerate(p.node_names)}
    for c in range(p.n_classes):
        for m in p.members[c]:
            pod_ = pp.pods[m]
            if c >= pp.n_pending and pod_.name not in evicted:
                y[c, pp.victim_node[c - pp.n_pending]] += 1
            elif c < pp.n_pending and pod_.name in placed:
                y[c, nodes[placed[pod_.name]]] += 1
    return Assignment.from_dense(y)


def solved(pp: PreemptionProblem, stage: Stage, incumbent: Assignment, backend: str) -> Assignment:
    """The stage's optimum, which must improve on ``incumbent`` by the stage's own objective."""
    form = stage_model(pp, stage, incumbent, pp.terms)
    lm = form.model
    result = get_backend(backend).solve(lm, SolverSettings(backend=backend, time_limit=10, workers=1), Budget.of(10))
    assert result.status.value == "optimal" and result.values is not None and lm.hint is not None
    sign = -1 if lm.maximize else 1
    assert sign * lm.evaluate(result.values) < sign * lm.evaluate(lm.hint), "the stage's objective improved"
    return form.assignment(result.values)


def evicted(pp: PreemptionProblem, a: Assignment) -> set[str]:
    kept = pp.kept(a)
    out = set()
    for v in range(pp.n_victims):
        members = pp.problem.members[pp.n_pending + v]
        out |= {pp.pods[m].name for m in members[: int(pp.victim_count[v] - kept[v])]}
    return out


TWO_CHOICES = snapshot_of(node("n1").cpu(4), node("n2").cpu(4), running("mid", "n1", 4, 5),
                          running("l1", "n2", 2, 1), running("l2", "n2", 2, 1), running("l3", "n2", 0, 1),
                          pod("high").cpu(4).priority(10))


def weightless_victims(pp: PreemptionProblem) -> PreemptionProblem:
    """``pp`` with victims weighing nothing in the placed weight, so that only the stage decides
    (with their weight, stage 1 already prefers evicting fewer pods of lower priority)."""
    weight = pp.problem.weight * (np.arange(pp.problem.n_classes) < pp.n_pending)
    return replace(pp, agg=replace(pp.agg, problem=replace(pp.problem, weight=weight)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_highest_stage_lowers_the_highest_victim_priority(backend: str) -> None:
    pp = weightless_victims(problem_of(TWO_CHOICES))
    worse = assignment(pp, {"high": "n1"}, {"mid"})
    assert feasible(pp, worse)
    better = solved(pp, Stage.HIGHEST, worse, backend)
    assert evicted(pp, better) == {"l1", "l2"}
    assert victim_values(pp, better).highest < victim_values(pp, worse).highest


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_budget_stage_keeps_the_protected_pod(backend: str) -> None:
    pp = problem_of(snapshot_of(node("n1").cpu(4), node("n2").cpu(4), running("guarded", "n1", 4, 1).label("app", "db"),
                                running("free", "n2", 4, 1), pdb("db", 0), pod("high").cpu(4).priority(10)))
    worse = assignment(pp, {"high": "n1"}, {"guarded"})
    assert feasible(pp, worse) and victim_values(pp, worse).violations == 1
    better = solved(pp, Stage.BUDGETS, worse, backend)
    assert evicted(pp, better) == {"free"} and victim_values(pp, better).violations == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_victims_stage_evicts_the_fewest(backend: str) -> None:
    pp = problem_of(snapshot_of(node("n1").cpu(4), node("n2").cpu(4), running("a1", "n1", 2, 1),
                                running("a2", "n1", 2, 1), running("b", "n2", 4, 1), pod("high").cpu(4).priority(10)))
    worse = assignment(pp, {"high": "n1"}, {"a1", "a2"})
    better = solved(pp, Stage.VICTIMS, worse, backend)
    assert evicted(pp, better) == {"b"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_victims_stage_weighs_a_higher_priority_victim_more(backend: str) -> None:
    """Two victims of priority 5 and 1 (cost 2 + 1) rather than two of priority 5 (2 + 2)."""
    pp = weightless_victims(problem_of(snapshot_of(
        node("n1").cpu(4), node("n2").cpu(4), running("a1", "n1", 2, 5), running("a2", "n1", 2, 5),
        running("b1", "n2", 2, 5), running("b2", "n2", 2, 1), pod("high").cpu(4).priority(10))))
    worse = assignment(pp, {"high": "n1"}, {"a1", "a2"})
    assert evicted(pp, solved(pp, Stage.VICTIMS, worse, backend)) == {"b1", "b2"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_place_stage_places_the_preemptor(backend: str) -> None:
    pp = problem_of(TWO_CHOICES)
    better = solved(pp, Stage.PLACE, pp.all_kept(), backend)
    assert evicted(pp, better) == {"l1", "l2"}


def test_no_eviction_without_a_preemptor_there() -> None:
    pp = problem_of(TWO_CHOICES)
    assert feasible(pp, assignment(pp, {"high": "n2"}, {"l1", "l2"}))
    assert not feasible(pp, assignment(pp, {"high": "n2"}, {"l1", "l2", "mid"}))  # nobody needs mid's room
    assert not feasible(pp, assignment(pp, {}, {"l1"}))


def test_no_pod_counts_on_room_a_victim_above_it_frees() -> None:
    pp = problem_of(snapshot_of(node("n1").cpu(4), running("mid", "n1", 2, 5), running("low", "n1", 2, 1),
                                pod("high").cpu(2).priority(10), pod("small").cpu(2).priority(3)))
    assert feasible(pp, assignment(pp, {"high": "n1"}, {"low"}))
    assert not feasible(pp, assignment(pp, {"high": "n1", "small": "n1"}, {"low", "mid"}))


def test_a_running_gang_goes_whole_or_stays() -> None:
    pp = problem_of(snapshot_of(node("n1").cpu(4), node("n2").cpu(4), gang_member(running("a", "n1", 4, 1), "job"),
                                gang_member(running("b", "n2", 1, 1), "job"), pod("high").cpu(4).priority(10)))
    assert feasible(pp, assignment(pp, {"high": "n1"}, {"a", "b"}))
    assert not feasible(pp, assignment(pp, {"high": "n1"}, {"a"}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_answer_is_never_worse_than_the_greedy(backend: str) -> None:
    pp = problem_of(TWO_CHOICES)
    report = solve_preemption(pp, Assignment.empty(), SolverSettings(backend=backend, workers=1), Budget.of(5.0))
    assert report.steps[:2] == ("no preemption", "greedy preemption")
    assert evicted(pp, report.assignment) == {"l1", "l2"} and report.status == "optimal"
