"""The capacity rule is the kubelet's, for every resource; the GPU device model is a rule on top.

The kubelet admits a pod when, for every resource the pod requests more than zero of, the raw
requests of the node's pods add up to at most allocatable (kube-scheduler noderesources
fitsRequest, kubelet lifecycle predicate). With HAMi, ``nvidia.com/gpu`` on a node counts vGPU
slots and each pod takes its ``nvidia.com/gpu`` request of them whatever its core or memory share.
Model, greedy, pricing and verifier must agree on it; sums never wrap around int64.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.models.aggregate import aggregate, priority_weights
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.problem import Assignment
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan, pods_per_node
from kubeplace.plan.plan import Placement
from kubeplace.solver.bound import placed_weight_bound
from kubeplace.solver.budget import Budget
from kubeplace.solver.greedy import POLICIES, greedy
from kubeplace.solver.patterns import pattern_placement
from tests.builders import NodeBuilder, PodBuilder, node, pod, snapshot_of

HAMI_CORES = "nvidia.com/gpucores"
EXBIBYTE = 1 << 60


def hami_node(name: str, slots: int, devices: int | None = None) -> NodeBuilder:
    """A HAMi node: ``slots`` vGPU slots as nvidia.com/gpu; ``devices`` physical GPUs in GPU
    Feature Discovery's count label (absent: as many devices as slots)."""
    b = node(name).cpu("16").memory("64Gi").gpu(slots).allocatable(HAMI_CORES, str(100 * slots))
    return b if devices is None else b.label("nvidia.com/gpu.count", str(devices))


def hami_pod(name: str, gpus: int, cores: int) -> PodBuilder:
    return pod(name).cpu("1").gpu(gpus).request(HAMI_CORES, str(cores)).limit(HAMI_CORES, str(cores))


def planned(snap: Snapshot, backend: str = "cpsat", config: Configuration | None = None) -> object:
    config = config or Configuration()
    profile = Profile(placement_weight="gpu")
    result = make_plan(snap, config, profile, SolverSettings(backend=backend, time_limit=5, workers=1))
    assert verify_plan(snap, result.plan.placements, config, profile) == []
    return result


def greedy_placed(snap: Snapshot) -> list[int]:
    problem = aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem
    return [int(greedy(problem, policy).counts.sum()) for policy in POLICIES]


# --- defect 1: HAMi slots ------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_hami_shares_take_whole_slots(backend: str) -> None:
    # two half-GPU pods: the device model would take both on the one device, but each takes one
    # nvidia.com/gpu slot and the node has one: the kubelet admits only one
    snap = snapshot_of(hami_node("g", 1), hami_pod("a", 1, 50), hami_pod("b", 1, 50))
    plan = planned(snap, backend).plan  # type: ignore[attr-defined]
    assert plan.summary.pods_placed == 1
    assert plan.unplaced[0].reasons == ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",)
    assert greedy_placed(snap) == [1, 1, 1]


def test_hami_slots_over_devices_the_devices_bound_the_shares() -> None:
    # 10 slots on 1 device: 40% + 40% fit the device, a third 40% does not (slots would allow it)
    snap = snapshot_of(hami_node("g", 10, devices=1), *(hami_pod(f"p{i}", 1, 40) for i in range(3)))
    plan = planned(snap).plan  # type: ignore[attr-defined]
    assert plan.summary.pods_placed == 2
    assert {p.gpus for p in plan.placements} == {(0,)}
    assert plan.unplaced[0].reasons == ("0/1 nodes are available: 1 Insufficient GPU devices.",)
    assert greedy_placed(snap) == [2, 2, 2]


def test_hami_slots_over_devices_whole_gpus_take_devices() -> None:
    snap = snapshot_of(hami_node("g", 4, devices=2), *(pod(f"w{i}").cpu("1").gpu(1) for i in range(3)))
    plan = planned(snap).plan  # type: ignore[attr-defined]
    assert plan.summary.pods_placed == 2
    assert sorted(p.gpus for p in plan.placements) == [(0,), (1,)]


