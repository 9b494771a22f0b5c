"""What keeps ``serve`` fast: bindings in parallel, a budget that follows the batch and stops when
everything is placed, Events off the binding path, and decision logs without repeats."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kubeplace.kube.objects import Pod
from kubeplace.models.config import SolverSettings
from kubeplace.serve.events import EventRecorder, TokenBucket
from kubeplace.serve.settings import ServeSettings, cycle_options
from tests.builders import node, pod
from tests.serve.fakes import Clock, FakeCluster
from tests.serve.test_serve_loop import bound, next_cycle, scheduler

REPO = Path(__file__).resolve().parents[2]


class SlowBinds(FakeCluster):
    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
             annotations: Mapping[str, str] | None = None) -> None:
        time.sleep(self.seconds)
        with self._lock:
            super().bind(namespace, name, uid, node, dry_run, annotations)


def test_a_batch_is_bound_in_parallel_each_pod_once() -> None:
    cluster = SlowBinds(0.02)
    s, _ = scheduler(node("a").cpu("64").memory("64Gi"), *(pod(f"p{i:02d}").cpu("1") for i in range(40)),
                     cluster=cluster)
    started = time.monotonic()
    report = next_cycle(s)
    binding = time.monotonic() - started - report.seconds_plan
    assert binding < 40 * 0.02 / 2, binding  # one at a time would take 0.8 s
    assert len(report.bound) == 40 and len(cluster.bindings) == 40 == len(set(bound(cluster)))
    assert s.metrics.value("kubeplace_pods_bound_total") == 40 and s.queue.counts() == (0, 0)


def test_the_budget_grows_with_the_batch_and_the_solve_stops_when_placed() -> None:
    settings = ServeSettings(budget_base=0.5, budget_per_pod=0.002)
    small = cycle_options(SolverSettings(time_limit=10), settings, 10)
    large = cycle_options(SolverSettings(time_limit=10), settings, 100_000)
    assert small.time_limit == pytest.approx(0.52) and large.time_limit == 10 and small.stop_when_placed
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"), *(pod(f"p{i}").cpu("1") for i in range(3)))
    report = next_cycle(s)
    assert len(report.bound) == 3 and report.seconds_solve < 0.5


def test_an_unchanged_decision_is_counted_not_logged_again(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    s, _ = scheduler(node("a").cpu("1").memory("8Gi"), pod("big").cpu("2"), clock=clock)
    with caplog.at_level(logging.INFO, logger="kubeplace.serve"):
        next_cycle(s)
        clock.advance(330)  # (no event helps it: planned again at the flush five minutes after, every 30 s)
        next_cycle(s)
    decisions = [r for r in caplog.records if r.getMessage() == "decision"]
    cycles = [r.fields for r in caplog.records if r.getMessage() == "cycle"]  # type: ignore[attr-defined]
    assert len(decisions) == 1 and decisions[0].fields["outcome"] == "unschedulable"  # type: ignore[attr-defined]
    assert [c["repeated_decisions_not_logged"] for c in cycles] == [0, 1]
    assert cycles[0]["unplaced"] == 1 and cycles[0]["pods"] == 1


class Blocking(FakeCluster):
    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        self.gate.wait(5)
        super().create_event(namespace, event)


def test_events_are_sent_off_the_binding_path_and_dropped_when_the_queue_is_full() -> None:
    cluster = Blocking()
    recorder = EventRecorder(cluster, asynchronous=True, queue_size=2)
    pods = [Pod(name=f"p{i}", namespace="default", uid=f"u{i}") for i in range(5)]
    started = time.monotonic()
    sent = [recorder.pod_event(p, "Scheduled", "assigned") for p in pods]
    assert time.monotonic() - started < 1  # none waited for the API server
    assert recorder.dropped >= 2 and sent.count(False) == recorder.dropped
    cluster.gate.set()
    recorder.close()
    assert len(cluster.events) == 5 - recorder.dropped


def test_the_token_bucket_keeps_the_rate_after_the_burst() -> None:
    clock = Clock(0.0)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)

    bucket = TokenBucket(10.0, 3, clock=clock, sleep=sleep)
    for _ in range(5):
        bucket.take()
    assert slept == [pytest.approx(0.1), pytest.approx(0.1)] and clock.now == pytest.approx(0.2)
    clock.advance(10)
    bucket.take()
    assert len(slept) == 2  # saved up again, at most the burst


def counted_calls(monkeypatch: pytest.MonkeyPatch, real: Any, *where: tuple[Any, str]) -> list[int]:
    """Replaces ``real`` by a wrapper at each (module, name) in ``where``; the list grows by one a call."""
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    for module, name in where:
        monkeypatch.setattr(module, name, counted, raising=False)
    return calls


def test_a_cycle_runs_the_verifier_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubeplace.plan import pipeline
    from kubeplace.serve import loop

    calls = counted_calls(monkeypatch, pipeline.verify_plan, (pipeline, "verify_plan"),
                          (loop, "verify_plan"))  # (where it used to run again)
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"), *(pod(f"p{i}").cpu("1") for i in range(3)))
    next_cycle(s)
    assert len(calls) == 1 and len(cluster.bindings) == 3


def test_a_cycle_builds_the_plugins_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubeplace.plan import checks, pipeline

    built = counted_calls(monkeypatch, pipeline.instantiate, (pipeline, "instantiate"),
                          (checks, "instantiate"))  # (the verifier's checks reuse the plan's plugins)
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"), *(pod(f"p{i}").cpu("1") for i in range(3)))
    next_cycle(s)
    assert len(built) == 1 and len(cluster.bindings) == 3


def test_the_next_batch_is_planned_while_the_last_one_binds_and_holds_its_capacity() -> None:
    cluster = SlowBinds(0.2)
    s, _ = scheduler(node("a").cpu("3").memory("8Gi"), cluster=cluster)
    s.settings = ServeSettings(batch_window=0, batch_size=2, bind_workers=1, initial_backoff=30)
    s.queue.initial = 30
    planned_at: list[float] = []
    plan = s._plan_cycle

    def timed(units: Any) -> Any:
        planned_at.append(time.monotonic())
        return plan(units)

    s._plan_cycle = timed  # type: ignore[method-assign]
    for name in ("p0", "p1"):
        s.store.apply("pods", "ADDED", pod(name).cpu("1").manifest())
        s.on_change("pods", "ADDED", None, s.store.get("pods", f"default/{name}"))
    runner = threading.Thread(target=s.run)
    runner.start()
    time.sleep(0.1)  # p0 and p1 planned; p0 binding
    for name in ("p2", "p3"):
        s.store.apply("pods", "ADDED", pod(name).cpu("1").manifest())
        s.on_change("pods", "ADDED", None, s.store.get("pods", f"default/{name}"))
    deadline = time.monotonic() + 5
    while len(cluster.bindings) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    s.stop_event.set()
    runner.join(5)
    assert len(planned_at) == 2 and planned_at[1] - planned_at[0] < 0.35  # before p0 and p1 were both bound
    assert len(cluster.bindings) == 3  # p0 and p1 held their cpu while in flight: only one of p2, p3 fits
    assert s.queue.counts()[1] == 1


def test_the_bindings_kept_for_inspection_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubeplace.serve import loop

    monkeypatch.setattr(loop, "RESULTS_KEPT", 2)
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"), *(pod(f"p{i}").cpu("1") for i in range(5)))
    next_cycle(s)
    assert len(cluster.bindings) == 5 and 2 <= len(s.results) < 4


def test_the_warm_up_plans_nothing_real_and_never_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"), pod("p").cpu("1"))
    s.warm_up()
    assert cluster.bindings == [] and cluster.events == [] and s.queue.counts() == (1, 0)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no solver")

    monkeypatch.setattr("kubeplace.serve.loop.make_plan", broken)
    s.warm_up()  # logged, not raised


WARM_THEN_LEAVE_A_POD_OUT = """
import sys
from kubeplace.kube.objects import Snapshot
from kubeplace.plan.pipeline import make_plan
from kubeplace.serve.settings import cycle_options
from tests.builders import node, pod
from tests.serve.test_serve_loop import scheduler

