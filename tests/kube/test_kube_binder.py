from __future__ import annotations

from collections.abc import Mapping

import pytest

from kubeplace.kube.binder import Binding, BindResult, Outcome, bind_all, summary
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
