"""The move-aware model, written with :class:`models.linear.LinearBuilder` so every backend solves it.

Variables: ``y[c, i]`` pods of movable class c on node i after the moves (one per candidate
pair: the nodes the class is on now plus the ``max_targets`` most promising eligible nodes),
``m[c, i] >= x0[c, i] - y[c, i]`` pods of class c moved away from node i, and optional target
variables ``t[k, i]`` for pending pods that must fit (``makeroom``). Every movable pod stays
placed: ``sum_i y[c, i] = count[c]``.

Rows: capacity per node and resource (room left by the pods that stay; whole-GPU pods only on
wholly free devices), host-port caps, and the budgets: moves in total, away from each node, per
namespace and per PodDisruptionBudget (``status.disruptionsAllowed``).

Goals: ``balance`` is sum_i w_r (u_ir - mu_r)^2, with mu_r the cluster's utilisation (total load
over total capacity, which no move changes) bounded below by tangent cuts on a fine grid, so the
rows are exact at the breakpoints and linear; ``binpack`` counts the nodes in use, a GPU node
weighing 1 + its GPU count so that whole GPU nodes are freed first. Both are traded against the
number of moves either lexicographically (best goal, then fewest moves for it) or with a
``move_cost`` per move in the goal's units.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.models.linear import INF, LinearBuilder, LinearModel
from kubeplace.models.problem import IntArray, fits
from kubeplace.rebalance.layout import Layout

SCALE = 100_000
"""Resolution of the balance goal in the model: (u - mu)^2 counted in units of 1/SCALE."""
STEP = 0.02
MEBIBYTE = 1 << 20
MAX_TARGETS = 24


@dataclass(frozen=True)
class Budgets:
    max_moves: int | None = None
    per_node: int | None = None
    per_namespace: int | None = None
    pdbs: bool = True


@dataclass
class MoveModel:
    """A built model and the variable layout needed to read its answers."""

    layout: Layout
    lb: LinearBuilder
    pair_cls: IntArray
    pair_node: IntArray
    y: IntArray
    m_pairs: IntArray  # index into pairs of each move variable
    m: IntArray
    t_cls: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    t_node: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    t: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    goal: list[tuple[int, int]] = field(default_factory=list)
    """(variable, coefficient) of the profile's goal."""

    def dense(self, values: IntArray) -> IntArray:
        y = np.zeros_like(self.layout.x0)
        np.add.at(y, (self.pair_cls, self.pair_node), values[self.y])
        return y

    def hint(self, y: IntArray | None = None) -> IntArray:
        """Values of y and m for placement ``y`` (default: the current one, nothing moves)."""
        y = self.layout.x0 if y is None else y
        values = np.zeros(self.lb.n_vars, dtype=np.int64)
        values[self.y] = y[self.pair_cls, self.pair_node]
        moved = self.layout.x0 - y
        values[self.m] = np.maximum(moved[self.pair_cls[self.m_pairs], self.pair_node[self.m_pairs]], 0)
        return values

    def build(self, objective: list[tuple[int, int]], extra_rows: Sequence[tuple[list[tuple[int, int]], int]] = (),
              hint: IntArray | None = None) -> LinearModel:
        """The model minimising ``objective`` with ``extra_rows`` (sum <= bound) added."""
        lb = _copy(self.lb)
        for row, bound in extra_rows:
            lb.add_row(np.array([v for v, _ in row]), np.array([c for _, c in row]), -INF, bound)
        if objective:
            lb.add_objective(np.array([v for v, _ in objective]), np.array([c for _, c in objective]))
        return lb.build(maximize=False, hint=hint)


def _copy(lb: LinearBuilder) -> LinearBuilder:
    out = LinearBuilder()
    out.__dict__.update({k: list(v) if isinstance(v, list) else (dict(v) if isinstance(v, dict) else v)
                         for k, v in lb.__dict__.items()})
    return out


def grain(resource: str) -> int:
    return MEBIBYTE if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-") else 1


