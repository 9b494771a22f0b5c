"""serve plans a GPU backlog batch after batch: a batch's GPU pods are packed onto devices
(the FGD placement over the balance objective's spread) so that the whole devices a later
batch's pods need are still there."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

import pytest

from kubeplace.kube.objects import Pod, Snapshot
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.models.gpu import device_notes
from kubeplace.plan.pipeline import Planned, make_plan
from kubeplace.serve.settings import ServeSettings, cycle_options
from tests.builders import PodBuilder, node, pod, snapshot_of

CONFIG = Configuration()


def plan_cycle(snapshot: Snapshot, backend: str, pack: bool) -> Planned:
    options = cycle_options(SolverSettings(backend=backend, time_limit=5, workers=1), ServeSettings(),
                            len(snapshot.pending))
    planned = make_plan(snapshot, CONFIG, CONFIG.profiles[0], replace(options, pack_devices=pack))
    assert planned.violations == () and planned.plan.summary.verified
    return planned


def bound_by(snapshot: Snapshot, planned: Planned) -> list[Pod]:
    """The pending pods as the watch shows them once bound, device annotation included."""
    by_name = {p.name: p for p in snapshot.pending}
    return [replace(by_name[p.name], node_name=p.node,
                    annotations={**by_name[p.name].annotations,
                                 **device_notes(p.gpus, by_name[p.name].requests, CONFIG.gpu)})
            for p in planned.plan.placements]


def two_batches(backend: str, pack: bool) -> tuple[Planned, Planned]:
    """Two 8-GPU nodes; batch 1: two 1-GPU pods; batch 2: one 8-GPU pod."""
    nodes = [node(n).cpu("64").memory("256Gi").pods(110).gpu(8) for n in ("a", "b")]
    first = snapshot_of(*nodes, pod("one-gpu-0").cpu("1").memory("1Gi").gpu(1),
                        pod("one-gpu-1").cpu("1").memory("1Gi").gpu(1))
    planned = plan_cycle(first, backend, pack)
    second = snapshot_of(*nodes, pod("eight-gpus").cpu("8").memory("8Gi").gpu(8))
    second = replace(second, bound=tuple(bound_by(first, planned)))
    return planned, plan_cycle(second, backend, pack)


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_a_batch_packs_its_gpu_pods_so_the_next_batch_finds_a_whole_node(backend: str) -> None:
    first, second = two_batches(backend, pack=True)
    assert len({p.node for p in first.plan.placements}) == 1
    assert [p.name for p in second.plan.placements] == ["eight-gpus"]


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_without_packing_the_balance_spread_strands_the_eight_gpu_pod(backend: str) -> None:
    first, second = two_batches(backend, pack=False)
    assert len({p.node for p in first.plan.placements}) == 2
    assert second.plan.placements == ()


def test_serve_cycles_pack_devices() -> None:
    assert cycle_options(SolverSettings(), ServeSettings(), 10).pack_devices


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_a_large_batch_weighs_the_cpu_a_gpu_pod_leaves(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # GPUs alone tell the nodes apart by nothing, and the tie goes to the fuller node: "thin",
    # whose CPU the first pod would take whole, stranding its 7 other GPUs. The whole-node
    # measure (CPU included) keeps both pods on "wide", even in a batch above EXACT_FGD_PODS.
    monkeypatch.setattr("kubeplace.solver.placers.EXACT_FGD_PODS", 0)
    snapshot = snapshot_of(node("thin").cpu("8").memory("64Gi").pods(110).gpu(8),
                           node("wide").cpu("64").memory("64Gi").pods(110).gpu(8),
                           *(pod(f"p{i}").cpu("8").memory("1Gi").gpu(1) for i in range(2)))
    planned = plan_cycle(snapshot, backend, pack=True)
    assert {p.node for p in planned.plan.placements} == {"wide"}


def test_a_binding_not_yet_seen_holds_the_devices_it_took(monkeypatch: pytest.MonkeyPatch) -> None:
    # "r" holds 30% of device 1; "first" (40%) goes to the fuller device, 1. Until the watch shows
    # first's annotation, a first-fit guess would put it on device 0 and leave device 1 room
    # for "second" (70%): 140% of a device. The assumption carries the devices the binding took.
    from kubeplace.kube.gpu_conventions import KOORD_CORE, KOORD_MEMORY
    from kubeplace.models.gpu import DEVICE_ALLOCATED, allocated_devices
    from tests.serve.fakes import FakeCluster
    from tests.serve.test_serve_loop import next_cycle, scheduler

    notes: dict[str, dict[str, str]] = {}

    class Recording(FakeCluster):
        def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
                 annotations: Mapping[str, str] | None = None) -> None:
            super().bind(namespace, name, uid, node, dry_run, annotations)
            notes[name] = dict(annotations or {})

    def share(name: str, percent: int) -> PodBuilder:
        return pod(name).cpu("1").memory("1Gi").request(KOORD_CORE, percent).request(KOORD_MEMORY, percent)

    held = json.dumps({"gpu": [{"minor": 1, "resources": {KOORD_CORE: "30", KOORD_MEMORY: "30"}}]})
    gpu_node = (node("a").cpu("8").memory("8Gi").pods(110).gpu(2)
                .allocatable(KOORD_CORE, 200).allocatable(KOORD_MEMORY, 200))
    s, _ = scheduler(gpu_node, share("r", 30).annotation(DEVICE_ALLOCATED, held).on("a"), share("first", 40),
                     cluster=Recording())
    next_cycle(s)
    s.store.apply("pods", "ADDED", share("second", 70).manifest())
    s.queue.add("default/second")
    next_cycle(s)
    load = {0: 0, 1: 300}
    for name in ("first", "second"):
        for device, milli in allocated_devices(replace(Pod("default", name), annotations=notes[name])) or []:
            load[device] += milli
    assert sorted(notes) == ["first", "second"] and max(load.values()) <= 1000, load
