"""FGD's typical pods and GPU fragmentation exactly as the FGD authors' simulator defines them
(Weng et al., "Beware of Fragmentation", USENIX ATC 2023; hkust-adsl/kubernetes-scheduler-simulator).

The workload is summarised by a distribution ``M`` of task shapes: (cpu, gpu_milli per device,
num_gpu, accepted GPU models as written), each with its popularity (how many pods have that
shape). As in the authors' simulator ("typical pods"): CPU-only pods are included, memory is not
part of a shape, and only the most popular shapes that together cover 95% of the pods are kept
(then renormalised). A GPU model list keeps its repeats ("V100M16|V100M32|V100M32" is a shape of
its own, as the simulator compares the strings).

For a node n and a task shape m, the fragmented GPU milli F_n(m) is

- all of the node's free GPU milli when m cannot run there at all: m needs no GPU (a CPU-only task
  cannot use GPUs), the node's model is not one m accepts, the node lacks the cpu m asks for, or
  fewer than ``num_gpu`` devices have ``gpu_milli`` free;
- otherwise the free milli of the devices that each have less than ``gpu_milli`` free (what the
  task could not use on that node).

Node fragmentation is F_n(M) = sum_m p_m F_n(m); cluster fragmentation is the sum over nodes.

This is the authors' measure, kept apart from kubeplace's own (``models.fragmentation``: memory in
the shapes, a CPU-only task strands GPUs only where it does not fit, shapes weighted by devices for
placement), which its objective and its greedy warm start use: the baselines must be the authors'
to the last tie.

Implementation note. With W the total popularity, for a GPU shape m,
``p_m F_n(m) = p_m * free_total - p_m * Q3_m * usable_m`` where ``usable_m`` is the free milli on
devices with at least ``gpu_milli`` free and Q3_m says the task fits. Shapes with the same
(gpu_milli, num_gpu) share ``usable`` and the device count; their popularities that fit a node
depend only on its model and free cpu, a step function tabulated once. :class:`FragIndex` keeps
those per-node sums up to date and scores candidate placements for FGD with integer arithmetic
(popularities are counts), so equal states give exactly equal scores.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kubeplace.models.gpu import WHOLE
from kubeplace.models.problem import BoolArray, IntArray
from kubeplace.simulate.policies.node_view import DeviceView, PodShape

FloatArray = npt.NDArray[np.float64]


class ListedPod(PodShape, Protocol):
    """A pod of the list the typical pods are taken from: a pod's shape and its GPU models."""

    @property
    def models(self) -> tuple[str, ...]:
        """Accepted GPU models as written (() = any)."""


POPULARITY = 0.95


@dataclass(frozen=True)
class TaskDistribution:
    """FGD's typical pods: the kept shapes, most popular first, and their pod counts."""

    cpu: IntArray  # (M,)
    milli: IntArray  # (M,), 0 for CPU-only shapes
    num: IntArray  # (M,)
    models: tuple[tuple[str, ...], ...]  # (M,), () = any
    weight: IntArray  # (M,) pod counts
    listed: int = 0  # pods in the list the shapes were taken from (0: the shapes' own total)

    @property
    def total(self) -> int:
        return int(self.weight.sum())

    @property
    def prob(self) -> FloatArray:
        return np.asarray(self.weight / max(self.total, 1), dtype=np.float64)

    def __len__(self) -> int:
        return len(self.weight)


def task_distribution(pods: Sequence[ListedPod], popularity: float = POPULARITY) -> TaskDistribution:
    """The most popular shapes covering ``popularity`` of the pods, most popular first (on equal
    counts the larger shape first), as FGD's simulator selects its typical pods."""
    counts = Counter((p.cpu, p.gpu_milli if p.num_gpu else 0, p.num_gpu, p.models if p.num_gpu else ())
                     for p in pods)  # (a CPU-only pod's GPU models are ignored, as the simulator ignores them)
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], *kv[0][:3], "|".join(kv[0][3])), reverse=True)
    kept: list[tuple[tuple[int, int, int, tuple[str, ...]], int]] = []
    covered, need = 0, popularity * sum(counts.values())
    for shape, n in ranked:
        if covered >= need and kept:
            break
        kept.append((shape, n))
        covered += n
    return TaskDistribution(
        cpu=np.array([s[0] for s, _ in kept], dtype=np.int64),
        milli=np.array([s[1] for s, _ in kept], dtype=np.int64),
        num=np.array([s[2] for s, _ in kept], dtype=np.int64),
        models=tuple(s[3] for s, _ in kept),
        weight=np.array([n for _, n in kept], dtype=np.int64),
        listed=len(pods),
    )


def node_fragmentation(cpu_free: IntArray, dev_free: IntArray, node_models: Sequence[str],
                       dist: TaskDistribution) -> FloatArray:
    """F_n(M) for every node, in milli-GPU (the direct definition, one shape at a time)."""
    total = dev_free.sum(axis=1)
    frag = np.zeros(len(total), dtype=np.float64)
    model_arr = np.asarray(node_models, dtype=object)
    for m in range(len(dist)):
        p = float(dist.prob[m])
        milli, num = int(dist.milli[m]), int(dist.num[m])
        if milli == 0:
            frag += p * total
            continue
        fits = dev_free >= milli
        ok = (cpu_free >= dist.cpu[m]) & (fits.sum(axis=1) >= num)
        if dist.models[m]:
            ok &= np.isin(model_arr, dist.models[m])
        small = np.where(fits, 0, dev_free).sum(axis=1)
        frag += p * np.where(ok, small, total)
    return frag