def candidate_pairs(layout: Layout, profile: str, max_targets: int,
                    also: IntArray | None = None) -> tuple[IntArray, IntArray]:
    """Per class: the nodes it is on (and those where ``also`` puts it, e.g. the greedy answer),
    plus up to ``max_targets`` eligible nodes, preferring the least utilised (balance) or the
    most utilised (binpack)."""
    p = layout.problem
    util = (p.used / np.maximum(p.capacity, 1)).mean(axis=1)
    order = np.argsort(util if profile == "balance" else -util, kind="stable")
    cls, node = [], []
    for c in range(layout.n_classes):
        chosen = set(np.nonzero(layout.x0[c])[0].tolist())
        if also is not None:
            chosen |= set(np.nonzero(also[c])[0].tolist())
        room = layout.eligible[c][order] & fits(layout.free[order], layout.demand[c])
        chosen |= set(order[room][:max_targets].tolist())
        for i in sorted(chosen):
            cls.append(c)
            node.append(i)
    return np.array(cls, dtype=np.int64), np.array(node, dtype=np.int64)


def build_moves(layout: Layout, budgets: Budgets, profile: str = "balance", max_targets: int = MAX_TARGETS,
                target_pairs: tuple[IntArray, IntArray] | None = None, also: IntArray | None = None) -> MoveModel:
    pair_cls, pair_node = candidate_pairs(layout, profile, max_targets, also)
    count = layout.x0.sum(axis=1)
    lb = LinearBuilder()
    y = lb.add_vars(np.zeros(len(pair_cls), np.int64), count[pair_cls])
    x0 = layout.x0[pair_cls, pair_node]
    moving = np.nonzero(x0 > 0)[0]
    m = lb.add_vars(np.zeros(len(moving), np.int64), x0[moving])
    # m >= x0 - y  <=>  m + y >= x0
    lb.add_rows(np.full(len(moving), 2), np.stack([m, y[moving]], axis=1).ravel(),
                np.ones(2 * len(moving), np.int64), x0[moving], INF)
    model = MoveModel(layout, lb, pair_cls, pair_node, y, moving, m)
    if target_pairs is not None:
        model.t_cls, model.t_node = target_pairs
        model.t = lb.add_vars(np.zeros(len(model.t_cls), np.int64), layout.target_count[model.t_cls])
    for c in range(layout.n_classes):  # every movable pod stays placed
        sel = np.nonzero(pair_cls == c)[0]
        lb.add_row(y[sel], np.ones(len(sel), np.int64), int(count[c]), int(count[c]))
    _capacity_rows(model)
    _group_cap_rows(model)
    _budget_rows(model, budgets)
    return model


def _capacity_rows(model: MoveModel) -> None:
    layout, p = model.layout, model.layout.problem
    now = layout.requests(layout.x0)  # (N, R) what the movable pods take now
    t_demand = p.demand[model.t_cls] if len(model.t) else np.zeros((0, len(p.resources)), np.int64)
    for i in range(p.n_nodes):
        sel = np.nonzero(model.pair_node == i)[0]
        tsel = np.nonzero(model.t_node == i)[0]
        cols = np.concatenate([model.y[sel], model.t[tsel]])
        for r in range(len(p.resources)):
            coefs = np.concatenate([layout.demand[model.pair_cls[sel], r], t_demand[tsel, r]])
            nz = coefs > 0
            if not nz.any():
                continue
            cap = max(int(layout.free[i, r]), int(now[i, r]))  # an overcommitted node may stay as it is
            model.lb.add_row(cols[nz], coefs[nz], -INF, cap)


def _group_cap_rows(model: MoveModel) -> None:
    layout = model.layout
    for cap in layout.problem.group_caps:
        member = np.isin(layout.agg_class[model.pair_cls], np.asarray(cap.classes, dtype=np.int64))
        tmember = np.isin(model.t_cls, np.asarray(cap.classes, dtype=np.int64))
        for i in range(layout.problem.n_nodes):
            cols = np.concatenate([model.y[member & (model.pair_node == i)], model.t[tmember & (model.t_node == i)]])
            now = int(layout.x0[np.isin(layout.agg_class, cap.classes), i].sum())
            if len(cols) > 1:
                model.lb.add_row(cols, np.ones(len(cols), np.int64), -INF, max(int(cap.cap[i]), now))


def _budget_rows(model: MoveModel, budgets: Budgets) -> None:
    layout, lb = model.layout, model.lb
    m_cls = model.pair_cls[model.m_pairs]
    m_node = model.pair_node[model.m_pairs]
    ones = np.ones(len(model.m), np.int64)
    if budgets.max_moves is not None:
        lb.add_row(model.m, ones, -INF, budgets.max_moves)
    if budgets.per_node is not None:
        for i in np.unique(m_node):
            sel = m_node == i
            if int(layout.x0[:, i].sum()) > budgets.per_node:
                lb.add_row(model.m[sel], ones[sel], -INF, budgets.per_node)
    if budgets.per_namespace is not None:
        for ns in sorted(set(layout.namespace)):
            sel = np.array([layout.namespace[c] == ns for c in m_cls], dtype=np.bool_)
            if sel.any():
                lb.add_row(model.m[sel], ones[sel], -INF, budgets.per_namespace)
    if budgets.pdbs:
        for j in sorted({j for c in range(layout.n_classes) for j in layout.pdbs[c]}):
            sel = np.array([j in layout.pdbs[c] for c in m_cls], dtype=np.bool_)
            if sel.any():
                lb.add_row(model.m[sel], ones[sel], -INF, layout.pdb_allowed[j])


