"""The measures on cases small enough to compute by hand."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.simulate.measures import Delays, Sample, gang_waits, mean_allocation, placement_digest
from kubeplace.simulate.trace import parse_trace
from kubeplace.simulate.world import PodRecord
from tests.simulate.sim_builders import SETUP, cluster, node, replay, trace, trace_doc


def test_allocation_is_a_time_weighted_mean_and_delays_count_the_wait() -> None:
    # one 4-cpu node: a (2 cpu) runs [0, 100); b (1 cpu) runs [50, 100); c (3 cpu) arrives at 60 and
    # waits for a and b to leave: it runs [100, 200).
    result = replay(cluster(node("n", cpu="4", memory="16Gi")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 100, "template": "two", "name": "a"},
        {"arrivalSeconds": 50, "durationSeconds": 50, "template": "one", "name": "b"},
        {"arrivalSeconds": 60, "durationSeconds": 100, "template": "three", "name": "c"}), "best-fit", SETUP)
    s = result.summary
    assert s.end == 200
    # cpu: 0.5 for 50 s, 0.75 for 50 s, 0.75 for 100 s -> (25 + 37.5 + 75) / 200
    assert s.mean_allocation["cpu"] == pytest.approx((0.5 * 50 + 0.75 * 50 + 0.75 * 100) / 200)
    assert s.mean_allocation["memory"] == pytest.approx((1 / 16 * 50 + 2 / 16 * 50 + 1 / 16 * 100) / 200)  # 1Gi each
    assert s.final_allocation["cpu"] == 0.0 and s.peak_pending_pods == 1
    assert s.delay == Delays(3, 0.0, pytest.approx(32.0), pytest.approx(39.2), pytest.approx(40 / 3))
    assert s.delay_by_size == {"no GPU": s.delay}
    assert [(x.at, x.pending_pods) for x in result.samples] == [(0, 0), (50, 0), (60, 1), (100, 0), (200, 0)]


def test_delay_percentiles_and_gang_wait_by_hand() -> None:
    assert Delays.of([0, 10, 20, 30]) == Delays(4, 15.0, pytest.approx(27.0), pytest.approx(29.7), 15.0)
    assert Delays.of([]) == Delays(0, 0.0, 0.0, 0.0, 0.0)
    records = [PodRecord("d/g-0", 10, None, 0, 0, "g", start=30), PodRecord("d/g-1", 12, None, 0, 0, "g", start=35),
               PodRecord("d/h-0", 0, None, 0, 0, "h", start=None), PodRecord("d/x", 0, None, 0, 0, start=1)]
    assert gang_waits(records) == [35 - 12]  # the gang h never started whole: no wait measured


def test_mean_allocation_of_a_step_function() -> None:
    samples = [Sample(0, 0.0, 0.0, 0.0, 0, 0.0), Sample(10, 1.0, 0.5, 0.25, 0, 0.0)]
    assert mean_allocation(samples, 40) == pytest.approx({"cpu": 30 / 40, "memory": 15 / 40, "gpu": 7.5 / 40})


def test_the_placement_digest_is_of_the_sorted_bindings() -> None:
    assert placement_digest([("d/a", "n1"), ("d/b", "n2")]) == placement_digest([("d/b", "n2"), ("d/a", "n1")])
    assert placement_digest([("d/a", "n1"), ("d/b", "n2")]) != placement_digest([("d/a", "n2"), ("d/b", "n1")])
    # two nodes: a (3 cpu) then b (3 cpu); every scheduler binds each to a node of its own, and a
    # replay run again gives the same digest
    nodes = cluster(node("n1", cpu="4"), node("n2", cpu="4"))
    items = ({"arrivalSeconds": 0, "durationSeconds": 100, "template": "three", "name": "a"},
             {"arrivalSeconds": 1, "durationSeconds": 100, "template": "three", "name": "b"})
    first = replay(nodes, trace(*items), "best-fit", SETUP).summary.digest
    assert first == replay(nodes, trace(*items), "best-fit", SETUP).summary.digest
    bound = {r.key: r.node for r in replay(nodes, trace(*items), "best-fit", SETUP).pods}
    assert first == placement_digest(list(bound.items())) and len(set(bound.values())) == 2


def gpu_template(gpus: int = 0, share: int = 0) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": "1", "memory": "1Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    if share:
        requests |= {"koordinator.sh/gpu-core": str(share), "koordinator.sh/gpu-memory-ratio": str(share)}
    return {"spec": {"containers": [{"name": "main", "resources": {"requests": requests}}]}}


def test_gpu_fragmentation_over_time_by_hand() -> None:
    # one node with 2 GPUs; the workload: a (1 GPU) and b (2 GPUs), half each. a runs [0, 100); b
    # waits for it and runs [100, 150). While a runs, b's shape cannot use the free GPU: 0.5 x 1000
    # milli of the 1000 free are fragmented (a's shape fits: nothing); with b running nothing is free.
    doc = trace_doc({"arrivalSeconds": 0, "durationSeconds": 100, "template": "one-gpu", "name": "a"},
                    {"arrivalSeconds": 10, "durationSeconds": 50, "template": "two-gpus", "name": "b"},
                    templates={"one-gpu": gpu_template(1), "two-gpus": gpu_template(2)})
    result = replay(cluster(node("n", cpu="4", gpus=2)), parse_trace(doc, "test"), "best-fit", SETUP)
    assert [(s.at, s.fragmented_gpus, s.fragmentation) for s in result.samples] == [
        (0, 0.5, 0.5), (10, 0.5, 0.5), (100, 0.0, 0.0), (150, 0.0, 0.0)]
    assert result.summary.fragmentation == pytest.approx({"mean": 0.5 * 100 / 150, "end": 0.0})


def test_gpu_fragmentation_counts_the_free_share_of_a_device() -> None:
    # one node with 2 GPUs; the workload: a 30% share s (2 pods) and w (2 whole GPUs), by pods 2/3
    # and 1/3. s-0 and s-1 run [0, 100) on one device (best fit: 400 milli left) and w waits: 1400
    # milli are free, all of them unusable to w's shape, none to s's -> 1/3 x 1400 of 1400. Then w
    # runs [100, 110) and nothing is free.
    doc = trace_doc({"arrivalSeconds": 0, "durationSeconds": 100, "template": "share", "name": "s", "count": 2},
                    {"arrivalSeconds": 0, "durationSeconds": 10, "template": "two-gpus", "name": "w"},
                    templates={"share": gpu_template(share=30), "two-gpus": gpu_template(2)})
    gpu_node = node("n", cpu="8", gpus=2)
    for shared in ("koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio"):
        gpu_node["status"]["allocatable"][shared] = gpu_node["status"]["capacity"][shared] = "200"
    result = replay(cluster(gpu_node), parse_trace(doc, "test"), "best-fit", SETUP)
    assert [(s.at, s.fragmented_gpus, s.fragmentation) for s in result.samples] == [
        (0, pytest.approx(1.4 / 3), pytest.approx(1 / 3)), (100, 0.0, 0.0), (110, 0.0, 0.0)]
