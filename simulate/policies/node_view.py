"""What the FGD authors' policies read and decide: each node's free cpu and GPU devices, a pod's
shape, the choice of devices on a node, and the tie-break by a node order.

The policies (``simulate.policies``) score the nodes one pod may go to; they never decide whether
it fits (the caller gives the feasible nodes: the device simulator of the benchmarks, or
``simulate``'s placement state with every filter of the profile) and never change the nodes (the
caller takes the pod and calls :meth:`Chooser.refresh` on the nodes that changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from kubeplace.models.gpu import WHOLE
from kubeplace.models.problem import IntArray


class DeviceView(Protocol):
    """The nodes as the policies see them, arrays indexed by node."""

    @property
    def models(self) -> tuple[str, ...]:
        """The GPU models; ``models[0]`` is "" (a node without GPUs, or without a model label)."""

    @property
    def model_id(self) -> IntArray:
        """(N,) index into ``models``."""

    @property
    def n_gpu(self) -> IntArray:
        """(N,) devices per node."""

    @property
    def cpu_free(self) -> IntArray:
        """(N,) free milli-CPU."""

    @property
    def dev_free(self) -> IntArray:
        """(N, D) free milli-GPU per device, 0 past a node's devices."""


class PodShape(Protocol):
    """What the policies read of a pod: milli-CPU, and ``num_gpu`` devices with ``gpu_milli`` each
    (1000: whole GPUs; 0 and 0: CPU only)."""

    @property
    def cpu(self) -> int: ...

    @property
    def num_gpu(self) -> int: ...

    @property
    def gpu_milli(self) -> int: ...


def is_share(pod: PodShape) -> bool:
    return pod.num_gpu == 1 and 0 < pod.gpu_milli < WHOLE


def gpu_total(pod: PodShape) -> int:
    return pod.num_gpu * pod.gpu_milli


Choice = tuple[int, tuple[int, ...]]
"""(node, the devices the pod takes there)."""


class Chooser(Protocol):
    def choose(self, pod: PodShape, nodes: IntArray) -> Choice:
        """The node among ``nodes`` (all feasible, at least one) and the devices for ``pod``."""

    def refresh(self, nodes: IntArray) -> None:
        """The view changed on ``nodes`` (a pod was taken there, or taken back)."""


class TieOrder:
    """Picks among equally scored nodes by the smallest rank (each node's position in the
    tie-break order): the kube-scheduler vendored by the FGD authors' simulator takes the smallest
    node name among equal scores "for reproducibility"."""

    def __init__(self, rank: Sequence[int]) -> None:
        if sorted(rank) != list(range(len(rank))):
            raise ValueError("tie_rank must be a permutation of the node positions")
        self.rank = np.asarray(rank, dtype=np.int64)

    @staticmethod
    def by_name(names: Sequence[str]) -> TieOrder:
        """The order of the names as Go compares strings (bytes)."""
        order = sorted(range(len(names)), key=lambda k: names[k].encode())
        rank = [0] * len(names)
        for position, k in enumerate(order):
            rank[k] = position
        return TieOrder(rank)

    def best(self, nodes: IntArray, score: IntArray) -> int:
        """Position in ``nodes`` of a highest-scoring candidate (the first of a node on ties)."""
        tied = np.flatnonzero(score == score.max())
        if len(tied) == 1:
            return int(tied[0])
        return int(tied[np.argmin(self.rank[nodes[tied]])])


def lowest_devices(view: DeviceView, pod: PodShape, i: int) -> tuple[int, ...]:
    """Share: the lowest-index device with room; whole: the lowest-index free devices."""
    if pod.num_gpu == 0:
        return ()
    row = view.dev_free[i, : int(view.n_gpu[i])]
    room = np.flatnonzero(row >= WHOLE) if pod.gpu_milli >= WHOLE else np.flatnonzero(row >= pod.gpu_milli)
    return tuple(int(d) for d in room[: pod.num_gpu])


def tightest_device(view: DeviceView, pod: PodShape, i: int) -> tuple[int, ...]:
    """Share: the device with the least free milli that still fits (lowest index on ties), the
    simulator's "best" GPU selection; whole: the lowest-index free devices."""
    if not is_share(pod):
        return lowest_devices(view, pod, i)
    row = view.dev_free[i, : int(view.n_gpu[i])]
    masked = np.where(row >= pod.gpu_milli, row, WHOLE + 1)
    return (int(np.argmin(masked)),)