def balance_goal(model: MoveModel) -> list[tuple[int, int]]:
    """Adds load and tangent-cut variables per (node, balanced resource); returns the goal."""
    layout, p, lb = model.layout, model.layout.problem, model.lb
    goal: list[tuple[int, int]] = []
    totals_cap = p.capacity.sum(axis=0, dtype=np.float64)  # sums over nodes in floats: never wrap
    totals_load = p.used.sum(axis=0, dtype=np.float64) + layout.requests(layout.x0).sum(axis=0, dtype=np.float64)
    for r, weight in layout.balance_terms():
        g = grain(p.resources[r])
        if totals_cap[r] <= 0:
            continue
        mu = float(totals_load[r] / totals_cap[r])
        for i in range(p.n_nodes):
            cap = int(p.capacity[i, r]) // g
            if cap <= 0:
                continue
            base = -(-int(p.used[i, r]) // g)
            sel = np.nonzero(model.pair_node == i)[0]
            d = -(-layout.demand[model.pair_cls[sel], r] // g)
            tsel = np.nonzero(model.t_node == i)[0]
            td = -(-p.demand[model.t_cls[tsel], r] // g) if len(tsel) else np.zeros(0, np.int64)
            top = base + int((d * model.layout.x0.sum(axis=1)[model.pair_cls[sel]]).sum()) + int(
                (td * layout.target_count[model.t_cls[tsel]]).sum())
            (load,) = lb.add_vars(np.array([base]), np.array([max(top, base)]))
            cols = np.concatenate([model.y[sel], model.t[tsel], [load]])
            lb.add_row(cols, np.concatenate([d, td, [-1]]), -base, -base)
            lo, hi = base / cap, max(base / cap, min(1.0, top / cap))
            (s,) = lb.add_vars(np.array([0]), np.array([SCALE * weight * int(np.ceil(max(hi, 1.0) + 1)) ** 2]))
            for u in breakpoints(lo, hi, mu):
                a = round(2 * SCALE * weight * (u - mu))
                off = round(SCALE * weight * ((u - mu) ** 2 - 2 * (u - mu) * u) * cap)
                lb.add_row(np.array([s, load]), np.array([cap, -a]), off, INF)
            goal.append((int(s), 1))
    return goal


def breakpoints(lo: float, hi: float, mu: float) -> list[float]:
    grid = np.arange(np.floor(lo / STEP) * STEP, hi + STEP, STEP)
    points = {round(float(u), 6) for u in grid if lo - 1e-9 <= u <= hi + 1e-9}
    points |= {round(lo, 6), round(hi, 6)}
    if lo <= mu <= hi:
        points.add(round(mu, 6))
    return sorted(points)


def binpack_goal(model: MoveModel) -> list[tuple[int, int]]:
    """Nodes in use, a GPU node weighing 1 + its GPU count; nodes whose staying pods keep
    them busy cost the same whatever moves, so they get no variable."""
    layout, p, lb = model.layout, model.layout.problem, model.lb
    pods = p.resource_index("pods")
    devices = (p.device_free >= 0).sum(axis=1) if p.device_free.shape[1] else np.zeros(p.n_nodes, np.int64)
    goal = []
    for i in range(p.n_nodes):
        if pods is not None and p.used[i, pods] > 0:
            continue
        sel = np.nonzero(model.pair_node == i)[0]
        tsel = np.nonzero(model.t_node == i)[0]
        cols = np.concatenate([model.y[sel], model.t[tsel]])
        if len(cols) == 0:
            continue
        (o,) = lb.add_vars(np.array([0]), np.array([1]))
        big = int(layout.x0.sum()) + int(layout.target_count.sum())
        lb.add_row(np.concatenate([cols, [o]]), np.concatenate([np.ones(len(cols), np.int64), [-big]]), -INF, 0)
        weight = 1 + int(devices[i])
        goal.append((int(o), weight))
    return goal
