"""A fast upper bound on the best profit of one node: Lagrangian relaxation.

Price the node's resources other than GPUs at theta >= 0 and let every device choose
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

from kube.objects import GPU
from models.gpu import WHOLE
from models.problem import IntArray, Problem
from solver.pricing import FloatArray, NodeShape, copies, knapsack_table

STEPS = 60


def node_bound(problem: Problem, shape: NodeShape, profit: FloatArray, target: float) -> float:
    """Upper bound on max sum_c profit_c * n_c over the feasible nodes of ``shape``;
    ``target`` is the best known node profit (aims the subgradient steps)."""
    cand = shape.classes[profit[shape.classes] > 0]
    if len(cand) == 0:
        return 0.0
    rows = np.array([r != GPU for r in problem.resources]) & (shape.free > 0)
    free = shape.free[rows].astype(np.float64)
    use = problem.demand[cand][:, rows] / free  # resource use as a fraction of the node
    x = np.zeros(len(free))  # theta_r * free_r: profit per whole node's worth of r
    best = np.inf
    for _ in range(STEPS):
        value, used = _split(problem, shape, cand, profit[cand] - use @ x, use)
        ub = float(x.sum()) + value
        best = min(best, ub)
        grad = 1.0 - used
        norm = float(grad @ grad)
        if norm < 1e-12 or best <= target * (1 + 1e-9):
            break
        x = np.maximum(0.0, x - max(ub - target, 1e-9 * abs(target)) / norm * grad)
    return max(best, 0.0)


def _split(problem: Problem, shape: NodeShape, cand: IntArray, v: FloatArray, use: FloatArray
           ) -> tuple[float, FloatArray]:
    """(best value, resource use) of the split node at priced values ``v``."""
    gc = problem.gpu_count[cand] if problem.has_devices else np.zeros(len(cand), dtype=np.int64)
    milli = problem.gpu_milli[cand] if problem.has_devices else np.zeros(len(cand), dtype=np.int64)
    count = problem.count[cand]
    plain = (gc == 0) & (v > 0)
    value = float(v[plain] @ count[plain])
    used = use[plain].T @ count[plain]
    devs = shape.devices
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
