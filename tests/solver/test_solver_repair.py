"""Gangs left out: ruin and recreate places them, the steered greedy keeps CPU pods off GPU
nodes, and a gang already partly placed is completed, not placed twice."""

from __future__ import annotations

import numpy as np

from kubeplace.kube.objects import Snapshot
from kubeplace.models import evaluate
from kubeplace.models.aggregate import Aggregation, aggregate
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.problem import Assignment, Problem
from kubeplace.plan.pipeline import pods_per_node
from kubeplace.plan.verify import verify
from kubeplace.solver.greedy import BEST_FIT, SPREAD, greedy
from kubeplace.solver.repair import repair
from kubeplace.solver.state import PlacementState
from kubeplace_bench.gangs import feasible_workload, run_kubeplace
from tests.builders import PodBuilder, node, pod, snapshot_of


def member(name: str, gang: str, size: int) -> PodBuilder:
    return pod(name).label("kubeplace.io/gang", gang).annotation("kubeplace.io/gang-min-member", str(size))


def cpu_and_gpu_gangs() -> Snapshot:
    """Eight 2-cpu pods (gang "cpu") and two 4-cpu, 2-GPU pods (gang "gpu") on one 8-cpu node
    and two 8-cpu nodes with 4 GPUs: the CPU gang is larger, so the greedy places it
    first, and spread leaves no GPU node with 4 cpu free twice over; yet both fit."""
    return snapshot_of(node("cpu").cpu("8").memory("64Gi"),
                       node("gpu-a").cpu("8").memory("64Gi").gpu(4), node("gpu-b").cpu("8").memory("64Gi").gpu(4),
                       *[member(f"c{i}", "cpu", 8).cpu("2").memory("1Gi") for i in range(8)],
                       *[member(f"g{i}", "gpu", 2).cpu("4").memory("1Gi").gpu(2) for i in range(2)])


def aggregation(snap: Snapshot) -> Aggregation:
    return aggregate(snap, instantiate(Configuration(), Profile(), snap))


def gangs_placed(problem: Problem, a: Assignment) -> list[str]:
    placed = a.placed_per_class(problem.n_classes)
    return [str(g.key) for g in problem.gangs if placed[list(g.classes)].sum() >= g.still_needed]


def assert_valid(snap: Snapshot, agg: Aggregation, a: Assignment) -> None:
    pods = pods_per_node(agg, a, snap.pending)
    assert verify(snap, [(p.namespace, p.name, node, count) for p, node, _, count in pods]) == []


def test_repair_places_the_gang_the_greedy_left_out() -> None:
    snap = cpu_and_gpu_gangs()
    agg = aggregation(snap)
    p = agg.problem
    start = greedy(p, SPREAD)
    assert gangs_placed(p, start) == ["default/cpu"]
    total = int((p.weight * p.count).sum())
    found = repair(p, start, total, np.random.default_rng(0), max_rounds=50, out_of_time=lambda: False)
    assert evaluate.placed_weight(p, found.assignment) == total
    assert sorted(gangs_placed(p, found.assignment)) == ["default/cpu", "default/gpu"]
    assert_valid(snap, agg, found.assignment)


def test_repair_keeps_to_its_budget_when_a_gang_fits_nowhere() -> None:
    snap = snapshot_of(node("n").cpu("4").memory("8Gi"), *[member(f"w{i}", "big", 3).cpu("2") for i in range(3)],
                       pod("solo").cpu("1"))
    p = aggregation(snap).problem
    start = greedy(p, BEST_FIT)
    found = repair(p, start, int(p.count.sum()), np.random.default_rng(0), max_rounds=200, out_of_time=lambda: False)
    assert found.rounds == 200 and gangs_placed(p, found.assignment) == []
    assert evaluate.pods_placed(found.assignment) == 1  # never worse than the start
    calls = iter(range(10**6))
    timed = repair(p, start, int(p.count.sum()), np.random.default_rng(0), max_rounds=10**6,
                   out_of_time=lambda: next(calls) >= 3)
    assert timed.rounds <= 3


def test_steered_greedy_keeps_cpu_pods_off_gpu_nodes() -> None:
    snap = snapshot_of(node("cpu").cpu("4").memory("8Gi"), node("gpu").cpu("16").memory("64Gi").gpu(8),
                       pod("web").cpu("1").memory("1Gi"), pod("train").cpu("1").memory("1Gi").gpu(1))
    p = aggregation(snap).problem
    web = next(c for c in range(p.n_classes) if p.demand[c, p.resource_index("nvidia.com/gpu")] == 0)

    def node_of_web(a: Assignment) -> str:
        (i,) = a.node[a.cls == web]
        return p.node_names[i]
    assert node_of_web(greedy(p, SPREAD)) == "gpu"  # the emptier node
    for policy in (BEST_FIT, SPREAD):
        assert node_of_web(greedy(p, policy, steer=True)) == "cpu"


def test_a_gang_partly_placed_is_completed_not_placed_again() -> None:
    snap = snapshot_of(node("n").cpu("16").memory("16Gi"),
                       *[member(f"w{i}", "job", 2).cpu("1").memory("1Gi") for i in range(3)])
    p = aggregation(snap).problem
    (c,) = p.gangs[0].classes
    state = PlacementState.start(p, Assignment(np.array([c]), np.array([0]), np.array([2])))
    a = greedy(p, BEST_FIT, [c], state)
    assert a.placed_per_class(p.n_classes).tolist() == [3]


def test_every_gang_of_a_feasible_benchmark_workload_is_placed() -> None:
    # 85 gangs of 2-64 pods (CPU, memory and GPU heavy) packed onto 100 nodes by the
    # generator, so all of them fit at once. The greedy and LNS alone placed 74 of them.
    w = feasible_workload(2, nodes=100)
    outcome = run_kubeplace(w, SolverSettings(time_limit=2, workers=1))
    assert outcome.gangs_placed == len(w.gangs) == 85 and outcome.pods_placed == w.pods
    assert outcome.detail["violations"] == 0
