"""Pricing of the offline bound's configuration LP: the most value one empty node of a kind holds.

Devices are packed exactly (whole-GPU pods take whole devices of the node, shares fill each other
device up to 1000 milli, a class at most ``count`` times on one device). On top, one resource of
the node (cpu or memory, ``exact``) may be kept per node, in units of ``cap / STEPS`` with every
pod's request rounded DOWN to whole units: the sum of rounded requests of the pods of a real node
never passes its rounded capacity, so every real node is still a candidate and the best value
found still bounds the real best from above. Without it (``exact=None``) cpu and memory are left
to the master's pooled rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from kubeplace_bench.gpusim import WHOLE, BoolArray, IntArray

FloatArray = npt.NDArray[np.float64]
STEPS = 96
"""Units the exact resource of one node is counted in."""


def knapsack_2d(cap_a: int, cap_b: int, size_a: IntArray, size_b: IntArray, value: FloatArray,
                most: IntArray) -> tuple[FloatArray, npt.NDArray[np.int16]]:
    """Bounded knapsack in two dimensions: the best value within (a, b) for every a <= cap_a,
    b <= cap_b, and the copies of each item chosen (for :func:`copies_2d`)."""
    best = np.zeros((cap_a + 1, cap_b + 1))
    choice = np.zeros((len(value), cap_a + 1, cap_b + 1), dtype=np.int16)
    for i in range(len(value)):
        prev = best.copy()
        for t in range(1, int(most[i]) + 1):
            sa, sb = t * int(size_a[i]), t * int(size_b[i])
            if sa > cap_a or sb > cap_b:
                break
            cand = prev[: cap_a + 1 - sa, : cap_b + 1 - sb] + t * value[i]
            better = cand > best[sa:, sb:]
            best[sa:, sb:] = np.where(better, cand, best[sa:, sb:])
            choice[i, sa:, sb:][better] = t
    return best, choice


def copies_2d(choice: npt.NDArray[np.int16], size_a: IntArray, size_b: IntArray, a: int, b: int) -> IntArray:
    out = np.zeros(choice.shape[0], dtype=np.int64)
    for i in range(choice.shape[0] - 1, -1, -1):
        out[i] = choice[i, a, b]
        a, b = a - int(out[i] * size_a[i]), b - int(out[i] * size_b[i])
    return out


def knapsack_by_size(cap: int, size: IntArray, value: FloatArray, most: IntArray
                     ) -> tuple[FloatArray, Callable[[int], IntArray]]:
    """Bounded knapsack (one dimension) with the items of equal size taken together, the most
    valuable first (so a size is one item of up to cap // size copies, whatever the number of
    classes of that size): the best value within every capacity 0..cap, and the copies of each
    item that reach the best within a given capacity."""
    best = np.zeros(cap + 1)
    sizes = np.unique(size[size > 0]) if len(size) else np.zeros(0, dtype=np.int64)
    choice = np.zeros((len(sizes), cap + 1), dtype=np.int64)
    queues = []
    for g, one in enumerate(sizes.tolist()):
        members = np.nonzero(size == one)[0]
        order = members[np.argsort(-value[members], kind="stable")]
        queue = np.repeat(order, np.minimum(most[order], cap // one))[: cap // one]
        gain = np.concatenate([[0.0], np.cumsum(value[queue])])
        prev = best.copy()
        for t in range(1, len(queue) + 1):
            cand = prev[: cap + 1 - t * one] + gain[t]
            better = cand > best[t * one:]
            best[t * one:] = np.where(better, cand, best[t * one:])
            choice[g, t * one:][better] = t
        queues.append(queue)

    def counts(within: int) -> IntArray:
        out = np.zeros(len(size), dtype=np.int64)
        for g in range(len(sizes) - 1, -1, -1):
            t = int(choice[g, within])
            np.add.at(out, queues[g][:t], 1)
            within -= t * int(sizes[g])
        return out

    return best, counts


def best_node(value: FloatArray, eligible: BoolArray, gpus: IntArray, milli: IntArray, count: IntArray,
              n_dev: int, request: IntArray | None = None, capacity: int = 0) -> tuple[float, IntArray]:
    """The most ``value`` (per class, per pod) one empty node with ``n_dev`` devices holds, and the
    pods per class reaching it; with ``request`` (per class) also within ``capacity`` of that
    resource (rounded down to units of capacity / STEPS)."""
    unit = max(1, -(-capacity // STEPS)) if request is not None else 1
    cap = capacity // unit if request is not None else 0
    size = request // unit if request is not None else np.zeros(len(value), dtype=np.int64)
    usable = eligible & (value > 0) & (size <= cap)
    share = np.nonzero(usable & (gpus == 1) & (milli < WHOLE))[0]
    whole = np.nonzero(usable & (milli >= WHOLE) & (gpus <= n_dev))[0]
    out = np.zeros(len(value), dtype=np.int64)
    if request is None:
        return _best_pooled(value, gpus, milli, count, n_dev, share, whole)
    # one device's best shares within r units, r = 0..cap
    m_unit = int(np.gcd.reduce(np.concatenate([milli[share], [WHOLE]])))
    m_size, m_cap = milli[share] // m_unit, WHOLE // m_unit
    device, device_choice = knapsack_2d(m_cap, cap, m_size, size[share], value[share],
                                        np.minimum(count[share], m_cap // np.maximum(m_size, 1)))
    one = device[m_cap]
    # d devices of shares within r units: (max, +) convolution, the split kept to trace back
    fills, splits = [np.zeros(cap + 1)], []
    r = np.arange(cap + 1)
    for _ in range(n_dev):
        rest = r[:, None] - r[None, :]
        table = np.where(rest >= 0, fills[-1][np.maximum(rest, 0)] + one[None, :], -np.inf)
        splits.append(np.argmax(table, axis=1))
        fills.append(table.max(axis=1))
    # whole pods over (devices, units), the share devices take what is left
    taken, taken_choice = knapsack_2d(n_dev, cap, gpus[whole], size[whole], value[whole], count[whole])
    total = np.array([[taken[j, rw] + fills[n_dev - j][cap - rw] for rw in range(cap + 1)] for j in range(n_dev + 1)])
    j, rw = (int(x) for x in np.unravel_index(int(np.argmax(total)), total.shape))
    out[whole] = copies_2d(taken_choice, gpus[whole], size[whole], j, rw)
    left = cap - rw
    for d in range(n_dev - j, 0, -1):
        own = int(splits[d - 1][left])
        out[share] += copies_2d(device_choice, m_size, size[share], m_cap, own)
        left -= own
    return float(total[j, rw]), out


def _best_pooled(value: FloatArray, gpus: IntArray, milli: IntArray, count: IntArray, n_dev: int,
                 share: IntArray, whole: IntArray) -> tuple[float, IntArray]:
    """``best_node`` without a resource per node: one device's best shares, the same on every
    device not taken whole."""
    out = np.zeros(len(value), dtype=np.int64)
    m_unit = int(np.gcd.reduce(np.concatenate([milli[share], [WHOLE]])))
    m_size, m_cap = milli[share] // m_unit, WHOLE // m_unit
    device, fill = knapsack_by_size(m_cap, m_size, value[share], np.minimum(count[share], m_cap // m_size))
    taken, whole_counts = knapsack_by_size(n_dev, gpus[whole], value[whole], count[whole])
    j = int(np.argmax(taken + (n_dev - np.arange(n_dev + 1)) * device[m_cap]))
    out[whole] = whole_counts(j)
    out[share] += fill(m_cap) * (n_dev - j)
    return float(taken[j]) + (n_dev - j) * float(device[m_cap]), out
