"""A fast upper bound on the best profit of one node: Lagrangian relaxation.

Price the node's resources (as the kubelet counts them) at theta >= 0 and let every device choose
its pods on its own (a class may reach its count on each device; a pod on g devices
counts 1/g of its value on each). The node then splits: each device is a bounded
knapsack over shares (exact DP), whole-GPU pods a knapsack over device counts, CPU-only
pods take their whole count when their priced value is positive. For every theta

    UB(theta) = theta . free + best split node at priced values

bounds the node's best profit from above; a projected subgradient (Polyak steps toward
the best known node) lowers it. The knapsacks are integer, so this is at least as tight
as the LP relaxation of the pricing model, and it takes milliseconds per theta.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kubeplace.models.gpu import WHOLE
from kubeplace.models.problem import IntArray, Problem

FloatArray = npt.NDArray[np.float64]
STEPS = 60


def knapsack_table(cap: int, size: IntArray, value: FloatArray, most: IntArray) -> tuple[FloatArray, IntArray]:
    """Bounded knapsack DP: best value per capacity 0..cap, and the copies chosen per item."""
    best = np.zeros(cap + 1)
    choice = np.zeros((len(size), cap + 1), dtype=np.int64)
    for i in range(len(size)):
        prev = best.copy()
        for t in range(1, int(most[i]) + 1):
            s = t * int(size[i])
            if s > cap:
                break
            cand = prev[: cap + 1 - s] + t * value[i]
            better = cand > best[s:]
            best[s:] = np.where(better, cand, best[s:])
            choice[i, s:][better] = t
    return best, choice


def copies(choice: IntArray, size: IntArray, cap: int) -> IntArray:
    """The items of the best knapsack of capacity ``cap`` from ``knapsack_table``."""
    out, w = np.zeros(len(size), dtype=np.int64), cap
    for i in range(len(size) - 1, -1, -1):
        out[i] = choice[i, w]
        w -= out[i] * int(size[i])
    return out


def node_bound(problem: Problem, free: IntArray, devices: IntArray, classes: IntArray, profit: FloatArray,
               target: float) -> float:
    """Upper bound on max sum_c profit_c * n_c over one node with these ``free``
    resources, free milli per ``devices`` and eligible ``classes``; ``target`` is the
    best known node profit (aims the subgradient steps)."""
    cand = classes[profit[classes] > 0]
    cand = cand[(problem.demand[cand][:, free <= 0] <= 0).all(axis=1)]
    if len(cand) == 0:
        return 0.0
    rows = free > 0
    use = problem.demand[cand][:, rows] / free[rows].astype(np.float64)  # resource use as a fraction of the node
    x = np.zeros(int(rows.sum()))  # theta_r * free_r: profit per whole node's worth of r
    best = np.inf
    for _ in range(STEPS):
        value, used = _split(problem, devices, cand, profit[cand] - use @ x, use)
        ub = float(x.sum()) + value
        best = min(best, ub)
        grad = 1.0 - used
        norm = float(grad @ grad)
        if norm < 1e-12 or best <= target * (1 + 1e-9):
            break
        x = np.maximum(0.0, x - max(ub - target, 1e-9 * abs(target)) / norm * grad)
    return max(best, 0.0)


def _split(problem: Problem, devs: IntArray, cand: IntArray, v: FloatArray, use: FloatArray
           ) -> tuple[float, FloatArray]:
    """(best value, resource use) of the split node at priced values ``v``."""
    gc = problem.gpu_count[cand] if problem.has_devices else np.zeros(len(cand), dtype=np.int64)
    milli = problem.gpu_milli[cand] if problem.has_devices else np.zeros(len(cand), dtype=np.int64)
    count = problem.count[cand]
    plain = (gc == 0) & (v > 0)
    value = float(v[plain] @ count[plain])
    used = use[plain].T @ count[plain]
    if len(devs) == 0:
        return value, used
    share = (gc > 0) & (milli < WHOLE) & (v > 0)
    whole = (milli >= WHOLE) & (v > 0)
    unit = int(np.gcd.reduce(np.concatenate([milli[share], devs[devs > 0], [WHOLE]])))
    size, per_dev = milli[share] // unit, v[share] / gc[share]
    fills: dict[int, tuple[float, FloatArray]] = {}
    for f in set(devs.tolist()):
        cap = f // unit
        table, choice = knapsack_table(cap, size, per_dev, np.minimum(count[share], cap // np.maximum(size, 1)))
        n = copies(choice, size, cap)
        fills[f] = (float(table[cap]), use[share].T @ (n / gc[share]))
    full = int((devs >= WHOLE).sum())
    table, choice = knapsack_table(full, gc[whole], v[whole], count[whole])
    j = int(np.argmax(table + (full - np.arange(full + 1)) * fills.get(WHOLE, (0.0, used))[0]))
    n_whole = copies(choice, gc[whole], j)
    value += float(table[j]) + sum(fills[f][0] for f in devs.tolist() if f < WHOLE)
    used = used + use[whole].T @ n_whole + sum(fills[f][1] for f in devs.tolist() if f < WHOLE)
    if WHOLE in fills:
        value += (full - j) * fills[WHOLE][0]
        used = used + (full - j) * fills[WHOLE][1]
    return value, used
