from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import pytest

from kubeplace.kube.binder import Binding, BindResult, Outcome, bind_all, bind_concurrently, summary
from kubeplace.kube.errors import ApiFailure, Conflict, Forbidden, NotFound, Unauthorized, Unreachable


class FakeCluster:
    """Answers each bind from a table of errors by pod name; records what was bound."""

    def __init__(self, errors: dict[str, Exception] | None = None) -> None:
        self.errors = errors or {}
        self.calls: list[tuple[str, str, str, str, bool]] = []
        self.annotations: dict[str, dict[str, str]] = {}

    def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
             annotations: Mapping[str, str] | None = None) -> None:
        self.calls.append((namespace, name, uid, node, dry_run))
        self.annotations[name] = dict(annotations or {})
        if name in self.errors:
            raise self.errors[name]


def bindings(*names: str) -> list[Binding]:
    return [Binding("default", name, f"uid-{name}", "n1") for name in names]


def test_all_bound_and_progress_reported() -> None:
    cluster = FakeCluster()
    seen: list[BindResult] = []
    results = bind_all(cluster, bindings("a", "b"), dry_run=True, on_result=seen.append)
    assert [(r.binding.name, r.outcome, r.dry_run) for r in results] == [
        ("a", Outcome.BOUND, True),
        ("b", Outcome.BOUND, True),
    ]
    assert seen == results
    assert cluster.calls == [("default", "a", "uid-a", "n1", True), ("default", "b", "uid-b", "n1", True)]


def test_per_pod_failures_do_not_stop_the_others() -> None:
    cluster = FakeCluster(
        {
            "b": Conflict('HTTP 409 Conflict: pod b is already assigned to node "n2"', status=409),
            "c": NotFound("HTTP 404", status=404),
            "d": Forbidden("HTTP 403", status=403),
            "e": ApiFailure("HTTP 500", status=500),
        }
    )
    results = bind_all(cluster, bindings("a", "b", "c", "d", "e", "f"), dry_run=False)
    assert [r.outcome for r in results] == [
        Outcome.BOUND,
        Outcome.CONFLICT,
        Outcome.NOT_FOUND,
        Outcome.FORBIDDEN,
        Outcome.ERROR,
        Outcome.BOUND,
    ]
    assert "already assigned" in results[1].message
    assert len(cluster.calls) == 6


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (Unreachable("bind: API server unreachable: connection refused"), Outcome.UNKNOWN),
        (Unauthorized("bind: HTTP 401 Unauthorized", status=401), Outcome.ERROR),
    ],
)
def test_unreachable_or_unauthorized_stops_the_run(error: Exception, outcome: Outcome) -> None:
    cluster = FakeCluster({"c": error})
    results = bind_all(cluster, bindings("a", "b", "c", "d", "e"), dry_run=False)
    assert [r.outcome for r in results] == [
        Outcome.BOUND,
        Outcome.BOUND,
        outcome,
        Outcome.NOT_ATTEMPTED,
        Outcome.NOT_ATTEMPTED,
    ]
    assert [call[1] for call in cluster.calls] == ["a", "b", "c"]
    assert "the run stopped at default/c" in results[3].message
    assert summary(results) == {Outcome.BOUND: 2, outcome: 1, Outcome.NOT_ATTEMPTED: 2}


def test_no_bindings() -> None:
    assert bind_all(FakeCluster(), [], dry_run=False) == []


def test_annotations_travel_with_the_binding() -> None:
    cluster = FakeCluster()
    note = {"scheduling.koordinator.sh/device-allocated": '{"gpu":[{"minor":1}]}'}
    bind_all(cluster, [Binding("default", "g", "uid-g", "n1", note)], dry_run=False)
    assert cluster.annotations["g"] == note


class SlowCluster(FakeCluster):
    """Each bind takes ``seconds``; counts how many run at once."""

    def __init__(self, seconds: float, errors: dict[str, Exception] | None = None) -> None:
        super().__init__(errors)
        self.seconds, self.running, self.most = seconds, 0, 0
        self.lock = threading.Lock()

    def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
             annotations: Mapping[str, str] | None = None) -> None:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(self.seconds)
            with self.lock:
                super().bind(namespace, name, uid, node, dry_run, annotations)
        finally:
            with self.lock:
                self.running -= 1


def test_concurrent_binding_overlaps_up_to_the_limit_with_exact_outcomes_in_order() -> None:
    names = [f"p{i}" for i in range(40)]
    cluster = SlowCluster(0.02, {"p7": Conflict("HTTP 409", status=409), "p30": NotFound("HTTP 404", status=404)})
    seen: list[int] = []
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        results = bind_concurrently(cluster, bindings(*names), pool, 8, lambda: "",
                                    lambda index, _result: seen.append(index))
    assert time.monotonic() - started < 40 * 0.02 / 2  # at least twice as fast as one at a time
    assert 2 <= cluster.most <= 8
    assert [r.binding.name for r in results] == names
    assert results[7].outcome == Outcome.CONFLICT and results[30].outcome == Outcome.NOT_FOUND
    assert sum(r.outcome == Outcome.BOUND for r in results) == 38
    assert sorted(seen) == list(range(40))
    assert sorted(c[1] for c in cluster.calls) == sorted(names)  # each pod asked for exactly once


def test_concurrent_binding_starts_alone_so_a_halt_after_the_first_binds_one() -> None:
    cluster = FakeCluster()
    asked: list[int] = []

    def halt() -> str:
        asked.append(len(cluster.calls))
        return "not the leader any more" if cluster.calls else ""

    with ThreadPoolExecutor(8) as pool:
        results = bind_concurrently(cluster, bindings("a", "b", "c"), pool, 8, halt)
    assert [r.outcome for r in results] == [Outcome.BOUND, Outcome.NOT_ATTEMPTED, Outcome.NOT_ATTEMPTED]
    assert results[1].message == "not attempted: not the leader any more" and len(cluster.calls) == 1


def test_concurrent_binding_stops_when_the_server_is_unreachable() -> None:
    cluster = FakeCluster({"a": Unreachable("connection refused")})
    with ThreadPoolExecutor(4) as pool:
        results = bind_concurrently(cluster, bindings("a", "b"), pool, 4, lambda: "")
    assert [r.outcome for r in results] == [Outcome.UNKNOWN, Outcome.NOT_ATTEMPTED]
    assert "the run stopped at default/a" in results[1].message and len(cluster.calls) == 1


def test_concurrent_binding_may_start_wide() -> None:
    cluster = SlowCluster(0.05)
    with ThreadPoolExecutor(8) as pool:
        results = bind_concurrently(cluster, bindings(*(f"p{i}" for i in range(8))), pool, 8, lambda: "", first=8)
    assert cluster.most == 8 and all(r.outcome == Outcome.BOUND for r in results)  # one wave, no slow start
