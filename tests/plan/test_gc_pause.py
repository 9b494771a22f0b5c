"""A plan is made with fewer garbage collections (``plan.gc_pause``), and the collector is
left as it was found."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import kubeplace.plan.pipeline as pipeline
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan import gc_pause
from kubeplace.plan.gc_pause import YOUNG_THRESHOLD, fewer_collections
from tests.builders import node, pod, snapshot_of


@pytest.fixture(autouse=True)
def nothing_frozen() -> Iterator[None]:
    """A test that ran serve's loop (tests/serve/test_serve_loop.py) leaves its Collector's
    freezing behind: these tests start from a collector that nothing froze."""
    gc_pause.unfreeze()
    yield


def test_a_plan_is_made_with_fewer_collections_and_the_collector_put_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[tuple[int, int, int], int]] = []
    aggregate = pipeline.aggregate

    def watched(*args: object, **kwargs: object) -> object:
        seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return aggregate(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "aggregate", watched)
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    snap = snapshot_of(node("n").cpu("4").memory("8Gi"), pod("p").cpu("1"))
    planned = pipeline.make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=1.0))
    assert planned.plan.summary.pods_placed == 1
    ((threshold, frozen_during),) = seen
    assert threshold[0] >= YOUNG_THRESHOLD and (frozen_during > frozen or frozen > 0)
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


def test_nested_the_outermost_puts_the_collector_back() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        with fewer_collections():
            assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    with pytest.raises(ValueError), fewer_collections():
        raise ValueError("a plan that fails")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_plan_is_verified_with_fewer_collections(monkeypatch: pytest.MonkeyPatch) -> None:
    import kubeplace.plan.checks as checks

    seen: list[int] = []
    verify = checks.verify

    def watched(*args: object, **kwargs: object) -> object:
        seen.append(gc.get_threshold()[0])
        return verify(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(checks, "verify", watched)
    before = gc.get_threshold()
    snap = snapshot_of(node("n").cpu("4").memory("8Gi"), pod("p").cpu("1"))
    assert checks.verify_plan(snap, (), Configuration(), Profile()) == []
    assert seen == [max(before[0], YOUNG_THRESHOLD)] and gc.get_threshold() == before


def test_what_someone_else_froze_stays_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve's Collector freezes between cycles: a plan's end must not unfreeze its objects, and a
    plan does not count them to know (``gc.get_freeze_count()`` walks every frozen object: tens of
    milliseconds per plan with serve's store frozen)."""
    gc_pause.freeze()
    try:
        frozen = gc.get_freeze_count()
        monkeypatch.setattr(gc, "get_freeze_count", lambda: pytest.fail("counted the frozen objects"))
        with fewer_collections():
            pass
        monkeypatch.undo()
        assert gc.get_freeze_count() == frozen > 0
    finally:
        gc_pause.unfreeze()
