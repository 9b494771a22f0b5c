"""GPU fragmentation over a replay: FGD's measure (``models.fragmentation``: the free GPU capacity a
task drawn from the workload could not use, summed over nodes) kept per node as pods start and
leave, so that every sample of the replay has it without a pass over the cluster.

The workload is the trace's pods and the cluster's running ones, each shape (CPU, memory, GPU
devices and share) weighted by its pods, as FGD weighs them. Every shape counts as eligible on every
node (as ``TaskShapes`` counts a problem's running workload): a GPU model a pod requires does not
enter the measure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from kubeplace.kube.gpu_conventions import DEFAULT_CONVENTIONS
from kubeplace.kube.objects import CPU, MEMORY, Node, Pod
from kubeplace.models.fragmentation import TaskShapes, node_fragmentation, popularity
from kubeplace.models.gpu import DeviceTable, GpuRequestError, gpu_need
from kubeplace.models.problem import IntArray

RESOURCES = (CPU, MEMORY)
"""The resources besides GPU devices that decide whether a task fits a node's free room."""


def _requests(pod: Pod) -> tuple[int, int]:
    return pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0)


def workload_shapes(pods: Iterable[Pod], n_nodes: int) -> TaskShapes:
    """The pods' task shapes, weighted by pods (a pod with an invalid GPU request is left out)."""
    counts: Counter[tuple[int, int, int, int]] = Counter()
    for pod in pods:
        try:
            need = gpu_need(pod.requests)
        except GpuRequestError:
            continue
        counts[(*_requests(pod), need.count, need.milli)] += 1
    shapes = sorted(counts)
    pods_of = np.array([counts[s] for s in shapes], dtype=np.int64)
    column = np.array(shapes, dtype=np.int64).reshape(len(shapes), 4)
    return TaskShapes(column[:, :2], np.arange(len(RESOURCES)), column[:, 2], column[:, 3],
                      popularity(pods_of, column[:, 2], by_devices=False),
                      np.ones((len(shapes), n_nodes), dtype=np.bool_))


class Fragmentation:
    """Each node's free CPU, memory and GPU devices, and its fragmentation (milli-GPU)."""

    def __init__(self, nodes: Sequence[Node], shapes: TaskShapes) -> None:
        self.shapes = shapes
        self.index = {n.name: i for i, n in enumerate(nodes)}
        self.free: IntArray = np.array([[n.allocatable.get(r, 0) for r in RESOURCES] for n in nodes],
                                       dtype=np.int64).reshape(len(nodes), len(RESOURCES))
        self.devices = DeviceTable.build(nodes, (), DEFAULT_CONVENTIONS)
        self.taken: dict[str, tuple[int, IntArray, IntArray]] = {}
        """Pod key -> (its node's row, the resources and the milli per device it holds)."""
        rows = np.arange(len(nodes))
        self.per_node = node_fragmentation(shapes, self.free, self.devices.free, rows)
        self._gone: dict[int, tuple[IntArray, IntArray]] = {}
        """Rows of the nodes gone (:meth:`remove_node`): their free resources and devices, to restore."""

    def take(self, key: str, pod: Pod, node: str) -> None:
        """``pod`` starts on ``node`` (its devices: its device annotation, else first fit)."""
        i = self.index.get(node)
        if i is None or key in self.taken:
            return
        before = self.devices.free[i].copy()
        self.devices.take_bound(i, pod, DEFAULT_CONVENTIONS)
        held = np.array(_requests(pod), dtype=np.int64)
        self.free[i] -= held
        self.taken[key] = (i, held, before - self.devices.free[i])
        self._refresh(i)

    def release(self, key: str) -> None:
        entry = self.taken.pop(key, None)
        if entry is None:
            return
        i, held, devices = entry
        self.free[i] += held
        self.devices.free[i] += devices
        self._refresh(i)

    def remove_node(self, name: str) -> None:
        """The node is gone (its pods released first): it has nothing free any more."""
        i = self.index.get(name)
        if i is None or i in self._gone:
            return
        self._gone[i] = (self.free[i].copy(), self.devices.free[i].copy())
        self.free[i] = 0
        self.devices.free[i] = 0
        self._refresh(i)

    def restore_node(self, name: str) -> None:
        """The node is back, empty."""
        i = self.index.get(name)
        if i is None or i not in self._gone:
            return
        self.free[i], self.devices.free[i] = self._gone.pop(i)
        self._refresh(i)

    def _refresh(self, i: int) -> None:
        self.per_node[i] = node_fragmentation(self.shapes, self.free[[i]], self.devices.free[[i]], np.array([i]))[0]

    def fragmented(self) -> float:
        """The cluster's fragmented milli-GPU."""
        return float(self.per_node.sum())

    def free_gpu(self) -> int:
        """The cluster's free milli-GPU."""
        return int(np.maximum(self.devices.free, 0).sum())
