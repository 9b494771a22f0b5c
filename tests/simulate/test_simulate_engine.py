"""The replay in simulated time: arrivals, batches, departures and gangs, per scheduler."""

from __future__ import annotations

import time

import numpy as np
import pytest

from kubeplace.kube.objects import Snapshot
from kubeplace.models.aggregate import Aggregation
from kubeplace.models.framework import PluginSet
from kubeplace.models.problem import Assignment
from kubeplace.simulate.engine import Result, simulate
from kubeplace.simulate.names import API_LATENCY, SCHEDULERS
from kubeplace.simulate.schedulers import PLACERS
from kubeplace.simulate.world import World
from tests.simulate.sim_builders import SETUP, cluster, node, replay, trace

LEAST = SETUP.serve.batch_window_min
"""How much later kubeplace's pods start than they arrive when they come alone: serve's adaptive
batch window stays open that long for the pods a client creates together."""


def starts(result: Result) -> dict[str, float | None]:
    return {r.key.split("/")[1]: r.start for r in result.pods}


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_pod_waits_for_the_room_a_departure_frees(scheduler: str) -> None:
    # a (2 cpu) runs [0, 100); b (3 cpu) arrives at 5 and fits on the 4-cpu node only once a left.
    result = replay(cluster(node("n", cpu="4")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 100, "template": "two", "name": "a"},
        {"arrivalSeconds": 5, "durationSeconds": 50, "template": "three", "name": "b"}), scheduler, SETUP)
    lag = LEAST if scheduler == "kubeplace" else 0.0
    assert starts(result) == pytest.approx({"a": 0.0 + lag, "b": 100.0 + 2 * lag})
    ends = {r.key.split("/")[1]: r.end for r in result.pods}
    assert ends == pytest.approx({"a": 100.0 + lag, "b": 150.0 + 2 * lag})
    assert result.summary.end == pytest.approx(150.0 + 2 * lag)
    assert result.summary.refused == 0 and result.summary.never_started == 0


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_the_api_latency_delays_each_start_and_so_each_departure(scheduler: str) -> None:
    # as test_a_pod_waits_for_the_room_a_departure_frees, each binding counted API_LATENCY later
    result = simulate(cluster(node("n", cpu="4")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 100, "template": "two", "name": "a"},
        {"arrivalSeconds": 5, "durationSeconds": 50, "template": "three", "name": "b"}), scheduler, SETUP)
    lag = (LEAST if scheduler == "kubeplace" else 0.0) + API_LATENCY
    assert starts(result) == pytest.approx({"a": lag, "b": 100.0 + 2 * lag})
    assert {r.key.split("/")[1]: r.end for r in result.pods} == pytest.approx({"a": 100.0 + lag, "b": 150.0 + 2 * lag})


def test_a_departure_just_after_a_plan_lands_after_it_with_the_latency() -> None:
    # a (3 cpu) is bound at LEAST and runs 9.99 s: without the latency it leaves at 9.99 + LEAST,
    # before b (2 cpu, alone: planned at 10 + LEAST), and b fits; with it a leaves 0.03 s after b's
    # plan, as a binding landing tens of milliseconds late does live, so b's first plan finds the
    # node full: a's departure moves b to the backoff queue and the idle queue plans it at once
    # (SchedulerPopFromBackoffQ), not when its backoff (1 s) is over.
    cluster_, trace_ = cluster(node("n", cpu="4")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 9.99, "template": "three", "name": "a"},
        {"arrivalSeconds": 10.0, "durationSeconds": 5, "template": "two", "name": "b"})
    result = replay(cluster_, trace_, "kubeplace", SETUP)
    assert starts(result)["b"] == pytest.approx(10.0 + LEAST) and result.summary.cycles == 2
    result = simulate(cluster_, trace_, "kubeplace", SETUP)
    a_left = LEAST + API_LATENCY + 9.99
    assert starts(result)["b"] == pytest.approx(a_left + API_LATENCY) and result.summary.cycles == 3


def test_a_pod_whose_run_ends_at_an_instant_is_still_there_for_what_happens_then() -> None:
    # live, a binding lands a little after the instant it was decided, and its pod's run ends
    # that little after the binding instant plus its duration: what arrives or is planned at
    # that instant still sees the pod. a (3 cpu) runs [LEAST, 10 + LEAST); b (2 cpu) arrives at
    # 10, its batch closes at 10 + LEAST while a is there: it is unschedulable, and a's departure
    # then moves it to the backoff queue, which the idle queue plans at once
    # (SchedulerPopFromBackoffQ): b's second cycle, at the same instant, places it.
    result = replay(cluster(node("n", cpu="4")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 10, "template": "three", "name": "a"},
        {"arrivalSeconds": 10, "durationSeconds": 5, "template": "two", "name": "b"}), "kubeplace", SETUP)
    assert starts(result) == pytest.approx({"a": LEAST, "b": 10.0 + LEAST}) and result.summary.cycles == 3
    # best fit: a (3 cpu) on the tight n1; b (2 cpu) arrives as a leaves and sees n1 still full.
    result = replay(cluster(node("n1", cpu="4"), node("n2", cpu="8")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 10, "template": "three", "name": "a"},
        {"arrivalSeconds": 10, "durationSeconds": 5, "template": "two", "name": "b"}), "best-fit", SETUP)
    assert {r.key.split("/")[1]: r.node for r in result.pods} == {"a": "n1", "b": "n2"}


