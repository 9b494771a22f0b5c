"""bench simulate-fidelity's own spread: the simulation against itself with other latencies."""

from __future__ import annotations

from dataclasses import replace

from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.simulate.names import API_LATENCY
from kubeplace_bench import fidelity_scan
from kubeplace_bench.fidelity import (
    SPREAD_LATENCIES,
    TraceSpec,
    capacity_of,
    fidelity_trace,
    gangs_of,
    own_spread,
    simulated,
    usages,
)
from tests.simulate.sim_builders import cluster, node, trace


def test_a_departure_within_the_latencies_of_a_plan_shows_in_the_spread() -> None:
    # a (3 cpu) leaves 10 ms before b (2 cpu, of a higher priority) is planned at 10 s with the
    # default latency, and 10 ms after it with the larger ones: b fits at once in one replay, and
    # preempts a in the others, where a starts over after b and runs into the end, [15, 20]
    nodes, pods = cluster(node("n", cpu="4")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 10 - API_LATENCY - 0.01, "template": "three", "name": "a"},
        {"arrivalSeconds": 10, "durationSeconds": 5, "template": "two", "name": "b", "priority": 1000})
    reference = simulated(nodes, pods, "kubeplace", 20.0)
    spread = own_spread(nodes, pods, "kubeplace", 20.0, reference, usages(pods), capacity_of(nodes), 5.0)
    assert spread["latencies"] == list(SPREAD_LATENCIES) and spread["other_pods_bound"] == 0
    assert spread["end_points"] > 2


def test_a_trace_without_such_races_has_no_spread() -> None:
    nodes, pods = cluster(node("n", cpu="4")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 5, "template": "three", "name": "a"},
        {"arrivalSeconds": 9.8, "durationSeconds": 3, "template": "two", "name": "b"})
    reference = simulated(nodes, pods, "kubeplace", 20.0)
    spread = own_spread(nodes, pods, "kubeplace", 20.0, reference, usages(pods), capacity_of(nodes), 5.0)
    assert spread["mean_points"] < 0.05 and spread["end_points"] < 0.05


def test_scan_seeds_gives_each_trace_its_contention_and_spread() -> None:
    spec = TraceSpec(jobs=20, nodes=1)
    doc = fidelity_scan.scan(spec, range(3, 5), ("kubeplace",), lambda line: None)
    assert [row["seed"] for row in doc["seeds"]] == [3, 4]
    for row in doc["seeds"]:
        trace = fidelity_trace(replace(spec, seed=row["seed"]))
        assert row["pods"] == len(trace.arrivals) and row["gangs"] == len(gangs_of(trace)) > 0
        figures = row["schedulers"]["kubeplace"]
        assert figures["waited"] > 0  # one node for 20 jobs: some wait
        assert figures["longest_wait_seconds"] >= fidelity_scan.WAITED_SECONDS
        assert set(figures["simulation_spread"]) == {"latencies", "mean_points", "end_points", "other_pods_bound"}
    assert len(fidelity_scan.table(doc).splitlines()) == 1 + 2 + 2


def test_scan_seeds_refuses_a_bad_range() -> None:
    result = CliRunner().invoke(main, ["bench", "simulate-fidelity", "--scan-seeds", "8-3"])
    assert result.exit_code == 2 and "FIRST-LAST" in result.stderr
