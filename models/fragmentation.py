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

import threading
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
    if len(shapes.weight) == 0 or device_free.shape[1] == 0:
        return np.zeros(len(nodes))
    return np.asarray(_per_shape(shapes, free, device_free, nodes) @ shapes.weight, dtype=np.float64)


def _shape_matrix(shapes: TaskShapes, free: IntArray, device_free: IntArray, nodes: IntArray) -> FloatArray:
    """(B, M) what each task shape cannot use of each node's free GPU capacity (milli)."""
    dev = np.maximum(device_free, 0)
    total = dev.sum(axis=1).astype(np.float64)  # (B,)
    fits_other = fits(free[:, None, shapes.resources], shapes.demand[None, :, :])  # (B, M)
    fits_other &= shapes.eligible[:, nodes].T
    roomy = device_free[:, None, :] >= shapes.milli[None, :, None]  # (B, M, D)
    fits_gpu = roomy.sum(axis=2) >= shapes.count[None, :]
    unusable = np.where(~roomy, dev[:, None, :], 0).sum(axis=2)  # (B, M)
    gpu_task = shapes.count > 0
    return np.asarray(np.where(gpu_task[None, :], np.where(fits_other & fits_gpu, unusable, total[:, None]),
                               np.where(fits_other, 0.0, total[:, None])), dtype=np.float64)


BANK_BYTES = 16 << 20
"""Memory a bank of node rows may take before it starts again (see :class:`_Bank`)."""
BANKS_KEPT = 2
"""Sets of task shapes whose banks are kept (the workload's, and one that just changed)."""


class _Bank:
    """Rows of :func:`_shape_matrix` for one set of task shapes, by the node state they are of
    (its free resources and devices): a node's row is a function of its state alone, and most
    nodes keep their state from one cycle (or one candidate) to the next."""

    def __init__(self, width: int) -> None:
        self.index: dict[bytes, int] = {}
        self.rows = np.empty((64, width), dtype=np.float64)
        self.limit = max(1024, BANK_BYTES // (8 * max(width, 1)))

    def make_room(self, rows: int) -> None:
        """Starts again when ``rows`` more would pass the limit (before any row is looked up)."""
        if len(self.index) + rows > self.limit:
            self.index.clear()

    def store(self, keys: list[bytes], rows: FloatArray) -> None:
        n = len(self.index)
        if n + len(keys) > len(self.rows):
            grown = np.empty((max(2 * len(self.rows), n + len(keys)), self.rows.shape[1]), dtype=np.float64)
            grown[:n] = self.rows[:n]
            self.rows = grown
        self.rows[n: n + len(keys)] = rows
        for k, key in enumerate(keys):
            self.index[key] = n + k


_BANKS: dict[bytes, _Bank] = {}
_BANKS_LOCK = threading.Lock()


def _per_shape(shapes: TaskShapes, free: IntArray, device_free: IntArray, nodes: IntArray) -> FloatArray:
    """:func:`_shape_matrix`, its rows taken from the bank of these shapes where a node's state
    was met before (the values are the same: each row is computed alone, elementwise); only for
    integer states and shapes every node accepts (the workload's)."""
    if (free.dtype != np.int64 or device_free.dtype != np.int64 or not len(nodes)
            or not bool(shapes.eligible.all())):
        return _shape_matrix(shapes, free, device_free, nodes)
    states = np.ascontiguousarray(np.concatenate([free[:, shapes.resources], device_free], axis=1))
    width = states.shape[1] * 8
    raw = states.tobytes()
    keys = [raw[i * width: (i + 1) * width] for i in range(len(states))]
    shape_key = b"".join((np.array([*shapes.demand.shape, device_free.shape[1]], dtype=np.int64).tobytes(),
                          np.ascontiguousarray(shapes.demand, dtype=np.int64).tobytes(),
                          np.ascontiguousarray(shapes.resources, dtype=np.int64).tobytes(),
                          np.ascontiguousarray(shapes.count, dtype=np.int64).tobytes(),
                          np.ascontiguousarray(shapes.milli, dtype=np.int64).tobytes()))
    with _BANKS_LOCK:
        bank = _BANKS.pop(shape_key, None) or _Bank(len(shapes.weight))
        _BANKS[shape_key] = bank
        while len(_BANKS) > BANKS_KEPT:
            del _BANKS[next(iter(_BANKS))]
        bank.make_room(len(keys))
        index = bank.index
        found = [index.get(key, -1) for key in keys]
        missing: dict[bytes, int] = {}
        for i, at in enumerate(found):
            if at < 0:
                missing.setdefault(keys[i], i)
        if missing:
            rows = list(missing.values())
            bank.store(list(missing), _shape_matrix(shapes, free[rows], device_free[rows], nodes[rows]))
            found = [index[key] for key in keys]
        return bank.rows[np.array(found, dtype=np.int64)]


def forget_banks() -> None:
    """Drops the banked rows (tests compare a cold computation with a warm one)."""
    with _BANKS_LOCK:
        _BANKS.clear()


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