def test_a_unit_backing_off_comes_back_after_the_batch_that_closes_when_its_backoff_ends() -> None:
    # live a cycle's outcomes come a few milliseconds after its batch closed, so the backoff of a
    # unit it could not place ends just after the batch that closes whole seconds later. b
    # (3 cpu) fails at 1 + LEAST while a runs and backs off 1 s; c (1 cpu) arrives at 2, its batch
    # closes at 2 + LEAST without b (whose return would hold it open one unit's window longer).
    result = replay(cluster(node("n", cpu="4")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 100, "template": "two", "name": "a"},
        {"arrivalSeconds": 1, "durationSeconds": 5, "template": "three", "name": "b"},
        {"arrivalSeconds": 2, "durationSeconds": 5, "template": "one", "name": "c"}), "kubeplace", SETUP)
    assert starts(result)["c"] == pytest.approx(2.0 + LEAST, abs=1e-6)


def test_simulated_time_does_not_sleep() -> None:
    # a day of simulated time with a pod every hour takes a few seconds of wall time at most.
    items = [{"arrivalSeconds": 3600 * k, "durationSeconds": 1800, "template": "one", "name": f"p{k}"}
             for k in range(24)]
    started = time.monotonic()
    result = replay(cluster(node("n")), trace(*items), "kubeplace", SETUP)
    assert time.monotonic() - started < 60
    assert result.summary.end == pytest.approx(23 * 3600 + LEAST + 1800)
    assert result.summary.started == 24 and result.summary.delay.p99 == pytest.approx(LEAST)


def test_kubeplace_starts_a_gang_whole_once_it_fits() -> None:
    # the gang of three 1-cpu pods fits only when the 3-cpu pod leaves at 100: none starts before.
    result = replay(cluster(node("n", cpu="4")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 100, "template": "three", "name": "big"},
        {"arrivalSeconds": 10, "durationSeconds": 30, "template": "one", "name": "g", "count": 3,
         "gang": {"name": "g", "minMember": 3}}), "kubeplace", SETUP)
    gang = [r for r in result.pods if r.gang == "g"]
    assert len(gang) == 3
    assert len({r.start for r in gang}) == 1
    assert gang[0].start == pytest.approx(100.0 + 2 * LEAST)  # big left at 100 + LEAST; requeued: LEAST more
    assert result.summary.gang_wait.pods == 1
    assert result.summary.gang_wait.p50 == pytest.approx(gang[0].start - 10.0)


def test_the_kube_scheduler_binds_the_gang_members_that_fit_one_by_one() -> None:
    # the kube-scheduler's default profile knows no gang marks: two of the three members fit at
    # 10 and start then, the third when they leave at 40.
    result = replay(cluster(node("n", cpu="5")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 100, "template": "three", "name": "big"},
        {"arrivalSeconds": 10, "durationSeconds": 30, "template": "one", "name": "g", "count": 3,
         "gang": {"name": "g", "minMember": 3}}), "kube-scheduler", SETUP)
    starts = sorted(r.start for r in result.pods if r.gang == "g" and r.start is not None)
    assert starts == [10.0, 10.0, 40.0]
    assert result.summary.refused == 0


def test_kubeplace_preempts_for_a_higher_priority_pod_and_the_victim_comes_back() -> None:
    result = replay(cluster(node("n", cpu="4")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 1000, "template": "three", "name": "low", "priority": 0},
        {"arrivalSeconds": 10, "durationSeconds": 100, "template": "three", "name": "high", "priority": 1000}),
        "kubeplace", SETUP)
    by_name = {r.key.split("/")[1]: r for r in result.pods}
    assert result.summary.preemptions == 1 and by_name["low"].preempted == 1
    assert by_name["high"].start is not None and by_name["high"].start < 1000
    assert by_name["low"].end is not None and by_name["low"].end > by_name["high"].start + 1000


def test_ctrl_c_ends_the_replay_with_what_it_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    happen = World.happen

    def interrupted_at_50(self: World, until: float, departures: bool = True) -> int:
        if until >= 50:
            raise KeyboardInterrupt
        return happen(self, until, departures)

    monkeypatch.setattr(World, "happen", interrupted_at_50)
    result = replay(cluster(node("n")), trace(
        *({"arrivalSeconds": 10 * k, "durationSeconds": 5, "template": "one", "name": f"p{k}"} for k in range(10))),
        "best-fit", SETUP)
    assert result.summary.interrupted and result.summary.end == 50
    assert result.summary.started == 5 and result.summary.pods == 5  # p0..p4 arrived, p5 at 50 did not


def test_a_placement_the_verifier_refuses_is_never_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    def too_big(snapshot: Snapshot, agg: Aggregation, plugins: PluginSet) -> Assignment:
        y = np.zeros((agg.problem.n_classes, agg.problem.n_nodes), dtype=np.int64)
        y[0, 0] = 1  # a 3-cpu pod on the 2-cpu node
        return Assignment.from_dense(y)

    monkeypatch.setitem(PLACERS, "best-fit", lambda _world, _setup: too_big)
    result = replay(cluster(node("small", cpu="2")), trace(
        {"arrivalSeconds": 0, "durationSeconds": 5, "template": "three", "name": "a"}), "best-fit", SETUP)
    assert result.summary.refused == 1 and result.summary.started == 0
    assert [r.node for r in result.pods] == [""]
