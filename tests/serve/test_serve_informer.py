"""The informer: list then watch from the list's version, relist after 410 Gone, retry after
errors, absent CRDs, and the store's differences after a relist."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kubeplace.kube.errors import Gone, InputError, NotFound, Unreachable
from kubeplace.serve.informer import Informer, Store, Watched
from tests.builders import node, pod
from tests.serve.fakes import ScriptedWatch


def versioned(manifest: dict[str, Any], version: int) -> dict[str, Any]:
    return {**manifest, "metadata": {**manifest["metadata"], "resourceVersion": str(version)}}


PODS = Watched("pods")


def run_script(lists: list[Any], watches: list[Any], watched: Watched = PODS, **options: Any) -> tuple[
        Informer, ScriptedWatch, list[tuple[str, str]]]:
    changes: list[tuple[str, str]] = []
    holder: list[Informer] = []
    script = ScriptedWatch(lists, watches, lambda: holder[0].stop())
    informer = Informer(script, resources=(watched,), max_retry=0.01, absent_poll=0.01, **options,
                        on_change=lambda r, e, old, new: changes.append((e, ((new or old) or {})["metadata"]["name"])))
    holder.append(informer)
    thread = threading.Thread(target=informer.run, args=(watched,), daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    return informer, script, changes


def test_list_then_watch_from_the_lists_version() -> None:
    a, b = versioned(pod("a").manifest(), 5), versioned(pod("b").manifest(), 6)
    informer, script, changes = run_script(
        [([a], 10)],
        [[("ADDED", b), ("MODIFIED", versioned(pod("b").on("n").manifest(), 11)), ("BOOKMARK", versioned(a, 12)),
          ("DELETED", versioned(a, 13))]])
    assert script.watched_from == ["10", "13"]  # the second watch goes on from the last event seen
    assert changes == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "a")]
    assert [o["metadata"]["name"] for o in informer.store.items("pods")] == ["b"]
    assert informer.store.get("pods", "default/b")["spec"]["nodeName"] == "n"  # type: ignore[index]


def hours_apart() -> Any:
    """A clock that moves an hour each time it is read."""
    ticks = iter(range(0, 10**9, 3600))
    return lambda: float(next(ticks))


def test_no_relist_on_a_timer_by_default() -> None:
    """As client-go's reflectors: only the first list, then watches from the last version seen,
    however long it runs (a periodic relist re-reads every pod of the cluster for nothing)."""
    a = versioned(pod("a").manifest(), 5)
    informer, script, _ = run_script([([a], 10), ([a], 20)], [[("BOOKMARK", versioned(a, 11))], [], []],
                                     clock=hours_apart())
    assert informer.relists["pods"] == 1
    assert script.watched_from[:3] == ["10", "11", "11"]


def test_a_resync_period_relists() -> None:
    a = versioned(pod("a").manifest(), 5)
    informer, script, _ = run_script([([a], 10), ([a], 20)], [[], [], []], clock=hours_apart(), resync_seconds=300)
    assert informer.relists["pods"] >= 2
    assert "20" in script.watched_from


def test_gone_relists_and_reports_what_changed_meanwhile() -> None:
    a, b, c = (versioned(pod(n).manifest(), 5) for n in "abc")
    informer, script, changes = run_script(
        [([a, b], 10), ([versioned(pod("b").on("n").manifest(), 20), c], 30)],
        [Gone("too old resource version", status=410), []])
    assert informer.relists["pods"] == 2
    assert script.watched_from[:2] == ["10", "30"]
    # a was deleted and b bound while the watch was down: the relist says so
    assert changes[2:] == [("MODIFIED", "b"), ("ADDED", "c"), ("DELETED", "a")]


def test_errors_are_retried_from_the_same_version() -> None:
    a = versioned(pod("a").manifest(), 5)
    informer, script, _ = run_script(
        [([a], 10)], [Unreachable("connection refused"), Unreachable("connection refused"), []])
    assert informer.relists["pods"] == 1
    assert script.watched_from == ["10", "10", "10", "10"]


def test_an_absent_crd_is_an_empty_synced_resource() -> None:
    watched = Watched("scheduling.x-k8s.io/v1alpha1/podgroups", optional=True)
    informer, _, changes = run_script([NotFound("404"), NotFound("404")], [], watched)
    assert informer.wait_synced(0) and informer.store.items(watched.resource) == [] and changes == []


def test_store_replace_reports_differences() -> None:
    store = Store()
    n1, n2 = versioned(node("n1").manifest(), 1), versioned(node("n2").manifest(), 1)
    assert [e for e, _, _ in store.replace("nodes", [n1, n2])] == ["ADDED", "ADDED"]
    assert store.replace("nodes", [n1, n2]) == []  # same versions: nothing changed
    changes = store.replace("nodes", [versioned(node("n1").manifest(), 2)])
    assert [(e, (new or old)["metadata"]["name"]) for e, old, new in changes] == [  # type: ignore[index]
        ("MODIFIED", "n1"), ("DELETED", "n2")]


def test_the_store_parses_each_object_once_per_change() -> None:
    from kubeplace.serve.informer import parse_watched

    parsed: list[str] = []

    def counting(resource: str, obj: dict[str, Any]) -> Any:
        parsed.append(obj["metadata"]["name"])
        return parse_watched(resource, obj)

    store = Store(parse=counting)
    a, b = versioned(pod("a").manifest(), 1), versioned(pod("b").manifest(), 1)
    store.replace("pods", [a, b])
    store.replace("pods", [a, b])  # a resync with the same versions: nothing parsed again
    assert sorted(parsed) == ["a", "b"]
    b2 = {**b, "metadata": {**b["metadata"], "resourceVersion": "2"}, "spec": {**b["spec"], "nodeName": "n1"}}
    store.apply("pods", "MODIFIED", b2)
    assert sorted(parsed) == ["a", "b", "b"] and store.typed("pods", "default/b").node_name == "n1"
    broken = {**a, "metadata": {**a["metadata"], "resourceVersion": "3", "labels": {"x": 1}}}
    store.apply("pods", "MODIFIED", broken)
    assert isinstance(store.typed("pods", "default/a"), InputError)
    store.apply("pods", "DELETED", broken)
    assert store.typed("pods", "default/a") is None and len(store.typed_items("pods")) == 1


def test_scheduling_cycles_parse_no_pod_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubeplace.kube import parse
    from kubeplace.serve import intake, snapshots
    from tests.serve.test_serve_loop import next_cycle, scheduler

    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"), pod("p").cpu("1"), pod("q").cpu("20"))
    calls: list[str] = []
    real = parse.parse_pod

    def counted(obj: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(obj["metadata"]["name"])
        return real(obj, *args, **kwargs)

    for module in (parse, intake, snapshots):
        monkeypatch.setattr(module, "parse_pod", counted)
    next_cycle(s)
    s.queue.cluster_changed()
    next_cycle(s)
    assert calls == [] and [b[0] for b in cluster.bindings] == ["default/p"]


def test_a_watch_failing_for_hours_keeps_retrying_at_the_longest_pause() -> None:
    """``0.5 * 2 ** failures`` overflowed after 1,025 failures in a row (under three hours of an
    unreachable API server at 10 s a retry) and the resource's thread died with it."""
    informer = Informer(ScriptedWatch([], [], lambda: None), resources=(PODS,), max_retry=10.0)
    informer.stop()  # (the pause returns at once)
    assert informer._pause(PODS, Unreachable("down"), 5000) == 5001


def test_a_watch_that_ends_at_once_again_and_again_is_paced() -> None:
    """410 Gone right after every list (or a watch the server ends at once, with no event): the
    first is listed (watched) again at once, the next ones after a doubling pause, so the informer
    does not LIST the whole resource as fast as the server answers (client-go's reflector backs
    off too)."""
    import time

    a = versioned(pod("a").manifest(), 5)
    for watches, lists in (([Gone("too old resource version", status=410)] * 6, [([a], 10)] * 7),
                           ([[]] * 6, [([a], 10)])):
        stop = threading.Event()
        script = ScriptedWatch(list(lists), list(watches), stop.set)
        informer = Informer(script, resources=(PODS,), max_retry=0.2)
        informer._stop = stop
        started = time.monotonic()
        thread = threading.Thread(target=informer.run, args=(PODS,), daemon=True)
        thread.start()
        thread.join(10)
        assert not thread.is_alive()
        # 7 watches: the 2nd at once, the 3rd to 7th after 0.2 s each (0.5 s capped by max_retry)
        assert time.monotonic() - started >= 0.9, watches[0]
