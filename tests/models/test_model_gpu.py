"""GPU devices: request conventions, devices in use, per-device packing, device choice."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.kube.gpu_conventions import GpuConventions
from kubeplace.kube.objects import Pod
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.gpu import (
    DEVICE_ALLOCATED,
    DeviceTable,
    GpuNeed,
    GpuRequestError,
    device_annotation,
    first_fit,
    first_fit_rows,
    gpu_need,
)
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.verify import verify
from kubeplace.plan.verify_gpu import verify_devices
from kubeplace.solver.greedy import greedy
from tests.builders import NodeBuilder, node, pod, snapshot_of

CONV = GpuConventions()
EXAMPLES = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("requests", "need"), [
    ({}, GpuNeed()),
    ({"nvidia.com/gpu": 2}, GpuNeed(2, 1000)),
    ({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30}, GpuNeed(1, 300)),  # HAMi
    ({"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 25, "nvidia.com/gpucores": 10}, GpuNeed(2, 250)),
    ({"koordinator.sh/gpu-core": 47, "koordinator.sh/gpu-memory-ratio": 47}, GpuNeed(1, 470)),  # Koordinator
    ({"koordinator.sh/gpu-core": 200}, GpuNeed(2, 1000)),
    ({"koordinator.sh/gpu-memory-ratio": 60, "koordinator.sh/gpu-core": 20}, GpuNeed(1, 600)),
])
def test_request_conventions(requests: dict[str, int], need: GpuNeed) -> None:
    assert gpu_need(requests, CONV) == need


def test_share_over_one_gpu_must_be_whole_gpus() -> None:
    with pytest.raises(GpuRequestError, match="multiple of 100"):
        gpu_need({"koordinator.sh/gpu-core": 150}, CONV)


def test_invalid_share_is_left_to_the_default_scheduler() -> None:
    snap = snapshot_of(node("g").cpu("8").memory("8Gi").gpu(2), pod("odd").request("koordinator.sh/gpu-core", "150"))
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=2, workers=1)).plan
    assert plan.placements == () and plan.unplaced[0].left_to_default_scheduler
    assert "multiple of 100" in plan.unplaced[0].reasons[0]


def test_devices_in_use_from_annotation_then_first_fit() -> None:
    snap = snapshot_of(
        node("g").cpu("8").memory("8Gi").gpu(3),
        pod("a", "sys").scheduler("x").request("koordinator.sh/gpu-core", "50")
        .annotation(DEVICE_ALLOCATED, device_annotation((2,), GpuNeed(1, 500))).on("g"),
        pod("b", "sys").scheduler("x").request("koordinator.sh/gpu-core", "70").on("g"),
        pod("c", "sys").scheduler("x").gpu(1).on("g"),
    )
    table = DeviceTable.build(snap.nodes, snap.bound, CONV)
    assert table.free.tolist() == [[300, 0, 500]]  # b first-fit on 0, c whole on 1, a annotated on 2


def test_a_pod_changed_since_is_read_again_not_from_the_memo() -> None:
    # the device holding is remembered per pod object: the same pod re-annotated (a new object, as
    # the informer makes one for every change) must hold its new device, not the remembered one
    snap = snapshot_of(node("g").cpu("8").memory("8Gi").gpu(3),
                       pod("a", "sys").scheduler("x").request("koordinator.sh/gpu-core", "50")
                       .annotation(DEVICE_ALLOCATED, device_annotation((2,), GpuNeed(1, 500))).on("g"))
    assert DeviceTable.build(snap.nodes, snap.bound, CONV).free.tolist() == [[1000, 1000, 500]]
    moved = dataclasses.replace(snap.bound[0], annotations={DEVICE_ALLOCATED: device_annotation((0,), GpuNeed(1, 500))})
    assert DeviceTable.build(snap.nodes, [moved], CONV).free.tolist() == [[500, 1000, 1000]]
    assert DeviceTable.build(snap.nodes, snap.bound, CONV).free.tolist() == [[1000, 1000, 500]]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from([-1, 0, 100, 300, 500, 700, 1000]), min_size=4, max_size=4), min_size=1,
                max_size=6), st.integers(0, 5), st.sampled_from([100, 300, 500, 1000]))
def test_first_fit_on_every_row_at_once_picks_as_first_fit_does(rows: list[list[int]], count: int, milli: int) -> None:
    free = np.array(rows, dtype=np.int64)
    need = GpuNeed(count, milli)
    picked = first_fit_rows(free, need)
    assert [sorted(np.nonzero(row)[0].tolist()) for row in picked] == [sorted(first_fit(f, need)) for f in free]


def test_annotation_format_is_koordinators() -> None:
    doc = json.loads(device_annotation((0, 3), GpuNeed(2, 1000)))
    assert doc == {"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "100",
                                                      "koordinator.sh/gpu-memory-ratio": "100"}},
                           {"minor": 3, "resources": {"koordinator.sh/gpu-core": "100",
                                                      "koordinator.sh/gpu-memory-ratio": "100"}}]}


def gpu_node(name: str, gpus: int, cpu: str = "8", memory: str = "8Gi") -> NodeBuilder:
    """A node advertising its GPUs as Koordinator does (devices and share resources)."""
    return (node(name).cpu(cpu).memory(memory).pods(110).gpu(gpus)
            .allocatable("koordinator.sh/gpu-core", str(100 * gpus))
            .allocatable("koordinator.sh/gpu-memory-ratio", str(100 * gpus)))


def share(name: str, percent: int) -> object:
    return pod(name).cpu("1").request("koordinator.sh/gpu-core", str(percent))


def plan_of(snap: object, backend: str = "cpsat") -> object:
    return make_plan(snap, Configuration(), Profile(placement_weight="gpu"),  # type: ignore[arg-type]
                     SolverSettings(backend=backend, time_limit=5, workers=1)).plan


@pytest.mark.parametrize("backend", ["cpsat", "cbc", "highs"])
def test_shares_are_packed_per_device_exactly(backend: str) -> None:
    # 60+40 and 60+40 fill two devices; node-level GPU capacity alone would also allow
    # 60+60 on one device, which no device can hold.
    snap = snapshot_of(gpu_node("g", 2),
                       share("a", 60), share("b", 60), share("c", 40), share("d", 40))
    plan = plan_of(snap, backend)
    assert plan.summary.pods_placed == 4  # type: ignore[attr-defined]
    by_device: dict[int, int] = {}
    for p in plan.placements:  # type: ignore[attr-defined]
        (dev,) = p.gpus
        by_device[dev] = by_device.get(dev, 0) + {"a": 60, "b": 60, "c": 40, "d": 40}[p.name]
    assert sorted(by_device.values()) == [100, 100]


def test_a_share_cannot_straddle_devices() -> None:
    # 0.7 free in total, but 0.35 + 0.35 on two devices: a 0.5 share fits nowhere
    snap = snapshot_of(gpu_node("g", 2),
                       pod("u0", "sys").scheduler("x").request("koordinator.sh/gpu-core", "65").on("g"),
                       pod("u1", "sys").scheduler("x").request("koordinator.sh/gpu-core", "65").on("g"),
                       share("half", 50))
    plan = plan_of(snap)
    assert plan.summary.pods_placed == 0  # type: ignore[attr-defined]
    assert "Insufficient" in plan.unplaced[0].reasons[0] or "0/1" in plan.unplaced[0].reasons[0]  # type: ignore[attr-defined]


def test_whole_gpus_take_free_devices_only() -> None:
    snap = snapshot_of(gpu_node("g", 2),
                       pod("s", "sys").scheduler("x").request("koordinator.sh/gpu-core", "10").on("g"),
                       pod("two").cpu("1").gpu(2), pod("one").cpu("1").gpu(1))
    plan = plan_of(snap)
    assert [(p.name, p.gpus) for p in plan.placements] == [("one", (1,))]  # type: ignore[attr-defined]


@st.composite
def gpu_clusters(draw: st.DrawFn) -> object:
    nodes = [gpu_node(f"g{i}", draw(st.sampled_from((1, 2, 4))), "16", "64Gi") for i in range(draw(st.integers(1, 3)))]
    shares = draw(st.lists(st.sampled_from((10, 25, 30, 47, 50, 60, 81, 100, 200)), min_size=1, max_size=9))
    pods = []
    for j, s in enumerate(shares):
        b = pod(f"p{j}").cpu(draw(st.sampled_from(("1", "2", "4"))))
        pods.append(b.gpu(s // 100) if s >= 100 else b.request("koordinator.sh/gpu-core", str(s)))
    return snapshot_of(*nodes, *pods)


@EXAMPLES
@given(gpu_clusters())
def test_random_gpu_plans_verify_and_beat_greedy(snap: object) -> None:
    planned = make_plan(snap, Configuration(), Profile(placement_weight="gpu"),  # type: ignore[arg-type]
                        SolverSettings(time_limit=5, workers=1))
    placements = planned.plan.placements
    assert verify(snap, [(p.namespace, p.name, p.node) for p in placements]) == []  # type: ignore[arg-type]
    assert verify_devices(snap, [(p.namespace, p.name, p.node, p.gpus) for p in placements]) == []  # type: ignore[arg-type]
    problem = planned.aggregation.problem
    for policy in ("best-fit", "spread", "frag-greedy"):
        g = greedy(problem, policy)
        assert planned.report.placed_weight >= int((problem.weight[g.cls] * g.counts).sum())


def test_verifier_catches_a_bad_device_choice() -> None:
    snap = snapshot_of(gpu_node("g", 1), share("a", 60), share("b", 60))
    bad = [("default", "a", "g", (0,)), ("default", "b", "g", (0,))]
    problems = verify_devices(snap, bad)
    assert [v.rule for v in problems] == ["GPUDevices"] and "has 400 milli-GPU free" in problems[0].detail
    assert verify_devices(snap, [("default", "a", "g", (1,))])[0].detail.startswith("device 1 does not exist")
    assert "needs 1 distinct" in verify_devices(snap, [("default", "a", "g", ())])[0].detail


def test_plugins_do_not_import_solver_libraries() -> None:
    import sys

    for name in [m for m in sys.modules if m.startswith(("ortools", "pulp", "highspy"))]:
        del sys.modules[name]
    snap = snapshot_of(node("n").cpu("1"), pod("p").cpu("1"))
    instantiate(Configuration(), Profile(), snap)
    assert not [m for m in sys.modules if m.startswith(("ortools", "pulp", "highspy"))]
    _ = Pod
    _ = np


def test_a_node_must_advertise_the_share_resource() -> None:
    snap = snapshot_of(node("plain").cpu("8").memory("8Gi").pods(110).gpu(1), share("a", 50))
    plan = plan_of(snap)
    assert plan.summary.pods_placed == 0  # type: ignore[attr-defined]
    assert "Insufficient koordinator.sh/gpu-core" in plan.unplaced[0].reasons[0]  # type: ignore[attr-defined]
