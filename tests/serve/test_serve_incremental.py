"""What a serve cycle keeps from the last one (``models.bound_usage``: the bound pods' requests per
node) gives exactly what computing it again gives, whatever changed in between: a node added,
deleted or changed, a pod bound, deleted, resized or moved, other resources, requests too large
for int64. And a serve cycle after each such change plans on the changed cluster."""

from __future__ import annotations

import gc
import weakref
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.kube import memo
from kubeplace.kube.objects import CPU, MEMORY, PODS, Node, Pod
from kubeplace.models import bound_usage as bu
from kubeplace.serve.informer import ADDED, DELETED, MODIFIED
from kubeplace.serve.intake import unit_of
from kubeplace.serve.memory import Collector
from kubeplace.serve.queue import Unit
from tests.builders import node, pod
from tests.serve import cycles
from tests.serve.test_serve_loop import bound, scheduler

STEPS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RESOURCES = ((CPU, MEMORY, PODS), (CPU, MEMORY), (MEMORY, CPU, PODS, "nvidia.com/gpu"))


def a_node(i: int, cpu: int = 4000) -> Node:
    return Node(f"n{i}", allocatable={CPU: cpu, MEMORY: 1 << 34, PODS: 110})


def a_pod(i: int, where: str, cpu: int, memory: int = 1 << 30) -> Pod:
    return Pod("default", f"p{i}", f"u{i}", node_name=where, requests={CPU: cpu, MEMORY: memory, PODS: 1})


