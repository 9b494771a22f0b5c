"""The arithmetic of ``kubeplace bench throughput`` (bench/kubeplace_bench/throughput_measure.py) and its workloads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubeplace_bench.commands_throughput import table
from kubeplace_bench.throughput_measure import (
    PodTrack,
    Tracker,
    device_conflicts,
    gang_figures,
    gpu_figures,
    memory_growth,
    percentile,
    pod_figures,
    top_reasons,
)
from kubeplace_bench.throughput_workloads import GANG_LABEL, MIN_MEMBER, build, gangs_of, gpu_milli


def pod(name: str, node: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}}


def test_tracker_keeps_first_creation_and_binding_and_counts_a_second_node() -> None:
    t = Tracker()
    t.observe("ADDED", pod("a"), 1.0)
    t.observe("MODIFIED", pod("a"), 1.5)  # a status change: still pending
    t.observe("MODIFIED", pod("a", "n1"), 2.0)
    t.observe("MODIFIED", pod("a", "n1"), 3.0)  # kwok marks it Running: not a new binding
    t.observe("ADDED", pod("b"), 1.2)
    t.observe("DELETED", pod("b"), 4.0)
    t.observe("DELETED", pod("ghost"), 4.0)  # never seen created: ignored
    tracks = t.snapshot()
    assert tracks["a"] == PodTrack(created=1.0, bound=2.0, node="n1")
    assert tracks["b"].bound is None and tracks["b"].deleted == 4.0
    assert "ghost" not in tracks
    assert t.last_bound == 2.0 and t.count() == 2 and t.count(bound=False) == 1 and t.bound_now() == ["a"]
    t.observe("MODIFIED", pod("a", "n2"), 5.0)
    assert t.snapshot()["a"].rebound == 1 and t.snapshot()["a"].bound == 2.0


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(10, 0, -1)]
    assert [percentile(values, q) for q in (0.5, 0.9, 0.99, 1.0)] == [5.0, 9.0, 10.0, 10.0]
    assert percentile([], 0.5) == 0.0
    assert percentile([7.0], 0.01) == 7.0


def test_backlog_counts_from_the_scheduler_start_and_arrivals_from_creation() -> None:
    tracks = {"a": PodTrack(created=0.0, bound=12.0), "b": PodTrack(created=1.0, bound=14.0),
              "c": PodTrack(created=2.0), "d": PodTrack(created=2.0, deleted=3.0)}
    backlog = pod_figures(tracks, start=10.0)  # created before the scheduler was launched at 10
    assert backlog["pods_bound"] == 2 and backlog["pending"] == 1
    assert backlog["seconds_to_last_bound"] == 4.0 and backlog["seconds_to_first_bound"] == 2.0
    assert backlog["pods_per_second"] == 0.5
    assert backlog["latency_seconds"] == {"p50": 2.0, "p90": 4.0, "p99": 4.0, "max": 4.0}
    arrivals = pod_figures(tracks, start=0.0)
    assert arrivals["seconds_to_last_bound"] == 14.0
    assert arrivals["latency_seconds"]["p50"] == 12.0 and arrivals["latency_seconds"]["max"] == 13.0
    assert pod_figures({}, start=0.0)["pods_per_second"] == 0.0


def test_gangs_whole_partly_and_unbound() -> None:
    tracks = {"w1": PodTrack(0.0, 3.0), "w2": PodTrack(1.0, 5.0),  # gang w: whole, latency 5 - 0
              "p1": PodTrack(0.0, 2.0), "p2": PodTrack(0.0),  # gang p: one of two bound
              "u1": PodTrack(0.0)}  # gang u: nothing bound; gang x: no member created yet
    gang_of = {"w1": "w", "w2": "w", "p1": "p", "p2": "p", "u1": "u"}
    out = gang_figures(tracks, gang_of, {"w": 2, "p": 2, "u": 1, "x": 3}, start=0.0)
    assert (out["gangs"], out["gangs_whole"], out["gangs_partly"], out["gangs_unbound"]) == (4, 1, 1, 2)
    assert out["gang_latency_seconds"]["max"] == 5.0 and out["gang_bind_spread_seconds"]["max"] == 2.0


def test_gpus_bound_memory_growth_and_reasons() -> None:
    tracks = {"whole": PodTrack(0.0, 1.0), "share": PodTrack(0.0, 1.0), "cpu": PodTrack(0.0, 1.0),
              "left": PodTrack(0.0)}
    assert gpu_figures(tracks, {"whole": 2000, "share": 250, "cpu": 0, "left": 1000}) == {
        "gpus_bound": 2.25, "gpu_pods_bound": 2}
    samples = [(100.0, 50.0), (130.0, 80.0), (161.0, 90.0), (300.0, 92.5)]
    assert memory_growth(samples, 60.0) == {"rss_mib_after_warmup": 90.0, "rss_mib_end": 92.5,
                                            "rss_growth_mib": 2.5, "rss_growth_second_half_mib": 0.0,
                                            "rss_mib_by_period": [50.0, 90.0, 92.5, 92.5]}
    assert memory_growth([], 60.0) == {}
    assert top_reasons({"a": "x", "b": "y", "c": "y", "d": "z"}, limit=2) == {"y": 2, "x": 1}


def test_workloads_are_what_their_names_say() -> None:
    basic = build("basic", nodes=10, pods=30)
    assert basic.backlog and basic.pods == 30 and len(basic.nodes) == 10
    requests = basic.arrivals[0].pod["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": "100m", "memory": "500Mi"}
    gangs = build("gangs", nodes=10, pods=200, seed=3, arrival_seconds=20)
    assert not gangs.backlog and gangs.pods >= 200
    assert all(3 <= size <= 8 for size in gangs.gangs.values())
    members = gangs_of(gangs.arrivals)
    assert len(members) == gangs.pods and set(members.values()) == set(gangs.gangs)
    first = gangs.arrivals[0].pod["metadata"]
    assert first["annotations"][MIN_MEMBER] == str(gangs.gangs[first["labels"][GANG_LABEL]])
    assert gangs.arrivals[-1].at < 20 and [a.at for a in gangs.arrivals] == sorted(a.at for a in gangs.arrivals)
    gpu = build("gpu", nodes=20, pods=0, seed=1)
    milli = [gpu_milli(a.pod) for a in gpu.arrivals]
    assert any(0 < m < 1000 for m in milli) and any(m >= 1000 for m in milli) and 0 in milli
    with pytest.raises(ValueError, match="unknown workload"):
        build("nope", nodes=1, pods=1)


def test_table_has_a_row_per_scheduler_and_the_gang_line() -> None:
    figures = {"pods_bound": 10, "pending": 0, "pods_per_second": 5.0, "seconds_to_first_bound": 0.5,
               "seconds_to_last_bound": 2.0, "latency_seconds": {"p50": 1, "p90": 1.5, "p99": 2, "max": 2},
               "cpu_seconds": 1.0, "peak_mib": 100.0, "gangs": 2, "gangs_whole": 2, "gangs_partly": 0,
               "gang_latency_seconds": {"p99": 1.5}, "gang_bind_spread_seconds": {"p99": 0.2},
               "pending_reasons": {}}
    text = table({"gangs": {"kubeplace": figures, "kube-scheduler": figures}}, ["a note"])
    assert text.count("gangs  ") >= 2 and "gangs whole 2/2, partly 0" in text and text.endswith("a note")


def test_device_conflicts_count_gpu_pods_no_device_holds() -> None:
    # n1: 2 devices; a whole GPU and three 60% shares: the whole one takes a device, one share
    # the other, two shares fit nowhere (the node's totals, 2000 milli asked of 2000, looked fine)
    # n2: 1 device; two 50% shares fit on it
    placed = {"n1": [(1, 600), (1, 1000), (1, 600), (1, 600)], "n2": [(1, 500), (1, 500)]}
    assert device_conflicts(placed, {"n1": 2, "n2": 1}) == (2, 1200)
    assert device_conflicts({"n3": [(2, 1000)]}, {"n3": 1}) == (1, 2000)
    assert device_conflicts({}, {}) == (0, 0)


def test_devices_over_committed_by_their_annotations_are_counted() -> None:
    from kubeplace_bench.throughput_measure import overcommitted_by_annotation

    def bound(name: str, node: str, *minors_percent: tuple[int, int]) -> dict[str, object]:
        gpu = [{"minor": m, "resources": {"koordinator.sh/gpu-core": str(p), "koordinator.sh/gpu-memory-ratio": str(p)}}
               for m, p in minors_percent]
        return {"metadata": {"name": name, "annotations": {
            "scheduling.koordinator.sh/device-allocated": json.dumps({"gpu": gpu})}}, "spec": {"nodeName": node}}

    pods = [bound("a", "n1", (0, 60)), bound("b", "n1", (0, 50)), bound("c", "n1", (1, 100)),
            bound("d", "n2", (0, 60)), {"metadata": {"name": "e"}, "spec": {"nodeName": "n1"}}]
    assert overcommitted_by_annotation(pods) == (4, 2)
