"""Fragmentation deltas for the FGD-style greedy, from lookup tables.

FGD (Weng et al., ATC 2023) places each GPU pod where the cluster's fragmentation grows
least, fragmentation being the free GPU capacity the workload's task shapes cannot use.
Evaluated exactly (models/fragmentation.py) that costs a pass over every task shape per
candidate; here its GPU part is tabulated once per run, so a delta is two look-ups
(shapes weighted by the devices they ask for, as every placement decision weighs them,
see ``models.fragmentation``):

- a device with ``f`` milli free strands ``share(f) = sum_m p_m f [f < milli_m]`` for
  the share-sized tasks m (those with ``milli_m < 1000``);
- a node with ``F`` entirely free devices strands ``whole(F) = sum_m p_m 1000 F [F < n_m]``
  for the tasks m needing ``n_m`` whole GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubeplace.models.fragmentation import TaskShapes, node_fragmentation, popularity
from kubeplace.models.gpu import WHOLE, first_fit_rows
from kubeplace.models.problem import IntArray, Problem
from kubeplace.solver.state import PlacementState

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class FragmentationTables:
    share: FloatArray  # (1001,) stranded milli for a device with f free
    whole: FloatArray  # (D + 1,) stranded milli for a node with F free devices

    @staticmethod
    def of(problem: Problem) -> FragmentationTables:
        width = problem.device_free.shape[1] if problem.device_free.ndim == 2 else 0
        w = problem.workload
        if w is not None and len(w.count):
            all_count, all_milli, all_pods = w.gpu_count, w.gpu_milli, w.count
        elif problem.has_devices:
            all_count, all_milli, all_pods = problem.gpu_count, problem.gpu_milli, problem.count
        else:
            all_count = all_milli = all_pods = np.zeros(0, dtype=np.int64)
        gpu = all_count > 0
        p = popularity(all_pods[gpu], all_count[gpu], by_devices=True)
        milli, count = all_milli[gpu], all_count[gpu]
        f = np.arange(WHOLE + 1)
        shares = milli < WHOLE
        share = (f[:, None] * (f[:, None] < milli[None, shares]) * p[None, shares]).sum(axis=1)
        free_devices = np.arange(width + 1)
        wholes = ~shares
        whole = (WHOLE * free_devices[:, None] * (free_devices[:, None] < count[None, wholes])
                 * p[None, wholes]).sum(axis=1)
        return FragmentationTables(share.astype(np.float64), whole.astype(np.float64))


def best_device_delta(tables: FragmentationTables, device_free: IntArray, milli: int, count: int
                      ) -> tuple[FloatArray, IntArray]:
    """Per node (rows of ``device_free``): the fragmentation delta of one more pod needing
    ``count`` devices with ``milli`` each, and for a share the device that gives it.
    Nodes where it does not fit get +inf."""
    free = device_free
    full = (free >= WHOLE).sum(axis=1)
    if milli >= WHOLE:
        fits = full >= count
        delta = tables.whole[np.maximum(full - count, 0)] - tables.whole[np.minimum(full, len(tables.whole) - 1)]
        return np.where(fits, delta, np.inf), np.full(len(free), -1, dtype=np.int64)
    room = free >= milli
    after = np.clip(free - milli, 0, WHOLE)
    dev_delta = tables.share[after] - tables.share[np.clip(free, 0, WHOLE)]
    # a device that was entirely free is no longer: the whole-GPU tasks lose it
    was_full = free >= WHOLE
    full_loss = (tables.whole[np.maximum(full - 1, 0)] - tables.whole[np.minimum(full, len(tables.whole) - 1)])
    dev_delta = dev_delta + np.where(was_full, full_loss[:, None], 0.0)
    dev_delta = np.where(room, dev_delta, np.inf)
    best = np.argmin(dev_delta, axis=1)
    return dev_delta[np.arange(len(free)), best], best.astype(np.int64)


def fragmentation_after(state: PlacementState, shapes: TaskShapes, c: int, nodes: IntArray
                        ) -> tuple[FloatArray, IntArray]:
    """Exact FGD delta per node for one more pod of class c (its best-fit device for a
    share), and that device (-1 for whole GPUs: lowest free ones)."""
    need = state.need(c)
    free, dev = state.free[nodes], state.device_free[nodes]
    before = node_fragmentation(shapes, free, dev, nodes)
    picked = first_fit_rows(dev, need)
    after_dev = dev - picked * need.milli
    chosen = np.full(len(nodes), -1, dtype=np.int64)
    if need.milli < WHOLE:  # for a share, the picked device with the least left over (first_fit's first)
        rows = np.nonzero(picked.any(axis=1))[0]
        if rows.size:  # none when no node has a device (argmin of a (0, 0) table fails)
            chosen[rows] = np.argmin(np.where(picked[rows], dev[rows], WHOLE + 1), axis=1)
    after = node_fragmentation(shapes, free - state.problem.demand[c], after_dev, nodes)
    return after - before, chosen
