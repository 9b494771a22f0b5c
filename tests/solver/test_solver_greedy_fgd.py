"""The FGD greedy: pods without GPUs keep off nodes with free GPUs; the queue-order variant;
shapes weighted by the devices they ask for keep an empty 8-GPU node for the 8-GPU shape."""

from __future__ import annotations

import numpy as np
import pytest

from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.fragmentation import popularity
from kubeplace.models.framework import Objective
from kubeplace.models.problem import Assignment, Problem
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.verify import verify
from kubeplace.solver.fragmentation_deltas import FragmentationTables
from kubeplace.solver.greedy import greedy, greedy_in_queue, queue_runs
from tests.builders import node, pod, snapshot_of


def problem_of(snap: object) -> Problem:
    return make_plan(snap, Configuration(), Profile(placement_weight="gpu"),  # type: ignore[arg-type]
                     SolverSettings(time_limit=1, workers=1)).aggregation.problem


def nodes_used(problem: Problem, a: Assignment) -> set[str]:
    return {problem.node_names[int(n)] for n in a.node[a.counts > 0]}


def checked(snap: object, problem: Problem, a: Assignment) -> Assignment:
    """The assignment, after the independent verifier accepted it."""
    placements = [(p.namespace, p.name, problem.node_names[int(n)])
                  for c, n, k in zip(a.cls, a.node, a.counts, strict=True)
                  for p in [snap.pending[m] for m in problem.members[int(c)][:int(k)]]]  # type: ignore[attr-defined]
    assert verify(snap, placements) == []  # type: ignore[arg-type]
    return a


def test_a_cpu_pod_goes_where_no_gpu_is_free() -> None:
    # best-fit would take the fuller GPU node, whose last free GPU a GPU pod could then
    # not use for want of CPU; FGD counts that as fragmentation
    snap = snapshot_of(
        node("cpu").cpu("64").memory("512Gi").pods(110),
        node("gpu").cpu("8").memory("8Gi").pods(110).gpu(8),
        pod("busy", "sys").scheduler("x").cpu("6").memory("6Gi").gpu(7).on("gpu"),
        pod("web").cpu("1").memory("1Gi"))
    problem = problem_of(snap)
    assert nodes_used(problem, greedy(problem, "best-fit")) == {"gpu"}
    assert nodes_used(problem, checked(snap, problem, greedy(problem, "frag-greedy"))) == {"cpu"}


def test_queue_order_is_priority_then_creation() -> None:
    snap = snapshot_of(
        node("g").cpu("8").memory("8Gi").pods(110).gpu(2),
        pod("late-big").cpu("1").gpu(2).created("2026-01-02T00:00:00Z"),
        pod("early").cpu("1").gpu(1).created("2026-01-01T00:00:00Z"),
        pod("urgent").cpu("1").gpu(1).created("2026-01-03T00:00:00Z").priority(1000))
    problem = problem_of(snap)
    names = [snap.pending[problem.members[c][0]].name for c, _ in queue_runs(problem)]  # type: ignore[attr-defined]
    assert names == ["urgent", "early", "late-big"]


def _three_arrivals() -> object:
    """A 2-GPU node and three arrivals: 1 GPU, then 2 GPUs, then 1 GPU."""
    return snapshot_of(
        node("g").cpu("8").memory("8Gi").pods(110).gpu(2),
        pod("early").cpu("1").gpu(1).created("2026-01-01T00:00:00Z"),
        pod("late").cpu("1").gpu(2).created("2026-01-02T00:00:00Z"),
        pod("later").cpu("1").gpu(1).created("2026-01-03T00:00:00Z"))


def test_queue_order_places_the_earlier_arrival() -> None:
    # room for the 2-GPU pod or the 1-GPU one: largest first takes the later, bigger pod;
    # the queue takes the pod that arrived first, as a one-at-a-time scheduler would
    snap = _three_arrivals()
    problem = problem_of(snap)

    def placed(a: Assignment) -> list[str]:
        return sorted(snap.pending[m].name for c, k in zip(a.cls, a.counts, strict=True)  # type: ignore[attr-defined]
                      for m in problem.members[int(c)][:int(k)])
    assert placed(greedy(problem, "frag-greedy")) == ["late"]
    in_queue = checked(snap, problem, greedy_in_queue(problem, "frag-greedy"))
    assert placed(in_queue) == ["early", "later"]
    assert int(np.sum(in_queue.counts)) == 2


