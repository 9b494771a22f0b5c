"""Priorities are exact at any number of them: one pod of a higher priority outweighs every pod
of the lower ones together, on every backend, in a plan and with ``--preempt``.

Strict weights over many tiers pass what an int64 objective holds (2^40 per tier here), so tiers
are grouped into weight stages that the solvers place one after the other, the stages above kept
as rows (``models.aggregate.priority_weights``, ``solver.solve._place_by_stage``).
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubeplace.kube.objects import Snapshot
from kubeplace.models import evaluate
from kubeplace.models.aggregate import priority_weights
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.models.formulation.placement import Neighbourhood, placement_model
from kubeplace.models.problem import Assignment, Problem
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Plan
from kubeplace.plan.preemption_plan import make_preemption_plan, verify_preempting
from kubeplace.solver.backends import get_backend
from kubeplace.solver.bound import stage_room_gone
from kubeplace.solver.budget import Budget
from kubeplace.solver.run import Run, run_budget
from kubeplace.solver.solve import _place_by_stage, solve
from tests.builders import node, pod, snapshot_of
from tests.models.test_preemption_rules import running
from tests.scenarios import usable_backends

BACKENDS = usable_backends()


def settings_for(backend: str, time_limit: float = 10) -> SolverSettings:
    return SolverSettings(backend=backend, time_limit=time_limit, workers=1, seed=0)


STAGED_BUDGET = 300
"""The staged solves split their budget evenly between the stages still open (up to ~50 here): a
budget that proves every stage on a loaded machine too (CBC starts a process per solve). It is a
limit, not a duration: each stage ends as soon as it is proved."""


def plan_of(snapshot: Snapshot, backend: str, preempt: bool = False) -> Plan:
    """The plan, which the independent verifier accepts (placements and victims)."""
    config = Configuration()
    profile = config.profiles[0]
    planner = make_preemption_plan if preempt else make_plan
    plan = planner(snapshot, config, profile, settings_for(backend)).plan
    assert verify_preempting(snapshot, plan.placements, plan.preemptions, config, profile) == []
    return plan


def placed_priorities(plan: Plan) -> Counter[int]:
    """Pods placed per priority (pods are named p<priority>-<k>)."""
    return Counter(int(p.name[1:].split("-")[0]) for p in plan.placements)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_highest_of_43_priorities_takes_the_only_room(backend: str) -> None:
    snapshot = snapshot_of(node("n1").cpu(1), *(pod(f"p{t}-0").cpu(1).priority(t) for t in range(43)))
    assert placed_priorities(plan_of(snapshot, backend)) == {42: 1}  # was the pod of priority 40


@pytest.mark.parametrize("backend", BACKENDS)
def test_eight_classes_of_100_pods_the_top_one_takes_the_room(backend: str) -> None:
    snapshot = snapshot_of(node("n1").cpu(100).pods(200),
                           *(pod(f"p{1000 * t}-{k}").cpu(1).priority(1000 * t) for t in range(8) for k in range(100)))
    assert placed_priorities(plan_of(snapshot, backend)) == {7000: 100}  # was the tier below it


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_highest_of_43_preemptors_is_served(backend: str) -> None:
    snapshot = snapshot_of(node("n1").cpu(1), running("low", "n1", 1, 0),
                           *(pod(f"p{t}-0").cpu(1).priority(t) for t in range(1, 44)))
    plan = plan_of(snapshot, backend, preempt=True)
    assert placed_priorities(plan) == {43: 1}  # was 40
    assert [(v.name, v.for_pods) for v in plan.preemptions] == [("low", ("default/p43-0",))]


def chain(priorities: int, capacity: int, demand: int = 1) -> Problem:
    """One node of ``capacity`` cpu; one pod of each priority 0..priorities-1, each of ``demand``."""
    count = np.ones(priorities, dtype=np.int64)
    weight, stage = priority_weights(np.arange(priorities, dtype=np.int64), count)
    return Problem(("cpu",), ("n1",), np.array([[capacity]]), np.zeros((1, 1), dtype=np.int64),
                   np.full((priorities, 1), demand, dtype=np.int64), count, weight,
                   np.full((priorities, 1), demand <= capacity), tuple((c,) for c in range(priorities)),
                   weight_stage=stage)


def test_tiers_beyond_2_to_the_40_start_a_stage_of_their_own() -> None:
    p = chain(45, 5)
    assert p.n_stages == 2
    assert p.stage_of_class.tolist() == [1] * 41 + [0] * 4  # 2^41 would pass the limit: the top 4 apart
    assert p.weight.tolist() == [1 << t for t in range(41)] + [1, 2, 4, 8]
    one_of_stage_0, all_of_stage_1 = (Assignment(np.array(c), np.zeros(len(c), np.int64), np.ones(len(c), np.int64))
                                      for c in ([41], list(range(41))))
    assert evaluate.placed_weight(p, one_of_stage_0) > evaluate.placed_weight(p, all_of_stage_1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_staged_solves_from_nothing_keep_what_the_stages_above_place(backend: str) -> None:
    # the stage below asks for all 5 cpu for itself; its floor row keeps the 4 pods of stage 0
    p = chain(45, 5)
    incumbent = Assignment.empty()
    for stage in range(p.n_stages):
        floors = evaluate.stage_weights(p, incumbent)[:stage]
        form = placement_model(p, Neighbourhood.whole(p), incumbent, floors=floors)
        result = get_backend(backend).solve(form.model, settings_for(backend), Budget.of(10))
        assert result.status.value == "optimal" and result.values is not None
        incumbent = form.assignment(result.values)
    assert sorted(incumbent.cls.tolist()) == [40, 41, 42, 43, 44]


def test_a_stage_below_a_full_node_is_skipped_without_a_solve() -> None:
    p = chain(45, 4, demand=2)  # stage 0 (4 pods of 2 cpu) fills the node with any 2 of them
    assert not stage_room_gone(p, ())
    assert stage_room_gone(p, (4 + 8,))  # the top two: nothing of stage 1 fits beside them
    assert not stage_room_gone(p, (8,))  # one pod of stage 0 leaves room for one of stage 1


@st.composite
def tiered_clusters(draw: st.DrawFn) -> tuple[Problem, list[int]]:
    """A single-resource cluster and one class per priority level (up to 200 of up to 1000 pods),
    with the lexicographic optimum of pods placed per level, highest first, computed independently:
    either one node (tier by tier, the most pods of each that fit in what the tiers above leave)
    or several nodes and pods of one cpu (the same, pooled)."""
    levels = draw(st.integers(1, 200))
    counts = draw(st.lists(st.integers(1, 1000), min_size=levels, max_size=levels))
    one_node = draw(st.booleans())
    if one_node:
        capacity = [draw(st.integers(1, 40))]
        demands = draw(st.lists(st.integers(1, 4), min_size=levels, max_size=levels))
    else:
        capacity = draw(st.lists(st.integers(1, 10), min_size=2, max_size=4))
        demands = [1] * levels
    left, optimum = sum(capacity), []
    for k, d in zip(reversed(counts), reversed(demands), strict=True):
        optimum.append(min(k, left // d))
        left -= optimum[-1] * d
    count = np.array(counts, dtype=np.int64)
    demand = np.array(demands, dtype=np.int64).reshape(levels, 1)
    cap = np.array(capacity, dtype=np.int64).reshape(len(capacity), 1)
    weight, stage = priority_weights(np.arange(levels, dtype=np.int64), count)
    starts = np.concatenate([[0], np.cumsum(count)]).tolist()
    problem = Problem(("cpu",), tuple(f"n{i}" for i in range(len(capacity))), cap, np.zeros_like(cap), demand,
                      count, weight, demand <= cap.T, tuple(tuple(range(starts[c], starts[c + 1]))
                                                            for c in range(levels)), weight_stage=stage)
    return problem, optimum


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tiered_clusters())
def test_pods_placed_per_priority_are_lexicographically_maximal_on_every_backend(
        case: tuple[Problem, list[int]]) -> None:
    """The whole solve, and the staged solves alone from an empty incumbent (the greedy answer,
    the solve's first incumbent, is often optimal already here)."""
    problem, optimum = case
    for backend in BACKENDS:
        staged_settings = settings_for(backend, STAGED_BUDGET)
        staged = Run(problem, (), staged_settings, run_budget(staged_settings), None, time.monotonic(),
                     Assignment.empty())
        assert _place_by_stage(staged, get_backend(backend), Neighbourhood.whole(problem), 1.0), backend
        for a in (solve(problem, (), staged_settings).assignment, staged.incumbent):
            assert (a.counts > 0).all() and (a.load(problem) <= problem.free).all()
            placed = a.placed_per_class(problem.n_classes)
            assert (placed <= problem.count).all()
            assert placed[::-1].tolist() == optimum, backend  # the highest priority first


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 60), st.integers(1, 3))
@example(60, 2)
def test_the_highest_preemptors_are_served_at_any_number_of_priorities(levels: int, room: int) -> None:
    """A node full of ``room`` pods of priority 0; one preemptor of each priority 1..levels: the
    ``room`` highest take their places, on every backend (one weight stage up to 41 levels)."""
    snapshot = snapshot_of(node("n1").cpu(room), *(running(f"low{k}", "n1", 1, 0) for k in range(room)),
                           *(pod(f"p{t}-0").cpu(1).priority(t) for t in range(1, levels + 1)))
    served = set(range(max(1, levels - room + 1), levels + 1))
    for backend in BACKENDS:
        assert set(placed_priorities(plan_of(snapshot, backend, preempt=True))) == served, backend
