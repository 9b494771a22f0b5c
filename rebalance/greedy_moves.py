"""A fast first answer for the move-aware model: best single move, repeated.

``balance``: at each step, among the pods still on their original node and the model's
candidate target nodes, the move that lowers sum_r w_r sum_i (u_ir - mu_r)^2 most (exactly, mu
fixed as in the model), within every budget and the capacity rows; stop when no move helps.
``binpack``: empty whole nodes, the one with the fewest movable pods first, re-placing each pod
on the fullest node it fits, and keep a node's moves only when all of its pods found room.
``defrag``: at each step, the move that lowers the GPU fragmentation most (the exact measure of
``models.fragmentation``, node by node: a move changes only its two nodes'), within the budgets.
The answer is the exact backend's hint, so the backend starts from it and only improves.

Each is the greedy move of one objective term (``models.terms.TERMS``), one line of :data:`MOVES`
keyed by the term's type: ``rebalance.solve_moves`` tries the move of every term the objective has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np

from kubeplace.models.fragmentation import TaskShapes, node_fragmentation
from kubeplace.models.framework import FragmentationTerm, LoadBalanceTerm, NodesUsedTerm
from kubeplace.models.gpu import WHOLE
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


class _Moves:
    """The state of a best-single-move greedy: placement, room, budgets, candidate targets."""

    def __init__(self, model: Any, budgets: Budgets) -> None:
        self.layout = model.layout
        self.y: IntArray = model.layout.x0.copy()
        self.room = model.layout.room(self.y)
        self.targets = _targets(model)
        self.budget = _Budget(model, budgets)

    def best(self, into: Callable[[int, IntArray], np.ndarray],
             out_of: Callable[[int, int], float]) -> tuple[int, int, int] | None:
        """The move (class, from, to) whose change ``out_of(c, i) + into(c, j)`` is the most
        negative, among pods still on their node, targets with room, within the budgets."""
        lay, y = self.layout, self.y
        best = (0.0, -1, -1, -1)
        for c in range(lay.n_classes):
            sources = np.nonzero((y[c] > 0) & (y[c] <= lay.x0[c]))[0]
            tj = self.targets[c]
            tj = tj[fits(self.room[tj], lay.demand[c]) & (y[c, tj] >= lay.x0[c, tj])]
            if len(sources) == 0 or len(tj) == 0:
                continue
            gain_in = into(c, tj)  # (T,)
            for i in sources:
                if not self.budget.allows(c, int(i)):
                    continue
                delta = np.where(tj == i, np.inf, out_of(c, int(i)) + gain_in)
                k = int(np.argmin(delta))
                if delta[k] < best[0] - 1e-12:
                    best = (float(delta[k]), c, int(i), int(tj[k]))
        return None if best[1] < 0 else (best[1], best[2], best[3])

    def move(self, c: int, i: int, j: int) -> None:
        self.y[c, i] -= 1
        self.y[c, j] += 1
        self.room[i] += self.layout.demand[c]
        self.room[j] -= self.layout.demand[c]
        self.budget.take(c, i)


def greedy_balance(model: Any, budgets: Budgets) -> IntArray:
    lay, p = model.layout, model.layout.problem
    terms = lay.balance_terms()
    moves = _Moves(model, budgets)
    if not terms:
        return moves.y
    rs = np.array([r for r, _, _ in terms])
    w = np.array([wt for _, wt, _ in terms], dtype=np.float64)
    cap = p.capacity[:, rs].astype(np.float64)
    has = cap > 0
    safe = np.where(has, cap, 1.0)
    load = np.stack([lay.load(moves.y, measured)[:, r] for r, _, measured in terms], axis=1).astype(np.float64)
    mu = load.sum(axis=0) / np.maximum(cap.sum(axis=0), 1)  # floats: sums over nodes never wrap
    demand = lay.demand[:, rs].astype(np.float64)

    def cost(lo: np.ndarray, nodes: IntArray | int) -> np.ndarray:
        return np.asarray((np.where(has[nodes], (lo / safe[nodes] - mu) ** 2, 0.0) * w).sum(axis=-1))

    base = np.where(has, (load / safe - mu) ** 2, 0.0) @ w
    while (found := moves.best(lambda c, tj: cost(load[tj] + demand[c], tj) - base[tj],
                               lambda c, i: float(cost(load[i] - demand[c], i) - base[i]))) is not None:
        c, i, j = found
        moves.move(c, i, j)
        load[i] -= demand[c]
        load[j] += demand[c]
        pair = np.array([i, j])
        base[pair] = cost(load[pair], pair)
    return moves.y


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


def greedy_fragmentation(model: Any, budgets: Budgets) -> IntArray:
    lay, p = model.layout, model.layout.problem
    moves = _Moves(model, budgets)
    if not p.has_devices:
        return moves.y
    shapes = TaskShapes.of(p, by_devices=True)
    devices = p.gpu_count[lay.agg_class]  # (C,) whole devices per pod (pods sharing a device never move)
    free = p.free - lay.requests(moves.y)
    taken = moves.y.T @ devices

    def fragmentation(nodes: IntArray, free_rows: IntArray, takes: IntArray) -> np.ndarray:
        rows = []
        for i, k in zip(nodes.tolist(), takes.tolist(), strict=True):
            dev = p.device_free[i].copy()
            dev[np.nonzero(dev >= WHOLE)[0][: max(int(k), 0)]] -= WHOLE  # lowest index first, as evaluated
            rows.append(dev)
        return node_fragmentation(shapes, free_rows, np.array(rows).reshape(len(nodes), -1), nodes)

    def out_of(c: int, i: int) -> float:
        src = np.array([i], dtype=np.int64)
        return float(fragmentation(src, free[src] + lay.demand[c], taken[src] - devices[c])[0] - now[i])

    now = fragmentation(np.arange(p.n_nodes, dtype=np.int64), free, taken)
    while (found := moves.best(lambda c, tj: fragmentation(tj, free[tj] - lay.demand[c], taken[tj] + devices[c])
                               - now[tj], out_of)) is not None:
        c, i, j = found
        moves.move(c, i, j)
        for node, sign in ((i, 1), (j, -1)):
            free[node] += sign * lay.demand[c]
            taken[node] -= sign * devices[c]
        pair = np.array([i, j], dtype=np.int64)
        now[pair] = fragmentation(pair, free[pair], taken[pair])
    return moves.y


GreedyMove = Callable[[Any, Budgets], IntArray]
"""(the view of every candidate move, :func:`everywhere`; the budgets) -> a placement."""
MOVES: Mapping[type, GreedyMove] = {
    LoadBalanceTerm: greedy_balance,
    NodesUsedTerm: greedy_binpack,
    FragmentationTerm: greedy_fragmentation,
}
"""The greedy answer tried for each kind of objective term (``models.terms.TERMS``) that has one, in
the order they are tried (an equal answer does not replace an earlier one)."""