def test_hami_multi_device_shares_bounded_by_slots() -> None:
    # 3 slots, 2 devices: a pod of 2 x 30% takes 2 slots, so one pod only (the devices hold 3)
    snap = snapshot_of(hami_node("g", 3, devices=2), hami_pod("a", 2, 30), hami_pod("b", 2, 30))
    plan = planned(snap).plan  # type: ignore[attr-defined]
    assert plan.summary.pods_placed == 1
    assert plan.placements[0].gpus == (0, 1)
    assert greedy_placed(snap) == [1, 1, 1]


def test_column_generation_keeps_the_slot_rule() -> None:
    snap = snapshot_of(hami_node("g", 2), *(hami_pod(f"p{i}", 1, 25) for i in range(6)))
    problem = aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem
    result = pattern_placement(problem, greedy(problem), Budget.of(5))
    assert result.assignment is not None and int(result.assignment.counts.sum()) == 2
    assert result.proved_bound is None or result.proved_bound >= int(problem.weight[0]) * 2


def test_the_verifier_refuses_two_shares_on_one_slot() -> None:
    snap = snapshot_of(hami_node("g", 1), hami_pod("a", 1, 50), hami_pod("b", 1, 50))
    both = (("default", "a", "g", (0,)), ("default", "b", "g", (0,)))
    violations = verify_plan(snap, [Placement(ns, name, n, "", gpus) for ns, name, n, gpus in both],
                             Configuration(), Profile())
    assert [v.rule for v in violations] == ["NodeResourcesFit"]
    assert "Insufficient nvidia.com/gpu" in violations[0].detail


# --- defect 4: resources a pod does not request are not checked ----------------------------


def overcommitted() -> Snapshot:
    """Node n's CPU is overcommitted by a running pod (bound by another scheduler)."""
    return snapshot_of(node("n").cpu("2").memory("8Gi"),
                       pod("hog", "sys").scheduler("other").cpu("3").on("n"),
                       pod("mem-only").memory("1Gi"), pod("cpu-too").cpu("100m").memory("1Gi"))


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_a_pod_without_cpu_request_fits_a_cpu_overcommitted_node(backend: str) -> None:
    plan = planned(overcommitted(), backend).plan  # type: ignore[attr-defined]
    assert [(p.name, p.node) for p in plan.placements] == [("mem-only", "n")]
    assert plan.unplaced[0].name == "cpu-too"
    assert plan.unplaced[0].reasons == ("0/1 nodes are available: 1 Insufficient cpu.",)


def test_greedy_and_patterns_place_the_pod_without_cpu_request() -> None:
    snap = overcommitted()
    assert greedy_placed(snap) == [1, 1, 1]
    problem = aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem
    result = pattern_placement(problem, Assignment.empty(), Budget.of(5))
    assert result.assignment is not None and int(result.assignment.counts.sum()) == 1


# --- defect 2: sums never wrap --------------------------------------------------------------


def huge_snapshot() -> Snapshot:
    """Bound pods of 4 x 4Ei memory on a 7Ei node (beyond what the parser takes: typed objects)."""
    node_ = Node("big", allocatable={"cpu": 8000, "memory": 7 * EXBIBYTE, "pods": 110})
    bound = tuple(Pod("sys", f"b{i}", node_name="big", scheduler_name="other", phase="Running",
                      requests={"memory": 4 * EXBIBYTE, "pods": 1}) for i in range(4))
    pending = (Pod("default", "p", scheduler_name="kubeplace", requests={"memory": 1 << 30, "pods": 1}),)
    return Snapshot((node_,), pending, bound)


def test_usage_past_int64_is_a_full_node_not_an_empty_one() -> None:
    snap = huge_snapshot()
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1)).plan
    assert plan.placements == ()
    assert plan.unplaced[0].reasons == ("0/1 nodes are available: 1 Insufficient memory.",)
    memory = next(u for u in plan.summary.utilisation if u.resource == "memory")
    assert memory.before > 1.0
    assert greedy_placed(snap) == [0, 0, 0]


