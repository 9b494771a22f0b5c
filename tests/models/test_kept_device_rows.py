"""What the GPU device table and the fragmentation measure keep from the last computation (each
node's device row, ``models.gpu``; each node state's row per task shape,
``models.fragmentation``) gives exactly what computing them again gives, whatever changed in
between: a pod bound (with its devices named or packed first-fit), deleted, replaced by an equal
object, a node changed or gone, other task shapes."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.kube.gpu_conventions import DEFAULT_CONVENTIONS
from kubeplace.kube.objects import CPU, MEMORY, Node, Pod
from kubeplace.models import fragmentation as fr
from kubeplace.models import gpu

STEPS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
GPU = "nvidia.com/gpu"
ALLOCATED = "scheduling.koordinator.sh/device-allocated"


def a_node(i: int, devices: int) -> Node:
    return Node(f"n{i}", allocatable={CPU: 64000, MEMORY: 1 << 38, GPU: devices})


def a_pod(i: int, where: str, count: int, share: int, named: int | None) -> Pod:
    requests = {CPU: 1000, GPU: count} if share == 0 else {CPU: 1000, "koordinator.sh/gpu-core": share,
                                                            "koordinator.sh/gpu-memory-ratio": share}
    notes = {} if named is None else {ALLOCATED: json.dumps({"gpu": [{"minor": named, "resources": {
        "koordinator.sh/gpu-core": str(share or 100)}}]})}
    return Pod("default", f"p{i}", f"u{i}", node_name=where, requests=requests, annotations=notes)


def table_again(nodes: list[Node], pods: list[Pod]) -> None:
    warm = gpu.DeviceTable.build(nodes, pods, DEFAULT_CONVENTIONS).free
    gpu.forget_rows()
    cold = gpu.DeviceTable.build(nodes, pods, DEFAULT_CONVENTIONS).free
    assert np.array_equal(warm, cold)
    assert np.array_equal(gpu.DeviceTable.build(nodes, pods, DEFAULT_CONVENTIONS).free, cold)


@STEPS
@given(st.lists(st.tuples(st.sampled_from(("bind", "delete", "same again", "change node", "drop node", "wider")),
                          st.integers(0, 30), st.integers(0, 8), st.sampled_from((0, 0, 30, 50)),
                          st.one_of(st.none(), st.integers(0, 7))), min_size=1, max_size=14),
       st.integers(1, 5))
def test_the_kept_device_rows_are_the_rows_computed_again(steps: list[tuple[str, int, int, int, int | None]],
                                                          node_count: int) -> None:
    gpu.forget_rows()
    nodes = [a_node(i, 1 + i % 4) for i in range(node_count)]
    pods: list[Pod] = []
    for serial, (kind, which, count, share, named) in enumerate(steps):
        if kind == "bind" or not pods:
            pods.append(a_pod(serial, f"n{which % (node_count + 1)}", count, share, named))
        elif kind == "delete":
            pods.pop(which % len(pods))
        elif kind == "same again":
            i = which % len(pods)
            pods[i] = replace(pods[i])
        elif kind == "change node" and nodes:
            i = which % len(nodes)
            nodes[i] = a_node(int(nodes[i].name[1:]), 1 + count % 8)
        elif kind == "drop node" and nodes:
            nodes.pop(which % len(nodes))
        elif kind == "wider":
            nodes.append(a_node(100 + serial, 8))
        table_again(nodes, pods)


@STEPS
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 6))
def test_the_banked_fragmentation_rows_are_the_rows_computed_again(seed: int, shapes_count: int, rounds: int) -> None:
    fr.forget_banks()
    rng = np.random.default_rng(seed)
    n, d = 50, 8

    def shapes_of(m: int) -> fr.TaskShapes:
        return fr.TaskShapes(rng.integers(0, 5000, (m, 2)), np.array([0, 1]), rng.integers(0, 9, m),
                             rng.choice([100, 250, 500, 1000], m), rng.random(m) / m, np.ones((m, n), dtype=np.bool_))

    shapes = shapes_of(shapes_count)
    free = rng.integers(-100, 6000, (n, 2))
    dev = rng.choice([-1, 0, 100, 250, 500, 1000], (n, d))
    for _ in range(rounds):
        nodes = rng.choice(n, int(rng.integers(1, n)))
        want = fr._shape_matrix(shapes, free[nodes], dev[nodes], nodes) @ shapes.weight
        assert np.array_equal(fr.node_fragmentation(shapes, free[nodes], dev[nodes], nodes), want)
        changed = rng.choice(n, 3)
        free[changed] -= 250
        dev[changed, 0] = 0
        if rng.random() < 0.3:
            shapes = shapes_of(int(rng.integers(1, 12)))
        elif rng.random() < 0.3:  # the same shapes, other popularity: the rows stay, the weights change
            shapes = replace(shapes, weight=rng.random(len(shapes.weight)))
    eligible = shapes.eligible.copy()
    eligible[0, 0] = False  # (a shape some node refuses is not banked)
    picky = replace(shapes, eligible=eligible)
    every = np.arange(n)
    assert np.array_equal(fr.node_fragmentation(picky, free, dev, every),
                          fr._shape_matrix(picky, free, dev, every) @ picky.weight)


def test_a_cycle_takes_the_devices_of_the_changed_nodes_only(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu.forget_rows()
    nodes = [a_node(i, 4) for i in range(20)]
    pods = [a_pod(i, f"n{i % 20}", 1, 0, None) for i in range(60)]
    gpu.DeviceTable.build(nodes, pods, DEFAULT_CONVENTIONS)
    taken: list[str] = []
    real = gpu.DeviceTable.take_bound
    monkeypatch.setattr(gpu.DeviceTable, "take_bound",
                        lambda self, i, pod, conv: taken.append(pod.node_name) or real(self, i, pod, conv))
    pods.append(a_pod(100, "n3", 1, 0, None))
    gpu.DeviceTable.build(nodes, pods, DEFAULT_CONVENTIONS)
    assert taken == ["n3"] * 4  # n3's pods, in order; the other nodes' rows are kept
    table_again(nodes, pods)


def test_the_same_node_states_are_not_computed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fr.forget_banks()
    rng = np.random.default_rng(1)
    n = 40
    shapes = fr.TaskShapes(rng.integers(0, 5000, (5, 2)), np.array([0, 1]), np.array([1, 2, 0, 1, 8]),
                           np.array([1000, 1000, 0, 300, 1000]), np.full(5, 0.2), np.ones((5, n), dtype=np.bool_))
    free, dev, every = rng.integers(0, 6000, (n, 2)), rng.choice([0, 500, 1000], (n, 8)), np.arange(n)
    fr.node_fragmentation(shapes, free, dev, every)
    rows: list[int] = []
    real = fr._shape_matrix
    monkeypatch.setattr(fr, "_shape_matrix", lambda s, f, d, nodes: rows.append(len(nodes)) or real(s, f, d, nodes))
    dev[7, 0] = 0
    fr.node_fragmentation(shapes, free, dev, every)
    assert rows == [1]


def test_the_kept_rows_are_those_of_the_last_table_s_nodes_only() -> None:
    """A cluster whose nodes come and go (autoscaling, for months) keeps no row of a node gone."""
    gpu.forget_rows()
    for generation in range(50):
        nodes = [Node(f"g{generation}-n{i}", allocatable={CPU: 64000, MEMORY: 1 << 38, GPU: 2}) for i in range(3)]
        pods = [a_pod(i, node.name, 1, 0, None) for i, node in enumerate(nodes)]
        gpu.DeviceTable.build(nodes, pods, DEFAULT_CONVENTIONS)
    assert set(gpu._NODE_ROWS) == {f"g49-n{i}" for i in range(3)}