def test_a_small_gpu_batch_starts_from_the_queue_order_fgd() -> None:
    # largest first (every other greedy) places the later 2-GPU pod alone; the queue places
    # both 1-GPU pods, so its placement is the one the solver starts from
    snap = _three_arrivals()
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=1, workers=1)).plan  # type: ignore[arg-type]
    assert plan.steps[0] == "greedy (frag-greedy, queue order)"
    assert sorted(p.name for p in plan.placements) == ["early", "later"]


def _last_big_node() -> object:
    """One empty 8-GPU node ("big") and one with two free GPUs but CPU for only one more
    typical pod ("b"); the workload: twenty-two 1-GPU pods and one 8-GPU pod. Counted by
    pods the 8-GPU shape is 4% of the workload, below FGD's 95% cut, so the 1-GPU pod costs
    nothing on "big" and strands b's last GPU; counted by devices it is 27%, and taking
    "big" strands its other seven GPUs for it."""
    farm = [pod(f"r{k}", "sys").scheduler("x").cpu("4").memory("1Gi").gpu(1).on("farm") for k in range(20)]
    return snapshot_of(
        node("big").cpu("64").memory("64Gi").pods(110).gpu(8),
        node("b").cpu("10").memory("64Gi").pods(110).gpu(3),
        node("farm").cpu("80").memory("64Gi").pods(110).gpu(20),
        node("eight").cpu("8").memory("64Gi").pods(110).gpu(8),
        *farm,
        pod("on-b", "sys").scheduler("x").cpu("4").memory("1Gi").gpu(1).on("b"),
        pod("big-job", "sys").scheduler("x").cpu("8").memory("1Gi").gpu(8).on("eight"),
        pod("new").cpu("4").memory("1Gi").gpu(1))


def test_popularity_by_devices_counts_a_pod_once_per_device() -> None:
    pods, devices = np.array([22, 1, 5]), np.array([1, 8, 0])
    assert popularity(pods, devices, by_devices=False).tolist() == [22 / 28, 1 / 28, 5 / 28]
    assert popularity(pods, devices, by_devices=True).tolist() == [22 / 35, 8 / 35, 5 / 35]


def test_fgd_keeps_the_empty_8_gpu_node_for_the_8_gpu_shape() -> None:
    snap = _last_big_node()
    problem = problem_of(snap)
    assert nodes_used(problem, checked(snap, problem, greedy_in_queue(problem, "frag-greedy"))) == {"b"}
    assert nodes_used(problem, checked(snap, problem, greedy(problem, "frag-greedy"))) == {"b"}


def test_the_defrag_profile_keeps_the_empty_8_gpu_node() -> None:
    # spread takes "big"; the candidates are ranked by fragmentation with device weights
    plan = make_plan(_last_big_node(), Configuration(),  # type: ignore[arg-type]
                     Profile(objective=Objective.DEFRAG, placement_weight="gpu"),
                     SolverSettings(time_limit=1, workers=1)).plan
    assert [(p.name, p.node) for p in plan.placements] == [("new", "b")]


def test_the_tabulated_fgd_weighs_shapes_by_devices() -> None:
    # large batches use the tables: a node left with 7 free devices strands them for the
    # 8-GPU shape, weighted 8 of the 30 device requests (22 one-GPU pods, one 8-GPU pod)
    tables = FragmentationTables.of(problem_of(_last_big_node()))
    assert tables.whole[7] == pytest.approx(7000 * 8 / 30)
    assert tables.whole[8] == 0


def test_a_share_of_several_devices_gets_them_all() -> None:
    # HAMi: 2 devices with 20% each; FGD scores one device per share, the pod needs two
    snap = snapshot_of(node("g").cpu("8").memory("8Gi").gpu(2).allocatable("nvidia.com/gpucores", "200"),
                       pod("p").cpu("1").gpu(2).request("nvidia.com/gpucores", "20"))
    problem = problem_of(snap)
    a = greedy(problem, "frag-greedy")
    assert sorted(a.devices.device.tolist()) == [0, 1] and a.devices.counts.tolist() == [1, 1]


def test_queue_order_runs_every_copy_of_a_stand_in() -> None:
    """A JobSet leader's three followers are one stand-in object: the queue runs its class
    three times, so the queue-order greedy places the whole gang (leader and followers)."""
    from tests.models.test_model_followers import job, jobset_leader, racks

    snap = snapshot_of(*racks(big="5"), job("train", 4), jobset_leader("train"))
    problem = problem_of(snap)
    assert sum(n for _, n in queue_runs(problem)) == int(problem.count.sum()) == 4
    in_queue = greedy_in_queue(problem, "frag-greedy")
    assert int(np.sum(in_queue.counts)) == 4