def test_request_times_count_saturates() -> None:
    snap = huge_snapshot()
    problem = aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem
    many = Assignment(np.array([0]), np.array([0]), np.array([1 << 40]))
    load = many.load(problem)
    assert (load >= 0).all() and load[0, problem.resources.index("memory")] > problem.capacity[0, 1]


def test_free_capacity_summed_over_many_nodes_does_not_wrap() -> None:
    # 1100 nodes of 2^53 - 1 bytes: their sum passes 2^63
    big = (1 << 53) - 1
    nodes = tuple(Node(f"n{i}", allocatable={"cpu": 1000, "memory": big, "pods": 110}) for i in range(1100))
    pending = tuple(Pod("default", f"p{i}", scheduler_name="kubeplace", requests={"memory": big, "pods": 1})
                    for i in range(1100))
    snap = Snapshot(nodes, pending, ())
    problem = aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem
    assert placed_weight_bound(problem) == 1100
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1)).plan
    assert plan.summary.pods_placed == 1100
    memory = next(u for u in plan.summary.utilisation if u.resource == "memory")
    assert (memory.before, memory.after) == (0.0, 1.0)


# --- every answer agrees with the verifier (the kubelet's rule and the device rule) -------


@st.composite
def mixed_clusters(draw: st.DrawFn) -> Snapshot:
    """HAMi nodes (slots over devices or not), Koordinator nodes, nodes overcommitted by running
    pods, and pods of every kind: whole GPUs, HAMi and Koordinator shares, no CPU request."""
    builders: list[object] = []
    for i in range(draw(st.integers(1, 3))):
        devices = draw(st.sampled_from((1, 2, 4)))
        slots = devices * draw(st.sampled_from((1, 1, 2, 10)))
        b = (node(f"g{i}").cpu(draw(st.sampled_from(("2", "8")))).memory("16Gi").gpu(slots)
             .allocatable(HAMI_CORES, str(100 * slots)).allocatable("koordinator.sh/gpu-core", str(100 * devices)))
        builders.append(b.label("nvidia.com/gpu.count", str(devices)) if slots != devices else b)
        if draw(st.booleans()):
            builders.append(pod(f"hog{i}", "sys").scheduler("other").cpu("9").on(f"g{i}"))
    for j in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(("whole", "hami", "koord", "memory-only")))
        b = pod(f"p{j}").memory("1Gi")
        if kind != "memory-only":
            b = b.cpu(draw(st.sampled_from(("500m", "1"))))
        if kind == "whole":
            b = b.gpu(draw(st.sampled_from((1, 2))))
        elif kind == "hami":
            cores = str(draw(st.sampled_from((20, 40, 50, 70))))
            b = b.gpu(draw(st.sampled_from((1, 2)))).request(HAMI_CORES, cores).limit(HAMI_CORES, cores)
        elif kind == "koord":
            b = b.request("koordinator.sh/gpu-core", str(draw(st.sampled_from((30, 50, 60)))))
        builders.append(b)
    return snapshot_of(*builders)  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(mixed_clusters())
def test_plans_and_greedy_answers_pass_the_verifier(snap: Snapshot) -> None:
    result = planned(snap)
    agg = result.aggregation  # type: ignore[attr-defined]
    for policy in POLICIES:
        a = greedy(agg.problem, policy)
        placements = [Placement(p.namespace, p.name, n, p.uid, gpus, count=count)
                      for p, n, gpus, count in pods_per_node(agg, a, snap.pending)]
        assert verify_plan(snap, placements, Configuration(), Profile()) == [], policy


def test_gpu_weighted_priority_tiers_do_not_wrap() -> None:
    # placementWeight gpu: an 8-GPU pod weighs 8000 milli x (pods + 1); 10000 of them below a
    # higher tier would make the strict tier weight times that pass 2^63
    base = np.full(2, 8000 * 10_002 + 1, dtype=np.int64)
    weights, stages = priority_weights(np.array([0, 1]), np.array([10_000, 1]), base)
    assert weights.tolist() == [int(base[0]), int(base[0])]  # each tier in a stage of its own,
    assert stages.tolist() == [1, 0]  # the higher one solved first: still strict
