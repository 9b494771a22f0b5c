"""GPU fragmentation as FGD defines it (Weng et al., USENIX ATC 2023).

A node's fragmentation is the expected amount of its free GPU capacity that a task drawn
from the workload's shape distribution could not use there:

- a GPU task that cannot run on the node at all (CPU, memory, too few devices with room,
  or a GPU model it does not accept) cannot use any of the node's free GPU capacity;
- a GPU task that can run cannot use the free share of devices with less room than
  it needs per device;
- a CPU-only task strands the node's free GPUs when the node lacks CPU or memory for it.

The cluster's fragmentation is the sum over nodes; its ratio, over the free GPU capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from models.problem import Assignment, BoolArray, IntArray, Problem

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TaskShapes:
    """The workload's task shapes and their popularity: running and pending pods when the
    problem knows them (``Problem.workload``), else the pending classes."""

    demand: IntArray  # (M, R') non-GPU requests
    resources: IntArray  # (R',) indices of those resources in the problem
    count: IntArray  # (M,) devices per task
    milli: IntArray  # (M,) milli per device
    weight: FloatArray  # (M,) popularity, sums to 1
    eligible: BoolArray  # (M, N) static eligibility

    @staticmethod
    def of(problem: Problem) -> TaskShapes:
        gpu = problem.resource_index("nvidia.com/gpu")
        keep = np.array([r for r in range(len(problem.resources)) if r != gpu and problem.resources[r] != "pods"],
                        dtype=np.int64)
        w = problem.workload
        if w is not None and len(w.count):
            eligible = np.ones((len(w.count), problem.n_nodes), dtype=np.bool_)
            return TaskShapes(w.demand[:, keep], keep, w.gpu_count, w.gpu_milli,
                              w.count / max(int(w.count.sum()), 1), eligible)
        total = max(int(problem.count.sum()), 1)
        count = problem.gpu_count if problem.has_devices else np.zeros(problem.n_classes, dtype=np.int64)
        milli = problem.gpu_milli if problem.has_devices else np.zeros(problem.n_classes, dtype=np.int64)
        return TaskShapes(problem.demand[:, keep], keep, count, milli, problem.count / total, problem.eligible)


def popular(shapes: TaskShapes, coverage: float = 0.95) -> TaskShapes:
    """The most popular shapes covering ``coverage`` of the pods, reweighted (as FGD's
    authors do: rare shapes barely move the expectation and cost as much as common ones)."""
    order = np.argsort(-shapes.weight, kind="stable")
    keep = order[: int(np.searchsorted(np.cumsum(shapes.weight[order]), coverage)) + 1]
    weight = shapes.weight[keep] / max(float(shapes.weight[keep].sum()), 1e-12)
    return TaskShapes(shapes.demand[keep], shapes.resources, shapes.count[keep], shapes.milli[keep], weight,
                      shapes.eligible[keep])


def node_fragmentation(shapes: TaskShapes, free: IntArray, device_free: IntArray, nodes: IntArray) -> FloatArray:
    """(B,) fragmentation of ``nodes`` given their free resources (B, R) and devices (B, D)."""
    dev = np.maximum(device_free, 0)
    total = dev.sum(axis=1).astype(np.float64)  # (B,)
    if len(shapes.weight) == 0 or dev.shape[1] == 0:
        return np.zeros(len(nodes))
    fits_other = (free[:, None, shapes.resources] >= shapes.demand[None, :, :]).all(axis=2)  # (B, M)
    fits_other &= shapes.eligible[:, nodes].T
    roomy = device_free[:, None, :] >= shapes.milli[None, :, None]  # (B, M, D)
    fits_gpu = roomy.sum(axis=2) >= shapes.count[None, :]
    unusable = np.where(~roomy, dev[:, None, :], 0).sum(axis=2)  # (B, M)
    gpu_task = shapes.count > 0
    frag = np.where(gpu_task[None, :], np.where(fits_other & fits_gpu, unusable, total[:, None]),
                    np.where(fits_other, 0.0, total[:, None]))
    return np.asarray(frag @ shapes.weight, dtype=np.float64)


def cluster_fragmentation(problem: Problem, a: Assignment) -> tuple[float, float]:
    """(fragmented milli-GPU, its share of the free milli-GPU) after assignment ``a``."""
    if not problem.has_devices:
        return 0.0, 0.0
    free = problem.free - a.load(problem)
    device_free = problem.device_free.copy()
    d = a.devices
    np.subtract.at(device_free, (d.node, d.device), problem.gpu_milli[d.cls] * d.counts)
    nodes = np.arange(problem.n_nodes)
    frag = float(node_fragmentation(TaskShapes.of(problem), free, device_free, nodes).sum())
    total_free = float(np.maximum(device_free, 0).sum())
    return frag, (frag / total_free if total_free else 0.0)