class FragIndex:
    """Per-node fragmentation kept current, and the fragmentation a placement would leave.

    Values are scaled by the total popularity W (integers): ``scaled = W * F_n(M)``.
    """

    def __init__(self, view: DeviceView, dist: TaskDistribution) -> None:
        self.view = view
        self.w_total = dist.total
        gpu_shapes = np.flatnonzero(dist.milli > 0)
        groups = sorted({(int(dist.milli[m]), int(dist.num[m])) for m in gpu_shapes})
        self.g_milli = np.array([g[0] for g in groups], dtype=np.int64)
        self.g_num = np.array([g[1] for g in groups], dtype=np.int64)
        self.thresholds = np.array(sorted({int(dist.cpu[m]) for m in gpu_shapes}), dtype=np.int64)
        # table[model, group, level]: popularity of the group's shapes a node of that model and with
        # ``level`` thresholds <= its free cpu could host
        table = np.zeros((len(view.models), len(groups), len(self.thresholds) + 1), dtype=np.int64)
        for m in gpu_shapes:
            g = groups.index((int(dist.milli[m]), int(dist.num[m])))
            level = int(np.searchsorted(self.thresholds, dist.cpu[m], side="left")) + 1
            for k, name in enumerate(view.models):
                if not dist.models[m] or name in dist.models[m]:
                    table[k, g, level:] += dist.weight[m]
        self.table = table
        n = len(view.cpu_free)
        self.count = np.zeros((n, len(groups)), dtype=np.int64)  # devices with >= g_milli free
        self.usable = np.zeros((n, len(groups)), dtype=np.int64)  # free milli on those devices
        self.scaled = np.zeros(n, dtype=np.int64)
        self.total = np.zeros(n, dtype=np.int64)  # free milli per node
        self.distinct = np.zeros_like(view.dev_free, dtype=np.bool_)  # first device of each free value
        self.refresh(np.arange(n))

    def _level(self, cpu: IntArray) -> IntArray:
        result: IntArray = np.searchsorted(self.thresholds, cpu, side="right")
        return result

    def _scaled(self, nodes: IntArray, total: IntArray, count: IntArray, usable: IntArray,
                cpu: IntArray) -> IntArray:
        weights = self.table[self.view.model_id[nodes], :, self._level(cpu)]  # (C, U)
        fits = count >= self.g_num
        result: IntArray = self.w_total * total - (weights * np.where(fits, usable, 0)).sum(axis=1)
        return result

    def refresh(self, nodes: IntArray) -> None:
        """Recomputes the sums of ``nodes`` after their free capacity changed."""
        dev = self.view.dev_free[nodes]  # (C, D)
        fits = dev[:, None, :] >= self.g_milli[None, :, None]  # (C, U, D)
        self.count[nodes] = fits.sum(axis=2)
        self.usable[nodes] = np.where(fits, dev[:, None, :], 0).sum(axis=2)
        self.total[nodes] = dev.sum(axis=1)
        self.distinct[nodes] = first_of_value(dev, self.view.n_gpu[nodes])
        self.scaled[nodes] = self._scaled(nodes, self.total[nodes], self.count[nodes], self.usable[nodes],
                                          self.view.cpu_free[nodes])

    def after_cpu_only(self, nodes: IntArray, cpu: int) -> IntArray:
        return self._scaled(nodes, self.total[nodes], self.count[nodes], self.usable[nodes],
                            self.view.cpu_free[nodes] - cpu)

    def after_whole(self, nodes: IntArray, cpu: int, k: int) -> IntArray:
        """k completely free devices taken (every group's gpu_milli <= 1000, so each counted)."""
        return self._scaled(nodes, self.total[nodes] - k * WHOLE, self.count[nodes] - k,
                            self.usable[nodes] - k * WHOLE, self.view.cpu_free[nodes] - cpu)

    def after_share(self, nodes: IntArray, devices: IntArray, cpu: int, milli: int) -> IntArray:
        """``milli`` taken from device ``devices[c]`` of node ``nodes[c]``, for each candidate c."""
        c = self.view
        before = c.dev_free[nodes, devices][:, None]
        after = before - milli
        gm = self.g_milli[None, :]
        was, now = before >= gm, after >= gm
        count = self.count[nodes] - was + now
        usable = self.usable[nodes] - np.where(was, before, 0) + np.where(now, after, 0)
        return self._scaled(nodes, self.total[nodes] - milli, count, usable, c.cpu_free[nodes] - cpu)

    def share_candidates(self, nodes: IntArray, milli: int) -> tuple[IntArray, IntArray]:
        """(node, device) pairs of ``nodes`` with room for ``milli``, one per distinct free value
        within a node (devices with equal free milli are interchangeable): the lowest index."""
        local, devices = np.nonzero(self.distinct[nodes] & (self.view.dev_free[nodes] >= milli))
        return nodes[local], devices.astype(np.int64)


def first_of_value(dev_free: IntArray, n_gpu: IntArray) -> BoolArray:
    """Existing devices that are the lowest-index one with their free milli on their node."""
    d = dev_free.shape[1]
    exists: BoolArray = np.arange(d)[None, :] < n_gpu[:, None]
    same_before = (dev_free[:, :, None] == dev_free[:, None, :]) & np.tri(d, k=-1, dtype=np.bool_)[None, :, :]
    result: BoolArray = exists & ~same_before.any(axis=2)
    return result
