"""GPU fragmentation as FGD defines it (Weng et al., USENIX ATC 2023).

A node's fragmentation is the expected amount of its free GPU capacity that a task drawn
from the workload's shape distribution could not use there:

- a GPU task that cannot run on the node at all (CPU, memory, too few devices with room,
  or a GPU model it does not accept) cannot use any of the node's free GPU capacity;
- a GPU task that can run cannot use the free share of devices with less room than
  it needs per device;
- a CPU-only task strands the node's free GPUs when the node lacks CPU or memory for it.

The cluster's fragmentation is the sum over nodes; its ratio, over the free GPU capacity.

Popularity. FGD weighs each shape by its pods; the plan summary reports that measure.
Placement decisions (the FGD greedy, the ``defrag`` objective) weigh each shape by the GPU
devices its pods ask for (``by_devices``): a pod counts once per device it takes, a
share or a CPU-only pod once. Counted by pods, an 8-GPU task weighs as much as a tenth of
a GPU, so nothing keeps whole nodes free for it, although such tasks carry a large part
of the GPUs requested (openb default: 0.5% of the pods, 6% of the GPUs); on FGD's
saturation replay a pod-weighted FGD used up the last empty 8-GPU nodes while 8-GPU pods
were still arriving.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubeplace.models.problem import Assignment, BoolArray, IntArray, Problem, fits

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TaskShapes:
    """The workload's task shapes and their popularity: running and pending pods when the
    problem knows them (``Problem.workload``), else the pending classes."""

    demand: IntArray  # (M, R') requests as the kubelet counts them, the pod count aside
    resources: IntArray  # (R',) indices of those resources in the problem
    count: IntArray  # (M,) devices per task
    milli: IntArray  # (M,) milli per device
    weight: FloatArray  # (M,) popularity, sums to 1
    eligible: BoolArray  # (M, N) static eligibility

    @staticmethod
    def of(problem: Problem, by_devices: bool = False) -> TaskShapes:
        """The workload's shapes; popularity by pods (FGD's), or ``by_devices`` (see the
        module docstring)."""
        keep = np.array([r for r in range(len(problem.resources)) if problem.resources[r] != "pods"], dtype=np.int64)
        w = problem.workload
        if w is not None and len(w.count):
            eligible = np.ones((len(w.count), problem.n_nodes), dtype=np.bool_)
            return TaskShapes(w.demand[:, keep], keep, w.gpu_count, w.gpu_milli,
                              popularity(w.count, w.gpu_count, by_devices), eligible)
        count = problem.gpu_count if problem.has_devices else np.zeros(problem.n_classes, dtype=np.int64)
        milli = problem.gpu_milli if problem.has_devices else np.zeros(problem.n_classes, dtype=np.int64)
        return TaskShapes(problem.demand[:, keep], keep, count, milli,
                          popularity(problem.count, count, by_devices), problem.eligible)


def popularity(pods: IntArray, devices: IntArray, by_devices: bool) -> FloatArray:
    """Each shape's share of the pods, or with ``by_devices`` of the device requests (a pod
    counts once per GPU device it takes, at least once)."""
    weight = pods * np.maximum(devices, 1) if by_devices else pods
    return np.asarray(weight / max(int(weight.sum()), 1), dtype=np.float64)


def popular(shapes: TaskShapes, coverage: float = 0.95) -> TaskShapes:
    """The most popular shapes covering ``coverage`` of the popularity, reweighted (as FGD's
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
    fits_other = fits(free[:, None, shapes.resources], shapes.demand[None, :, :])  # (B, M)
    fits_other &= shapes.eligible[:, nodes].T
    roomy = device_free[:, None, :] >= shapes.milli[None, :, None]  # (B, M, D)
    fits_gpu = roomy.sum(axis=2) >= shapes.count[None, :]
    unusable = np.where(~roomy, dev[:, None, :], 0).sum(axis=2)  # (B, M)
    gpu_task = shapes.count > 0
    frag = np.where(gpu_task[None, :], np.where(fits_other & fits_gpu, unusable, total[:, None]),
                    np.where(fits_other, 0.0, total[:, None]))
    return np.asarray(frag @ shapes.weight, dtype=np.float64)


def cluster_fragmentation(problem: Problem, a: Assignment, by_devices: bool = False) -> tuple[float, float]:
    """(fragmented milli-GPU, its share of the free milli-GPU) after assignment ``a``;
    shapes weighted by pods (FGD's measure) or ``by_devices``."""
    if not problem.has_devices:
        return 0.0, 0.0
    free = problem.free - a.load(problem)
    device_free = a.devices_left(problem)
    nodes = np.arange(problem.n_nodes)
    frag = float(node_fragmentation(TaskShapes.of(problem, by_devices), free, device_free, nodes).sum())
    total_free = float(np.maximum(device_free, 0).sum())
    return frag, (frag / total_free if total_free else 0.0)