s, _ = scheduler(node("a").cpu("1").memory("1Gi"))
s.warm_up()
loaded = set(sys.modules)
snapshot = Snapshot(nodes=(node("b").cpu("4").memory("4Gi").build(),),
                    pending=tuple(pod(f"p{i}").cpu("3").build() for i in range(2)), bound=())
plan = make_plan(snapshot, s.config, s.profile, cycle_options(s.solver, s.settings, 2)).plan
assert len(plan.placements) == 1 and len(plan.unplaced) == 1, plan
print(sorted(set(sys.modules) - loaded))
"""


def test_the_warm_up_loads_what_a_cycle_that_leaves_a_pod_out_needs() -> None:
    # a cycle that cannot place every pod solves past the greedy answer (the bound, the exact
    # backends); the first such cycle must not pay for loading them (0.3-1 s), so the warm-up
    # goes that way too. A fresh process: the tests before have loaded everything already.
    done = subprocess.run([sys.executable, "-c", WARM_THEN_LEAVE_A_POD_OUT], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_queued_warnings_are_sent_before_queued_scheduled_events() -> None:
    cluster = Blocking()
    recorder = EventRecorder(cluster, asynchronous=True)
    first = Pod(name="first", namespace="default", uid="u0")
    recorder.pod_event(first, "Scheduled", "assigned")  # taken by the sender, which then waits on the gate
    time.sleep(0.1)
    for i in range(3):
        recorder.pod_event(Pod(name=f"bound{i}", namespace="default", uid=f"b{i}"), "Scheduled", "assigned")
    recorder.pod_event(Pod(name="waits", namespace="default", uid="w"), "FailedScheduling", "0/1 nodes", "Warning")
    cluster.gate.set()
    recorder.close()
    assert [e["involvedObject"]["name"] for e in cluster.events] == ["first", "waits", "bound0", "bound1", "bound2"]


def test_the_events_remembered_against_repeats_are_only_the_recent_ones() -> None:
    clock = Clock()
    recorder = EventRecorder(FakeCluster(), repeat_after=60.0, clock=clock)
    first = Pod(name="p0", namespace="default", uid="u0")
    assert recorder.pod_event(first, "FailedScheduling", "0/1 nodes", "Warning")
    assert not recorder.pod_event(first, "FailedScheduling", "0/1 nodes", "Warning")  # a repeat: held back
    for i in range(1, 1000):  # an hour of churn: a pod bound every few seconds
        clock.advance(3.6)
        recorder.pod_event(Pod(name=f"p{i}", namespace="default", uid=f"u{i}"), "Scheduled", "assigned")
    assert recorder.remembered() <= 60 / 3.6 + 1  # the last minute's, not every pod's since the start
    assert recorder.pod_event(first, "FailedScheduling", "0/1 nodes", "Warning")  # a minute later: sent again


def test_freed_memory_is_handed_back_at_most_once_per_period() -> None:
    from kubeplace.serve.memory import Trimmer, limit_arenas

    clock, trims = Clock(), []
    trimmer = Trimmer(every=30.0, clock=clock, trim=lambda: trims.append(clock()))
    for _ in range(100):  # a loop turning every 0.2 s for 20 s
        trimmer.maybe()
        clock.advance(0.2)
    assert trims == []
    for _ in range(300):  # and 60 s more
        trimmer.maybe()
        clock.advance(0.2)
    assert len(trims) == 2 and trims[1] - trims[0] >= 30.0
    assert limit_arenas() in (True, False)  # glibc or not: never an error
    Trimmer(every=0.0).maybe()  # the real malloc_trim (or nothing without glibc)


def test_after_a_cycle_whose_bindings_all_answered_the_next_binds_at_full_width_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kubeplace.kube import binder
    from kubeplace.serve import loop

    widths: list[int] = []
    real = binder.bind_concurrently

    def recorded(*args: Any, first: int = 1, **kwargs: Any) -> Any:
        widths.append(first)
        return real(*args, first=first, **kwargs)

    monkeypatch.setattr(loop, "bind_concurrently", recorded)
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"), pod("p0").cpu("1"))
    next_cycle(s)
    s.store.apply("pods", "ADDED", pod("p1").cpu("1").manifest())
    s.on_change("pods", "ADDED", None, s.store.get("pods", "default/p1"))
    next_cycle(s)
    assert widths == [1, s.settings.bind_workers] and len(cluster.bindings) == 2


class BlockedBinds(FakeCluster):
    """The binding of ``blocked`` hangs until ``release`` is set (an API server slow for one pod)."""

    def __init__(self, blocked: str) -> None:
        super().__init__()
        self.blocked, self.release, self.hanging = blocked, threading.Event(), threading.Event()

    def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
             annotations: Mapping[str, str] | None = None) -> None:
        if name == self.blocked:
            self.hanging.set()
            self.release.wait(10)
        with self._lock:
            super().bind(namespace, name, uid, node, dry_run, annotations)


def test_a_binding_in_flight_never_holds_back_the_next_cycle_and_counts_as_usage() -> None:
    """The next cycle waited for the last cycle's bindings before its own could start: one slow
    binding held every later pod back. Now only the capacity it takes is held (assumed)."""
    cluster = BlockedBinds("p0")
    s, _ = scheduler(node("a").cpu("2").memory("8Gi"), node("b").cpu("2").memory("8Gi"), cluster=cluster)
    s.settings = ServeSettings(batch_window=0, batch_window_per_unit=0, bind_workers=4)
    s.store.apply("pods", "ADDED", pod("p0").cpu("1500m").manifest())
    s.on_change("pods", "ADDED", None, s.store.get("pods", "default/p0"))
    runner = threading.Thread(target=s.run)
    runner.start()
    try:
        assert cluster.hanging.wait(5)
        for name in ("p1", "p2"):  # one cycle each, both while p0's binding hangs
            s.store.apply("pods", "ADDED", pod(name).cpu("1500m").manifest())
            s.on_change("pods", "ADDED", None, s.store.get("pods", f"default/{name}"))
            deadline = time.monotonic() + 5
            while len(cluster.bindings) < int(name[1]) and time.monotonic() < deadline:
                time.sleep(0.02)
        time.sleep(0.2)
        assert not cluster.release.is_set()
        placed = bound(cluster)
        assert len(placed) == 1 and "p0" not in placed  # p1 or p2 on the node p0 leaves room on
        assert s.queue.counts()[1] == 1  # the other: no room while p0 holds its node
    finally:
        cluster.release.set()
        s.stop_event.set()
        runner.join(5)
    assert set(bound(cluster).values()) == {"a", "b"}