@st.composite
def changes(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    """Steps of (what changes, which, how much)."""
    kinds = st.sampled_from(("add pod", "delete pod", "resize pod", "move pod", "same pod again", "add node",
                             "delete node", "change node", "resources", "huge pod", "many pods", "a pod twice"))
    return draw(st.lists(st.tuples(kinds, st.integers(0, 40), st.integers(0, 4000)), min_size=1, max_size=12))


def same(nodes: list[Node], pods: list[Pod], resources: tuple[str, ...]) -> None:
    used, beyond = bu.bound_usage(nodes, pods, resources)
    want_used, want_beyond = bu.summed_usage(nodes, pods, resources)
    assert np.array_equal(used, want_used) and np.array_equal(beyond, want_beyond)
    assert used.shape == (len(nodes), len(resources)) and used.dtype == np.int64 and beyond.dtype == np.float64
    for kept_as, key_of in (("cpu", lambda p: p.requests.get(CPU, 0) // 1000),
                            ("where", lambda p: None if p.node_name == "gone" else (p.node_name, resources))):
        want: dict[Any, int] = {}
        for key in map(key_of, pods):
            if key is not None:
                want[key] = want.get(key, 0) + 1
        got = bu.counted(pods, key_of, (kept_as, resources))
        assert list(got.items()) == list(want.items())  # the same counts, in the same order
        assert bu.counted(pods, key_of, (kept_as, "in any order", resources), ordered=False) == want


def step(kind: str, which: int, amount: int, nodes: list[Node], pods: list[Pod], serial: list[int]) -> None:
    """Applies one change as serve's store shows it: a changed object is a new object."""
    serial[0] += 1
    names = [n.name for n in nodes] + ["gone"]
    if kind == "add pod":
        pods.append(a_pod(serial[0], names[amount % len(names)], amount))
    elif kind == "huge pod":
        pods.append(a_pod(serial[0], names[amount % len(names)], amount, memory=1 << 62))
    elif kind == "many pods":
        pods += [a_pod(serial[0] * 1000 + k, names[(amount + k) % len(names)], k) for k in range(20)]
    elif pods and kind == "delete pod":
        pods.pop(which % len(pods))
    elif pods and kind == "resize pod":
        i = which % len(pods)
        pods[i] = replace(pods[i], requests={**pods[i].requests, CPU: amount})
    elif pods and kind == "move pod":
        i = which % len(pods)
        pods[i] = replace(pods[i], node_name=names[amount % len(names)])
    elif pods and kind == "a pod twice":  # the same object listed twice (counted twice)
        pods.append(pods[which % len(pods)])
    elif pods and kind == "same pod again":  # an equal object, not the same one
        i = which % len(pods)
        pods[i] = replace(pods[i])
    elif kind == "add node":
        nodes.append(a_node(serial[0]))
    elif nodes and kind == "delete node":
        nodes.pop(which % len(nodes))
    elif nodes and kind == "change node":
        i = which % len(nodes)
        nodes[i] = a_node(int(nodes[i].name[1:]), cpu=amount)


@STEPS
@given(changes(), st.integers(0, 6), st.integers(0, 30))
def test_the_kept_usage_is_the_usage_summed_again_after_every_change(
        steps: list[tuple[str, int, int]], node_count: int, pod_count: int) -> None:
    bu.forget()
    nodes = [a_node(i) for i in range(node_count)]
    names = [n.name for n in nodes] + ["gone"]
    pods = [a_pod(i, names[i % len(names)], 100 * i) for i in range(pod_count)]
    serial, resources = [10_000], RESOURCES[0]
    same(nodes, pods, resources)
    for kind, which, amount in steps:
        if kind == "resources":
            resources = RESOURCES[amount % len(RESOURCES)]
        else:
            step(kind, which, amount, nodes, pods, serial)
        same(nodes, pods, resources)
        same(nodes, pods, resources)  # and again with nothing changed


def test_a_few_changed_pods_update_the_kept_sums_instead_of_summing_again(monkeypatch: pytest.MonkeyPatch) -> None:
    bu.forget()
    nodes = [a_node(i) for i in range(10)]
    pods = [a_pod(i, f"n{i % 10}", 100) for i in range(100)]
    bu.bound_usage(nodes, pods, RESOURCES[0])
    summed: list[int] = []
    real = bu._summed
    monkeypatch.setattr(bu, "_summed", lambda *a: summed.append(1) or real(*a))
    pods[3] = replace(pods[3], requests={CPU: 900})
    del pods[7]
    pods.append(a_pod(500, "n2", 250))
    same(nodes, pods, RESOURCES[0])
    assert summed == []
    nodes[0] = a_node(0, cpu=8000)  # another node object: summed again
    same(nodes, pods, RESOURCES[0])
    assert summed == [1]


def test_the_kept_sums_are_bounded_and_hold_only_the_last_objects() -> None:
    bu.forget()
    nodes = [a_node(i) for i in range(3)]
    for k in range(bu.KEPT + 3):
        bu.bound_usage(nodes, [a_pod(k, "n0", 100)], (CPU, f"example.com/r{k}"))
    assert len(bu._LAST) == bu.KEPT
    assert all(len(s.pods) == 1 and s.nodes == tuple(nodes) for s in bu._LAST.values())


def manifest(b: Any) -> dict[str, Any]:
    return b.manifest()  # type: ignore[no-any-return]


CHANGES = {
    # each: what changes between two cycles; the second cycle's pod fits only on node "b" after it
    "a node added": lambda s: s.store.apply("nodes", ADDED, manifest(node("b").cpu("4").memory("8Gi"))),
    "a node's allocatable changed": lambda s: s.store.apply("nodes", MODIFIED, manifest(
        node("b").cpu("4").memory("8Gi"))),
    "a bound pod deleted": lambda s: s.store.apply("pods", DELETED, manifest(
        pod("big").cpu("3").memory("1Gi").on("b"))),
    "a bound pod resized": lambda s: s.store.apply("pods", MODIFIED, manifest(
        pod("big").cpu("500m").memory("1Gi").on("b"))),
    "a bound pod moved": lambda s: s.store.apply("pods", MODIFIED, manifest(
        pod("big").cpu("3").memory("1Gi").on("a"))),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_next_cycle_plans_on_what_changed_since_the_last(change: str) -> None:
    """Node "a" is full (its pod "filler" uses it all); node "b" holds pod "big" (3 CPU of 4) or
    only 1 CPU, or is missing. A 2-CPU pod is unplaceable in the first cycle, the change frees
    room on "b", the second cycle places it there."""
    objects: list[Any] = [node("a").cpu("4").memory("8Gi"), pod("filler").cpu("4").memory("1Gi").on("a"),
                          pod("first").cpu("2").memory("1Gi")]
    if change != "a node added":
        objects += [node("b").cpu("1" if change == "a node's allocatable changed" else "4").memory("8Gi")]
        if change != "a node's allocatable changed":
            objects += [pod("big").cpu("3").memory("1Gi").on("b")]
    if change == "a bound pod moved":
        objects[1] = pod("filler").cpu("1").memory("1Gi").on("a")
        objects[2] = pod("first").cpu("2").memory("1Gi")
    s, cluster = scheduler(*objects)
    first = s.cycle([s.queue.pop_batch(0, 100, timeout=0)[0]])
    if change == "a bound pod moved":  # "a" had room for it; the next one waits for "big" to move
        assert bound(cluster) == {"first": "a"}
        s.store.apply("pods", MODIFIED, manifest(pod("first").cpu("2").memory("1Gi").on("a")))
    else:
        assert first.unplaced == ["default/first"] and not cluster.bindings
    s.store.apply("pods", ADDED, manifest(pod("second").cpu("2").memory("1Gi")))
    CHANGES[change](s)
    report = s.cycle(["default/second"])
    assert report.bound == ["default/second"], report
    assert bound(cluster)["second"] == "b"


class Cyclic:
    def __init__(self) -> None:
        self.me = self


def test_between_cycles_the_young_garbage_is_collected_and_the_rest_frozen_until_the_full_collection() -> None:
    """The automatic full collection scanned every object alive in the middle of a cycle (0.2-0.4 s
    at 2,000 nodes); between cycles the young garbage goes, the survivors are frozen, and every
    ``every`` seconds everything is collected once (cyclic garbage among the frozen too)."""
    now = [0.0]
    collector = Collector(every=300.0, clock=lambda: now[0])
    try:
        young = weakref.ref(Cyclic())  # garbage that only the collector frees
        kept = Cyclic()
        collector.between_cycles()
        assert young() is None and gc.get_freeze_count() > 0 and collector.full == 0
        frozen = weakref.ref(kept)
        del kept  # frozen when it became garbage: freed by the next full collection only
        gc.collect(2)
        collector.between_cycles()
        assert frozen() is not None
        now[0] = 300.0
        collector.between_cycles()
        assert frozen() is None and collector.full == 1
    finally:
        collector.close()
    assert gc.get_freeze_count() == 0


def test_cycle_after_cycle_the_usage_is_updated_from_the_last_cycle_not_summed_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """serve's cycles (one gang each, as the gangs bench) on 40 nodes running 60 pods: after the
    first, every aggregation updates the kept sums with the few pods that changed."""
    s, fake = cycles.cluster(40, 60)
    assert len(cycles.gang_cycle(s, fake, 0)[1].bound) == cycles.GANG
    summed: list[int] = []
    real = bu._summed
    monkeypatch.setattr(bu, "_summed", lambda *a: summed.append(1) or real(*a))
    for serial in range(1, 6):
        assert len(cycles.gang_cycle(s, fake, serial)[1].bound) == cycles.GANG
    assert summed == [] and len(fake.bindings) == 6 * cycles.GANG
    s.close()


def test_what_is_kept_for_the_last_nodes_is_computed_again_for_any_other_node_object() -> None:
    calls: list[int] = []

    def capacity(nodes: tuple[Node, ...], resource: str) -> Any:
        calls.append(1)
        return np.array([n.allocatable.get(resource, 0) for n in nodes], dtype=np.int64)

    last = memo.LastOf(capacity, kept=2)
    nodes = [a_node(0), a_node(1)]
    first = last(nodes, CPU)
    assert last(list(nodes), CPU) is first and len(calls) == 1 and not first.flags.writeable
    nodes[1] = a_node(1, cpu=8000)  # changed: a new object
    assert last(nodes, CPU).tolist() == [4000, 8000] and len(calls) == 2
    assert last(nodes[:1], CPU).tolist() == [4000] and len(calls) == 3  # a node deleted
    for resource in (MEMORY, PODS, "example.com/r"):
        last(nodes, resource)
    assert len(last) == 2  # the last argument tuples only


def test_a_cycles_snapshot_holds_the_pending_pods_others_read_and_its_own_not_the_rest_of_the_backlog() -> None:
    """A cycle's snapshot is built over the store's pods but the plain pending pods of other units
    (a saturated cluster's backlog of thousands); a gang member, a nominated pod, a pod of another
    scheduler are still read, and the snapshot the cycle plans on is the one built over every pod."""
    s, _ = scheduler(node("n1").cpu("4").memory("8Gi"),
                     *(pod(f"wait-{i}").cpu("1").memory("1Gi") for i in range(3)),
                     pod("mine").cpu("1").memory("1Gi"),
                     pod("gang-a").cpu("1").memory("1Gi").label("kubeplace.io/gang", "g")
                     .annotation("kubeplace.io/gang-min-member", "1"),
                     pod("nominated").cpu("1").memory("1Gi").status("nominatedNodeName", "n1"),
                     pod("other").cpu("1").memory("1Gi").scheduler("default-scheduler"))
    wanted: set[Unit] = {"default/mine"}
    narrowed, _ = s.snapshots.take(keep=lambda p: unit_of(p) in wanted)
    whole, _ = s.snapshots.take()
    assert sorted(p.name for p in narrowed.pending) == ["gang-a", "mine", "nominated"]
    assert sorted(p.name for p in whole.pending) == ["gang-a", "mine", "nominated", "wait-0", "wait-1", "wait-2"]
    planned, _ = s._snapshot(wanted)
    adjusted, _ = s.snapshots.take(lambda pods: s.preemptions.adjust(pods, lambda p: unit_of(p) in wanted))
    assert planned == replace(adjusted, pending=tuple(p for p in adjusted.pending if unit_of(p) in wanted))
