"""Profile options that change what "best" means: placementWeight gpu, the defrag profile,
and the guided greedy that follows the node-kind model."""

from __future__ import annotations

from typing import Any

from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.evaluate import pods_placed
from kubeplace.models.framework import Objective
from kubeplace.models.gpu import DEVICE_ALLOCATED, GpuNeed, device_annotation
from kubeplace.models.plugins.balance import BalanceArgs, ResourceWeight
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.solver.budget import Budget, CountedClock
from kubeplace.solver.greedy import guided
from kubeplace.solver.guided import kind_quotas
from tests.builders import NodeBuilder, node, pod, snapshot_of

OPTIONS = SolverSettings(time_limit=5, workers=1)


def gpu_node(name: str, gpus: int, cpu: str = "8") -> NodeBuilder:
    return (node(name).cpu(cpu).memory("32Gi").pods(110).gpu(gpus)
            .allocatable("koordinator.sh/gpu-core", str(100 * gpus))
            .allocatable("koordinator.sh/gpu-memory-ratio", str(100 * gpus)))


def plan(snap: Any, profile: Profile) -> Any:
    config = Configuration(profiles=(profile,))
    result = make_plan(snap, config, profile, OPTIONS).plan
    assert verify_plan(snap, result.placements, config, profile) == []
    return result


def test_gpu_placement_weight_prefers_the_gpu_pod() -> None:
    # room for 2 cpu: either two 1-cpu pods or one 2-cpu GPU pod
    snap = snapshot_of(gpu_node("g", 1, cpu="2"), pod("a").cpu("1"), pod("b").cpu("1"), pod("t").cpu("2").gpu(1))
    assert {p.name for p in plan(snap, Profile()).placements} == {"a", "b"}
    assert {p.name for p in plan(snap, Profile(placement_weight="gpu")).placements} == {"t"}


def test_defrag_keeps_whole_gpus_free_where_balance_spreads() -> None:
    half = device_annotation((0,), GpuNeed(1, 500))
    snap = snapshot_of(
        gpu_node("a", 2), gpu_node("b", 2), gpu_node("c", 2),
        pod("s0", "sys").scheduler("x").request("koordinator.sh/gpu-core", "50")
        .annotation(DEVICE_ALLOCATED, half).on("a"),
        pod("big", "sys").scheduler("x").gpu(2).on("c"),  # the workload also runs 2-GPU pods
        pod("new").cpu("1").request("koordinator.sh/gpu-core", "50"),
    )
    (defrag,) = plan(snap, Profile(objective=Objective.DEFRAG)).placements
    assert (defrag.node, defrag.gpus) == ("a", (0,))  # b keeps both GPUs whole
    # balance counts requests over allocatable as the kubelet does: Koordinator's shares are
    # koordinator.sh/gpu-core (they request no nvidia.com/gpu), so that is the resource to balance
    shares = BalanceArgs((ResourceWeight("cpu"), ResourceWeight("koordinator.sh/gpu-core")))
    (spread,) = plan(snap, Profile(objective=Objective.BALANCE, plugin_args={"Balance": shares})).placements
    assert spread.node == "b"


def test_guided_greedy_follows_kind_quotas_and_places_everything_that_fits() -> None:
    snap = snapshot_of(
        node("cpu-rich").cpu("16").memory("8Gi"), node("mem-rich").cpu("2").memory("64Gi"),
        *[pod(f"c{i}").cpu("4").memory("1Gi") for i in range(3)],
        *[pod(f"m{i}").cpu("500m").memory("16Gi") for i in range(3)],
    )
    plugins = instantiate(Configuration(), Profile(), snap)
    problem = aggregate(snap, plugins).problem
    quotas = kind_quotas(problem, Budget(0.0, 5, CountedClock()))
    assert quotas is not None and int(quotas[0].sum()) == 6
    assert pods_placed(guided(problem, *quotas)) == 6


def test_the_packed_guided_greedy_keeps_each_kind_s_room_for_the_classes_its_quotas_name() -> None:
    # 16 GPUs for three 4-GPU pods and eight 1-GPU pods (one priority): at most 10 pods, two
    # 4-GPU ones and every 1-GPU one. Spread over the kinds' nodes, or placed beyond their quota
    # before the 1-GPU pods had theirs, the 4-GPU pods take the room of four 1-GPU pods each.
    snap = snapshot_of(
        node("a4").cpu("32").memory("128Gi").gpu(4), node("b4").cpu("32").memory("128Gi").gpu(4),
        node("c8").cpu("64").memory("256Gi").gpu(8),
        *[pod(f"four{i}").cpu("1").memory("1Gi").gpu(4) for i in range(3)],
        *[pod(f"one{i}").cpu("1").memory("1Gi").gpu(1) for i in range(8)],
    )
    plugins = instantiate(Configuration(), Profile(), snap)
    problem = aggregate(snap, plugins).problem
    quotas = kind_quotas(problem, Budget(0.0, 5, CountedClock()))
    assert quotas is not None and int(quotas[0].sum()) == 10
    assert pods_placed(guided(problem, *quotas)) == 7
    assert pods_placed(guided(problem, *quotas, packed=True)) == 10
