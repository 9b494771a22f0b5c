"""A serve cycle for a unit that fits without displacing anything is the fast path: the greedy
answer, checked by the independent verifier for the cycle's new placements only, bound at once;
no exact backend runs. And what such a cycle computes over the whole cluster it computes once,
not once per copy of the snapshot or per reader (each test fails without that)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from kubeplace.kube import objects
from kubeplace.kube.objects import CPU, MEMORY, PODS, Node, Pod, Snapshot
from kubeplace.models import bound_usage as bu
from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, Profile, instantiate
from kubeplace.models.framework import (
    ExtraResources,
    NodeKeyBasis,
    NodeReasons,
    PodDefaults,
    Rejects,
    Unmodelled,
    implements,
)
from kubeplace.plan import pipeline
from kubeplace.plan.plan import Placement
from kubeplace.serve.informer import ADDED, Store
from tests.builders import node
from tests.serve import cycles


class NoExactSolver:
    name = "no-exact-solver"

    def solve(self, *_: Any, **__: Any) -> Any:
        raise AssertionError("the exact solver ran for a unit that fits")


def counting(function: Callable[..., Any], calls: list[int]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return function(*args, **kwargs)
    return counted


def test_a_gang_that_fits_is_placed_by_the_greedy_answer_and_verified_for_its_placements_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    s, fake = cycles.cluster(40, 30)
    for module in ("kubeplace.solver.solve", "kubeplace.solver.bound", "kubeplace.solver.guided"):
        monkeypatch.setattr(f"{module}.get_backend", lambda _name: NoExactSolver())
    verified: list[tuple[Placement, ...]] = []
    check = pipeline.verify_plan

    def verify_plan(snapshot: Snapshot, placements: tuple[Placement, ...], *args: Any, **kwargs: Any) -> Any:
        verified.append(tuple(placements))
        return check(snapshot, placements, *args, **kwargs)

    monkeypatch.setattr(pipeline, "verify_plan", verify_plan)
    _, report = cycles.gang_cycle(s, fake, 0)
    assert sorted(report.bound) == [f"default/g0-{k}" for k in range(cycles.GANG)]
    assert [sorted(p.name for p in placements) for placements in verified] == [
        [f"g0-{k}" for k in range(cycles.GANG)]]  # once, its own placements (the 30 running pods are usage)


def test_a_cycle_indexes_the_bound_pods_by_node_once_for_every_snapshot_copy() -> None:
    s, fake = cycles.cluster(40, 30)
    cycles.gang_cycle(s, fake, 0)
    calls: list[int] = []
    index = objects._BOUND_BY_NODE
    plain, index.function = index.function, counting(index.function, calls)
    try:
        cycles.gang_cycle(s, fake, 1)
    finally:
        index.function = plain
    assert len(calls) == 1  # the plan's snapshot and the verifier's marked copy share it


def test_the_bound_pods_changes_are_found_once_for_every_sum_and_count_kept() -> None:
    nodes = [Node(f"n{i}", allocatable={CPU: 4000, MEMORY: 1 << 34, PODS: 110}) for i in range(3)]
    bound = tuple(Pod("default", f"p{i}", node_name=f"n{i % 3}", requests={CPU: 100 * i, PODS: 1}) for i in range(40))
    bu.forget()
    bu.bound_usage(nodes, bound, (CPU, PODS))
    bu.counted(bound, lambda p: p.node_name, "nodes")
    later = (*bound[1:], Pod("default", "new", node_name="n1", requests={CPU: 5, PODS: 1}))
    indexed: list[int] = []
    plain = bu._BY_ID.function
    bu._BY_ID.function = counting(plain, indexed)
    try:
        used, _ = bu.bound_usage(nodes, later, (CPU, PODS))
        first = bu._LAST_CHANGES[0]
        by_node = bu.counted(later, lambda p: p.node_name, "nodes")
        assert bu._LAST_CHANGES[0] is first  # the same changes, not found again
    finally:
        bu._BY_ID.function = plain
    assert len(indexed) == 1
    want, _ = bu.summed_usage(nodes, later, (CPU, PODS))
    assert (used == want).all()
    assert by_node == {n: sum(1 for p in later if p.node_name == n) for n in ("n1", "n2", "n0")}


def test_the_store_lists_a_resource_once_until_it_changes() -> None:
    store = Store()
    store.replace("nodes", [node("a").cpu("4").manifest()])
    listed = store.typed_items("nodes")
    assert store.typed_items("nodes") is listed
    store.apply("nodes", ADDED, node("b").cpu("4").manifest())
    again = store.typed_items("nodes")
    assert again is not listed and [raw["metadata"]["name"] for raw, _ in again] == ["a", "b"]
    assert [typed.name for _, typed in again] == ["a", "b"]


def test_the_running_shapes_are_counted_only_where_gpu_fragmentation_reads_them() -> None:
    plain = Snapshot(nodes=(Node("n", allocatable={CPU: 4000, MEMORY: 1 << 34, PODS: 110}),),
                     pending=(Pod("default", "p", requests={CPU: 100, PODS: 1}),),
                     bound=(Pod("default", "r", node_name="n", requests={CPU: 100, PODS: 1}),))
    gpu = Snapshot(nodes=(Node("g", allocatable={CPU: 4000, MEMORY: 1 << 34, PODS: 110, "nvidia.com/gpu": 2}),),
                   pending=plain.pending, bound=(Pod("default", "r", node_name="g", requests={CPU: 100, PODS: 1}),))
    for snapshot, counted in ((plain, False), (gpu, True)):
        problem = aggregate(snapshot, instantiate(Configuration(), Profile(), snapshot)).problem
        assert (problem.workload is not None) == counted


def test_implements_answers_as_isinstance_for_every_in_tree_plugin() -> None:
    snapshot = Snapshot(nodes=(Node("n", allocatable={CPU: 4000, PODS: 10}),),
                        pending=(Pod("default", "p", requests={CPU: 1000, PODS: 1}),), bound=())
    plugins = instantiate(Configuration(), Profile(), snapshot)
    parts = {id(p): p for p in (*plugins.filters, *plugins.scores, *plugins.constraints, *plugins.limits,
                                *plugins.defaults)}
    protocols = (ExtraResources, NodeKeyBasis, NodeReasons, PodDefaults, Rejects, Unmodelled)
    assert any(implements(p, proto) for p in parts.values() for proto in protocols)
    for part in parts.values():
        for protocol in protocols:
            assert implements(part, protocol) == isinstance(part, protocol), (part, protocol)


def test_snapshots_derived_from_one_another_share_their_indexes_of_nodes_and_bound_pods() -> None:
    nodes = tuple(Node(f"n{i}", allocatable={CPU: 4000, PODS: 10}) for i in range(3))
    snapshot = Snapshot(nodes=nodes, pending=(Pod("default", "p", requests={CPU: 1000, PODS: 1}),),
                        bound=tuple(Pod("default", f"r{i}", node_name=f"n{i % 2}") for i in range(4)))
    marked = replace(snapshot, pending=())
    assert marked.node_by_name is snapshot.node_by_name and list(snapshot.node_by_name) == ["n0", "n1", "n2"]
    assert marked.bound_by_node is snapshot.bound_by_node
    assert {n: [p.name for p in pods] for n, pods in snapshot.bound_by_node.items()} == {"n0": ["r0", "r2"],
                                                                                        "n1": ["r1", "r3"]}
