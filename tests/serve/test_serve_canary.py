"""`kubeplace serve` for a canary: per-scheduler outcomes in the decision log and metrics, and
measured usage from the metrics API in its snapshots (LoadAware keeps pods off hot nodes)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kubeplace.kube.errors import NotFound
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.informer import ADDED, MODIFIED, Store
from kubeplace.serve.loop import Scheduler
from kubeplace.serve.outcomes import SCHEDULERS_COUNTED
from kubeplace.serve.settings import ServeSettings
from tests.builders import node, pod
from tests.metrics_builders import node_metrics
from tests.serve.fakes import Clock, FakeCluster
from tests.serve.test_serve_loop import bound, next_cycle


def decisions(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [dict(r.fields) for r in caplog.records if r.getMessage() == "decision"]  # type: ignore[attr-defined]


def make(*objects: Any, usage: Any = None, clock: Clock | None = None) -> Scheduler:
    store = Store()
    manifests = [o if isinstance(o, dict) else o.manifest() for o in objects]
    store.replace("nodes", [m for m in manifests if m["kind"] == "Node"])
    store.replace("pods", [m for m in manifests if m["kind"] == "Pod"])
    s = Scheduler(FakeCluster(), store, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1),
                  ServeSettings(batch_window=0, metrics_max_age=0), clock=clock or Clock(), usage_source=usage)
    s.resync_queue()
    return s


def test_the_other_schedulers_outcomes_are_logged_and_counted_like_ours(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    s = make(node("a").cpu("4").memory("8Gi"), pod("mine").cpu("1"), clock=clock)
    theirs = pod("theirs").cpu("1").scheduler("default-scheduler").manifest()
    caplog.set_level(logging.INFO, "kubeplace.serve")
    for raw in (s.store.items("pods")):
        s.on_change("pods", ADDED, None, raw)
    s.on_change("pods", ADDED, None, theirs)
    clock.advance(2.5)
    next_cycle(s)
    placed = {**theirs, "spec": {**theirs["spec"], "nodeName": "a"}}
    s.on_change("pods", MODIFIED, theirs, placed)
    refused = pod("stuck").cpu("1").scheduler("default-scheduler").manifest()
    s.on_change("pods", ADDED, None, refused)
    refused["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    s.on_change("pods", MODIFIED, None, refused)
    s.on_change("pods", MODIFIED, None, refused)  # reported once
    lines = decisions(caplog)
    ours = next(d for d in lines if d["pod"] == "default/mine")
    assert ours["scheduler"] == "kubeplace" and ours["outcome"] == "bound" and ours["seconds"] == 2.5
    other = [d for d in lines if d.get("scheduler") == "default-scheduler"]
    assert other == [{"pod": "default/theirs", "scheduler": "default-scheduler", "node": "a", "outcome": "bound",
                      "seconds": 2.5},
                     {"pod": "default/stuck", "scheduler": "default-scheduler", "outcome": "unschedulable"}]
    assert s.metrics.value("kubeplace_canary_pods_total", {"scheduler": "default-scheduler", "outcome": "bound"}) == 1
    assert s.metrics.value("kubeplace_canary_pods_total",
                           {"scheduler": "default-scheduler", "outcome": "unschedulable"}) == 1
    assert s.metrics.value("kubeplace_canary_scheduling_seconds_count", {"scheduler": "default-scheduler"}) == 1


def test_serve_reads_measured_usage_and_keeps_pods_off_a_hot_node() -> None:
    calls = []

    def usage() -> tuple[list[tuple[dict[str, Any], str]], str]:
        calls.append(1)
        return [(node_metrics("hot", "3500m"), "cluster"), (node_metrics("cool", "100m"), "cluster")], ""

    s = make(node("hot").cpu("4").memory("8Gi"), node("cool").cpu("4").memory("8Gi"),
             *(pod(f"p{i}").cpu("500m") for i in range(3)), usage=usage)
    next_cycle(s)
    assert set(bound(s.client).values()) == {"cool"}  # type: ignore[arg-type]
    assert calls == [1]


def test_serve_without_a_metrics_api_schedules_by_requests_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    def usage() -> tuple[list[tuple[dict[str, Any], str]], str]:
        raise NotFound("list nodes.metrics.k8s.io: HTTP 404", status=404)

    caplog.set_level(logging.INFO, "kubeplace.serve")
    s = make(node("a").cpu("4").memory("8Gi"), pod("p").cpu("1"), usage=usage)
    next_cycle(s)
    assert bound(s.client) == {"p": "a"}  # type: ignore[arg-type]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "metrics API not available; load-aware rules use requests only"]


def test_pods_of_ever_more_scheduler_names_count_under_other_past_a_few() -> None:
    """Any pod may name any scheduler, and serve sees every pod: a series per name ever seen
    grew with them (one per CI run's scheduler, per typo)."""
    s = make(node("a").cpu("4").memory("8Gi"))
    for i in range(100):
        raw = pod(f"p{i}").cpu("1").scheduler(f"scheduler-{i}").manifest()
        s.on_change("pods", ADDED, None, raw)
        s.on_change("pods", MODIFIED, raw, {**raw, "spec": {**raw["spec"], "nodeName": "a"}})
    labels = {m.labels["scheduler"] for family in s.metrics.registry.collect() if family.name == "kubeplace_canary_pods"
              for m in family.samples if m.name == "kubeplace_canary_pods_total"}
    assert len(labels) == SCHEDULERS_COUNTED - 1 and "other" in labels  # (ours and the default counted none)
    assert s.metrics.value("kubeplace_canary_pods_total", {"scheduler": "other", "outcome": "bound"}) == 100 - 14
    assert s.metrics.value("kubeplace_canary_pods_total", {"scheduler": "scheduler-0", "outcome": "bound"}) == 1
