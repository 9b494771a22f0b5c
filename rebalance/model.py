"""The move-aware model, written with :class:`models.linear.LinearBuilder` so every backend solves it.

Variables: ``y[c, i]`` pods of movable class c on node i after the moves (one per candidate
pair: the nodes the class is on now plus the ``max_targets`` most promising eligible nodes),
``m[c, i] >= x0[c, i] - y[c, i]`` pods of class c moved away from node i, and optional target
variables ``t[k, i]`` for pending pods that must fit (``makeroom``). Every movable pod stays
placed: ``sum_i y[c, i] = count[c]``.

Rows: capacity per node and resource (room left by the pods that stay; whole-GPU pods only on
wholly free devices), host-port caps, and the budgets: moves in total, away from each node, per
namespace and per PodDisruptionBudget (``status.disruptionsAllowed``).

Goal: the profile's objective terms (``Layout.terms``, from its score plugins), each written by
the linearisation ``models.terms`` gives its type, the very one the placement model uses, over
the y and t variables as (class, node) pairs of the problem: a balance term is
sum_i w_r (u_ir - mu_r)^2 with mu_r the current mean utilisation, bounded below by tangent cuts;
a nodes-used term counts the nodes in use; a preference term the score points the pods lose
(NodeAffinity, TaintToleration, InterPodAffinity, PodTopologySpread). Terms without a linear
form (GPU fragmentation) add no rows, and gang domains none here (gang members never move);
``rebalance.solve`` evaluates every answer exactly. The goal is traded against the number of
moves either lexicographically (best goal, then fewest moves for it) or with a ``move_cost`` per
move in the objective's units.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kubeplace.models.formulation.capacity_rows import ExistingNodes, Pairs, capacity_rows, group_cap_rows
from kubeplace.models.formulation.gpu_rows import DeviceVars
from kubeplace.models.linear import INF, LinearBuilder, LinearModel
from kubeplace.models.problem import Assignment, IntArray, Problem, fits
from kubeplace.models.terms import linearise
from kubeplace.rebalance.layout import Layout

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


def candidate_pairs(layout: Layout, max_targets: int, also: IntArray | None = None,
                    spread: bool = True) -> tuple[IntArray, IntArray]:
    """Per class: the nodes it is on (and those where ``also`` puts it, e.g. the greedy answer),
    plus up to ``max_targets`` eligible nodes, preferring the least utilised (``spread``) or the
    most utilised (packing, defragmenting)."""
    p = layout.problem
    util = (p.base(measured=True) / np.maximum(p.capacity, 1)).mean(axis=1)  # measured load where known
    order = np.argsort(util if spread else -util, kind="stable")
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


def build_moves(layout: Layout, budgets: Budgets, max_targets: int = MAX_TARGETS,
                target_pairs: tuple[IntArray, IntArray] | None = None, also: IntArray | None = None,
                spread: bool | None = None) -> MoveModel:
    """The move model; candidate targets are the least utilised nodes when ``spread`` (by
    default: when the objective balances), else the most utilised."""
    spread = bool(layout.balance_terms()) if spread is None else spread
    pair_cls, pair_node = candidate_pairs(layout, max_targets, also, spread)
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
    _node_rows(model)
    _budget_rows(model, budgets)
    return model


def _node_rows(model: MoveModel) -> None:
    """Capacity and group-cap rows of every node over the y and t pairs: room left by the pods
    that stay, a node overcommitted now may stay as it is (``formulation.capacity_rows``)."""
    layout = model.layout
    columns = _term_columns(model)
    pairs = Pairs(columns.pair_cls, columns.pair_node, columns.y, columns.y_ub, layout.problem.demand)
    current = np.concatenate([layout.x0[model.pair_cls, model.pair_node], np.zeros(len(model.t), np.int64)])
    role = ExistingNodes(columns.nodes, layout.free, current=current.astype(np.int64))
    capacity_rows(model.lb, pairs, role)
    group_cap_rows(model.lb, pairs, role, layout.problem.group_caps)


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


@dataclass
class _TermColumns:
    """The move model as the terms' linearisations see it (``models.linear_terms.TermModel``): its
    y and then t variables as pairs of the problem's classes and nodes, every node, nothing fixed,
    and the goal kept apart from the model (stage 2 bounds it by a row), one coefficient per variable."""

    problem: Problem
    lb: LinearBuilder
    pair_cls: IntArray
    pair_node: IntArray
    y: IntArray
    y_ub: IntArray
    nodes: IntArray
    fixed: Assignment = field(default_factory=Assignment.empty)
    devices: DeviceVars | None = None
    goal: dict[int, int] = field(default_factory=dict)

    def add_goal(self, cols: IntArray, coefs: IntArray) -> None:
        for v, c in zip(np.asarray(cols).tolist(), np.asarray(coefs).tolist(), strict=True):
            self.goal[int(v)] = self.goal.get(int(v), 0) + int(c)


def _term_columns(model: MoveModel) -> _TermColumns:
    layout = model.layout
    return _TermColumns(
        layout.problem, model.lb,
        np.concatenate([layout.agg_class[model.pair_cls], model.t_cls]).astype(np.int64),
        np.concatenate([model.pair_node, model.t_node]).astype(np.int64),
        np.concatenate([model.y, model.t]).astype(np.int64),
        np.concatenate([layout.x0.sum(axis=1)[model.pair_cls], layout.target_count[model.t_cls]]).astype(np.int64),
        np.arange(layout.problem.n_nodes, dtype=np.int64))


def objective_goal(model: MoveModel, mu: npt.NDArray[np.float64]) -> list[tuple[int, int]]:
    """Adds the rows of the layout's terms with a linear form; returns the goal as (variable,
    coefficient), in units of 1/SCALE of the exact objective. ``mu``: (R,) the mean utilisation now."""
    columns = _term_columns(model)
    linearise(columns, model.layout.terms, mu)
    return [(v, c) for v, c in columns.goal.items() if c != 0]
