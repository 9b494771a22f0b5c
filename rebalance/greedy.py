"""A fast first answer for the move-aware model: best single move, repeated.

``balance``: at each step, among the pods still on their original node and the model's
candidate target nodes, the move that lowers sum_r w_r sum_i (u_ir - mu_r)^2 most (exactly, mu
fixed as in the model), within every budget and the capacity rows; stop when no move helps.
``binpack``: empty whole nodes, the one with the fewest movable pods first, re-placing each pod
on the fullest node it fits, and keep a node's moves only when all of its pods found room.
The answer is the exact backend's hint, so the backend starts from it and only improves.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from kubeplace.models.problem import IntArray, fits
from kubeplace.rebalance.layout import Layout
from kubeplace.rebalance.model import Budgets


def everywhere(layout: Layout) -> Any:
    """The greedy's view of the layout: every eligible (class, node) pair is a candidate."""
    cls, node = np.nonzero(layout.eligible)
    return SimpleNamespace(layout=layout, pair_cls=cls.astype(np.int64), pair_node=node.astype(np.int64))


class _Budget:
    def __init__(self, model: Any, budgets: Budgets) -> None:
        self.layout, self.b = model.layout, budgets
        self.total = 0
        self.node = np.zeros(model.layout.problem.n_nodes, np.int64)
        self.ns: dict[str, int] = {}
        self.pdb = np.zeros(len(model.layout.pdb_allowed), np.int64)

    def allows(self, c: int, i: int) -> bool:
        b, lay = self.b, self.layout
        if b.max_moves is not None and self.total >= b.max_moves:
            return False
        if b.per_node is not None and self.node[i] >= b.per_node:
            return False
        if b.per_namespace is not None and self.ns.get(lay.namespace[c], 0) >= b.per_namespace:
            return False
        return not b.pdbs or all(self.pdb[j] < lay.pdb_allowed[j] for j in lay.pdbs[c])

    def take(self, c: int, i: int, sign: int = 1) -> None:
        self.total += sign
        self.node[i] += sign
        ns = self.layout.namespace[c]
        self.ns[ns] = self.ns.get(ns, 0) + sign
        for j in self.layout.pdbs[c]:
            self.pdb[j] += sign


def _targets(model: Any) -> list[IntArray]:
    return [model.pair_node[model.pair_cls == c] for c in range(model.layout.n_classes)]


def greedy_balance(model: Any, budgets: Budgets) -> IntArray:
    lay, p = model.layout, model.layout.problem
    terms = lay.balance_terms()
    y: IntArray = lay.x0.copy()
    if not terms:
        return y
    rs = np.array([r for r, _ in terms])
    w = np.array([wt for _, wt in terms], dtype=np.float64)
    cap = p.capacity[:, rs].astype(np.float64)
    has = cap > 0
    safe = np.where(has, cap, 1.0)
    load = lay.load(y)[:, rs].astype(np.float64)
    mu = load.sum(axis=0) / np.maximum(cap.sum(axis=0), 1)  # floats: sums over nodes never wrap
    room = lay.room(y)
    targets = _targets(model)
    budget = _Budget(model, budgets)
    demand = lay.demand

    def cost(lo: np.ndarray, nodes: IntArray | int) -> np.ndarray:
        return np.asarray((np.where(has[nodes], (lo / safe[nodes] - mu) ** 2, 0.0) * w).sum(axis=-1))

    base = np.where(has, (load / safe - mu) ** 2, 0.0) @ w
    while True:
        best = (0.0, -1, -1, -1)
        for c in range(lay.n_classes):
            d = demand[c, rs].astype(np.float64)
            sources = np.nonzero((y[c] > 0) & (y[c] <= lay.x0[c]))[0]
            tj = targets[c]
            tj = tj[fits(room[tj], demand[c]) & (y[c, tj] >= lay.x0[c, tj])]
            if len(sources) == 0 or len(tj) == 0:
                continue
            gain_in = cost(load[tj] + d, tj) - base[tj]  # (T,)
            for i in sources:
                if not budget.allows(c, int(i)):
                    continue
                delta = cost(load[i] - d, int(i)) - base[i] + gain_in
                delta = np.where(tj == i, np.inf, delta)
                k = int(np.argmin(delta))
                if delta[k] < best[0] - 1e-12:
                    best = (float(delta[k]), c, int(i), int(tj[k]))
        if best[1] < 0:
            return y
        bc, bi, bj = int(best[1]), int(best[2]), int(best[3])
        y[bc, bi] -= 1
        y[bc, bj] += 1
        room[bi] += demand[bc]
        room[bj] -= demand[bc]
        load[bi] -= demand[bc, rs]
        load[bj] += demand[bc, rs]
        pair = np.array([bi, bj])
        base[pair] = cost(load[pair], pair)
        budget.take(bc, bi)


def greedy_binpack(model: Any, budgets: Budgets) -> IntArray:
    lay, p = model.layout, model.layout.problem
    y: IntArray = lay.x0.copy()
    pods = p.resource_index("pods")
    room = lay.room(y)
    budget = _Budget(model, budgets)
    busy_fixed = p.used[:, pods] > 0 if pods is not None else np.zeros(p.n_nodes, np.bool_)
    count = y.sum(axis=0)
    order = [int(i) for i in np.argsort(count, kind="stable") if count[i] > 0 and not busy_fixed[i]]
    emptied: set[int] = set()
    for i in order:
        trial_y, trial_room = y.copy(), room.copy()
        i = int(i)
        taken: list[int] = []
        ok = True
        for c in (int(k) for k in np.nonzero(trial_y[:, i])[0]):
            for _ in range(int(trial_y[c, i])):
                tj = model.pair_node[(model.pair_cls == c) & (model.pair_node != i)]
                tj = np.array([j for j in tj if j not in emptied and fits(trial_room[j], lay.demand[c])
                               and (trial_y[:, j].sum() > 0 or busy_fixed[j])], dtype=np.int64)
                if len(tj) == 0 or not budget.allows(int(c), i):
                    ok = False
                    break
                j = int(tj[np.argmin((trial_room[tj] / np.maximum(p.capacity[tj], 1)).sum(axis=1))])
                trial_y[c, i] -= 1
                trial_y[c, j] += 1
                trial_room[j] -= lay.demand[c]
                trial_room[i] += lay.demand[c]
                budget.take(int(c), i)
                taken.append(int(c))
            if not ok:
                break
        if ok:
            y, room = trial_y, trial_room
            emptied.add(i)
        else:
            for c in taken:
                budget.take(c, i, -1)
    return y
