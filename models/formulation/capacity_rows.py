"""Capacity and group-cap rows, written once for every mode, over node roles.

Every mode that decides where pods go has variables ``var[j]`` counting pods of class ``cls[j]``
on node ``node[j]`` (:class:`Pairs`: the placement's y, the move model's y and target t). The
rows that keep a node's pods within its room are written here, for the role the node plays:

- :class:`ExistingNodes`: nodes that are there whatever the answer, with a fixed room ``free``
  (allocatable minus what stays). Plan and provision may drop a row that can never bind (the
  pairs' upper bounds fit anyway); rebalance and consolidation let a node already overcommitted
  by the pods that may move stay as it is (the bound is the higher of the room and what the
  pairs hold now).
- :class:`BuyableTemplates`: template nodes bought ``count`` times (a variable; consolidation's
  ``--replace`` buys at most one; the provisioning's cutting stock, in its aggregated bound, any
  number, and in its exact model a node slot, used or not): their pairs' pods fit in ``count`` x
  the template's room, and at most ``count`` x the most one node holds of each class.
- :class:`RemovableNodes`: nodes that may go (consolidation), a removal binary each: a removed
  node holds none of its pairs' pods, a kept one keeps those it holds now (its capacity row is an
  existing node's: the binary empties its pairs rather than scaling the row, the same model).
- :class:`PreemptionLevel`: an existing node at one priority level of the pods that may go
  there (``models.preempt_rows``): its room with the victims the level may evict counted as
  kept, and, once the level's flag is set, the victims it may not evict as held.

Rows go into any ``models.linear.Rows``: the ``LinearBuilder`` of plan, provision, rebalance and
consolidate, or the backend models the cutting stock and the pattern pricing solve (HiGHS's
``HighsLp``, CP-SAT's ``IntModel``: their knapsacks are one existing node, their aggregated bound
and node slots bought templates). Rows are built with numpy over the pairs (classes x nodes,
never pods) and added in one block, so a mode's model is the same, row for row, as when each
wrote its own (the LP bound's over node kinds, ``solver.bound``, leaves out the zero
coefficients it wrote).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubeplace.models.linear import INF, Rows
from kubeplace.models.problem import GroupCap, IntArray, exact_sum, summed_rows


@dataclass(frozen=True)
class Pairs:
    """The assignment pairs rows sum over: ``var[j]`` pods of class ``cls[j]`` (an index into
    ``demand``, (C, R) per pod) on node ``node[j]``, at most ``ub[j]``. A row lists its node's
    pairs in this order."""

    cls: IntArray
    node: IntArray
    var: IntArray
    ub: IntArray
    demand: IntArray

    def on(self, nodes: IntArray) -> tuple[IntArray, IntArray]:
        """The pairs on each of ``nodes`` (in pair order, a node's after the previous node's) and
        the index into ``nodes`` of each."""
        order = np.argsort(self.node, kind="stable")
        by_node = self.node[order]
        lo = np.searchsorted(by_node, nodes, side="left")
        n = np.searchsorted(by_node, nodes, side="right") - lo
        where = np.repeat(np.arange(len(nodes), dtype=np.int64), n)
        offset = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
        return order[np.repeat(lo, n) + offset].astype(np.int64), where


@dataclass(frozen=True)
class ExistingNodes:
    """Nodes there whatever the answer: room ``free[i]`` (N, R) for the pairs' pods.

    ``current``: the pods of each pair on its node now (rebalance): a node the pairs already
    overcommit may stay as it is (each bound is the higher of the room and what they hold now).
    ``skip_slack``: write no row that can never bind (plan: the pairs' upper bounds fit anyway);
    without it, a group cap is written over two pairs or more."""

    nodes: IntArray
    free: IntArray
    current: IntArray | None = None
    skip_slack: bool = False


@dataclass(frozen=True)
class BuyableTemplates:
    """Template nodes ``nodes[k]``, bought ``count[k]`` times (a variable), each with room
    ``capacity[k]`` (R,): the pods of a template's pairs fit in ``count[k] * capacity[k]``.

    ``most``: (K, C) the most pods of each class one node of the template holds (hostname
    anti-affinity, spread, what fits alone): a pair holds at most ``count[k] * most[k, c]``,
    written where that can bind (below the pair's upper bound)."""

    nodes: IntArray
    count: IntArray
    capacity: IntArray
    most: IntArray | None = None


@dataclass(frozen=True)
class RemovableNodes:
    """Nodes ``nodes[k]`` that may go, ``removed[k]`` a binary: removed, a node holds none of the
    pods of its pairs; kept, it keeps the ``current[j]`` pods each pair holds now. Only a removed
    node's pods move: every other node keeps its own."""

    nodes: IntArray
    removed: IntArray
    current: IntArray


@dataclass(frozen=True)
class PreemptionLevel:
    """One node at one preemption level: the pods of its pairs (the pending pods of the level's
    power or above there) fit in its room ``free`` (R,) beside the victims the level may evict,
    as far as they are kept (variables ``kept``, ``kept_demand`` (V, R) per pod), and, once
    ``flag`` is set (a pod of the level goes there), beside ``held`` (R,), the whole load of the
    victims it may not evict. A resource it holds none of, or the pairs request none of, gets no
    row: the node's capacity row says it all."""

    free: IntArray
    flag: int
    held: IntArray
    kept: IntArray
    kept_demand: IntArray


def capacity_rows(lb: Rows, pairs: Pairs, role: ExistingNodes, resource_major: bool = False) -> None:
    """Per node of ``role`` and resource a pod of its pairs requests (> 0; the kubelet checks no
    other): their requests within the node's room. Rows node by node, each resource in turn, or
    with ``resource_major`` resource by resource (only the order of the rows differs)."""
    if pairs.demand.shape[1] == 0:
        return
    members, where = pairs.on(role.nodes)
    n_nodes = len(role.nodes)
    room = role.free[role.nodes]
    if role.current is not None:  # an overcommitted node may stay as it is
        room = np.maximum(room, summed_rows(n_nodes, where, pairs.demand[pairs.cls[members]], role.current[members]))
    demand = pairs.demand[pairs.cls[members]]
    entries = []
    for r in range(pairs.demand.shape[1]):
        nz = demand[:, r] > 0
        row = np.bincount(where[nz], minlength=n_nodes) > 0
        if role.skip_slack:  # a row the pairs' upper bounds can never fill is left out
            row &= _can_exceed(where[nz], demand[nz, r] * pairs.ub[members][nz], room[:, r])
        sel = nz & row[where]
        entries.append((where[sel], np.full(int(sel.sum()), r, np.int64), pairs.var[members][sel], demand[sel, r]))
    node, res, cols, coefs = (np.concatenate(part) for part in zip(*entries, strict=True))
    if not resource_major:
        order = np.lexsort((res, node))
        node, res, cols, coefs = node[order], res[order], cols[order], coefs[order]
    counts, first = _runs(node, res)
    if len(counts):
        lb.add_rows(counts, cols, coefs, -INF, room[node[first], res[first]])


def bought_rows(lb: Rows, pairs: Pairs, role: BuyableTemplates) -> None:
    """Per template of ``role`` and resource a pod of its pairs requests: their requests within
    ``count * capacity`` (nothing unless bought); then, with ``role.most``, per pair that could
    exceed it, ``y <= count * most``. Rows template by template: each resource in turn, then the
    pairs' maxima in pair order; in a row the pairs, then the count."""
    n_res = pairs.demand.shape[1]
    if n_res == 0:
        return
    members, where = pairs.on(role.nodes)
    demand = pairs.demand[pairs.cls[members]]
    entries = []
    for r in range(n_res):
        nz = demand[:, r] > 0
        rows = np.unique(where[nz])
        entries.append((where[nz], np.full(int(nz.sum()), r, np.int64), np.zeros(int(nz.sum()), np.int64),
                        pairs.var[members][nz], demand[nz, r]))
        entries.append((rows, np.full(len(rows), r, np.int64), np.ones(len(rows), np.int64), role.count[rows],
                        -role.capacity[rows, r]))
    if role.most is not None:  # key n_res + the pair's position: after the resources, in pair order
        most = role.most[where, pairs.cls[members]]
        capped = np.nonzero(most < pairs.ub[members])[0]
        key = n_res + capped
        entries.append((where[capped], key, np.zeros(len(capped), np.int64), pairs.var[members][capped],
                        np.ones(len(capped), np.int64)))
        entries.append((where[capped], key, np.ones(len(capped), np.int64), role.count[where[capped]],
                        -most[capped]))
    node, res, last, cols, coefs = (np.concatenate(part) for part in zip(*entries, strict=True))
    order = np.lexsort((last, res, node))
    counts, _ = _runs(node[order], res[order])
    if len(counts):
        lb.add_rows(counts, cols[order], coefs[order], -INF, 0)


def removal_rows(lb: Rows, pairs: Pairs, role: RemovableNodes) -> None:
    """Pair by pair: on a removable node, ``y + ub * removed <= ub`` (removed: nothing stays)
    and, when it holds pods now, ``y + current * removed >= current`` (kept: they stay); on any
    other node, ``y >= current`` (its pods stay)."""
    if len(pairs.var) == 0:
        return
    size = int(max(pairs.node.max(), role.nodes.max(initial=-1))) + 1
    removed_of = np.full(size, -1, dtype=np.int64)
    removed_of[role.nodes] = role.removed
    removed = removed_of[pairs.node]
    removable, held = removed >= 0, role.current > 0
    kinds = [np.nonzero(removable)[0], np.nonzero(removable & held)[0], np.nonzero(~removable & held)[0]]
    pair = np.concatenate(kinds)
    kind = np.concatenate([np.full(len(k), n, np.int64) for n, k in enumerate(kinds)])
    order = np.lexsort((kind, pair))
    pair, kind = pair[order], kind[order]
    two = kind < 2  # removable rows: the pair's variable and its node's binary
    counts = np.where(two, 2, 1).astype(np.int64)
    first = np.cumsum(counts) - counts
    cols = np.zeros(int(counts.sum()), dtype=np.int64)
    coefs = np.ones(len(cols), dtype=np.int64)
    cols[first] = pairs.var[pair]
    cols[first[two] + 1] = removed[pair[two]]
    coefs[first[two] + 1] = np.where(kind[two] == 0, pairs.ub[pair[two]], role.current[pair[two]])
    lower = np.where(kind == 0, -INF, role.current[pair])
    upper = np.where(kind == 0, pairs.ub[pair], INF)
    lb.add_rows(counts, cols, coefs, lower, upper)


def level_rows(lb: Rows, pairs: Pairs, level: PreemptionLevel) -> None:
    """Per resource the level holds and its pairs request: the pairs' requests, the kept
    victims' and ``held`` x the flag within the room (the pairs, then the victims, then the flag)."""
    demand = pairs.demand[pairs.cls]
    for r in range(pairs.demand.shape[1]):
        d, dv = demand[:, r], level.kept_demand[:, r]
        if level.held[r] == 0 or not (d > 0).any():
            continue
        cols = np.concatenate([pairs.var[d > 0], level.kept[dv > 0], [level.flag]])
        coefs = np.concatenate([d[d > 0], dv[dv > 0], [level.held[r]]])
        lb.add_rows(np.array([len(cols)], np.int64), cols, coefs, -INF, int(level.free[r]))


def group_cap_rows(lb: Rows, pairs: Pairs, role: ExistingNodes, caps: Sequence[GroupCap]) -> None:
    """Per cap and node of ``role`` holding pairs of its classes: their pods at most the cap
    (each cap's rows node by node). The caps are per node (``GroupCap.domain`` None); a cap of one
    class may be its variables' bound instead, as the caller chooses which caps to give. A node's
    row is written whenever its pairs' upper bounds could exceed the cap (the move model's y of
    one class may hold the class's every pod: two pods with one host port on one node)."""
    on_role = np.isin(pairs.node, role.nodes)
    for cap in caps:
        member = np.nonzero(on_role & np.isin(pairs.cls, np.asarray(cap.classes, dtype=np.int64)))[0]
        order = member[np.argsort(pairs.node[member], kind="stable")]
        nodes, starts = np.unique(pairs.node[order], return_index=True)
        if len(nodes) == 0:
            continue
        counts = np.diff(np.append(starts, len(order)))
        bound = np.asarray(cap.cap, dtype=np.int64)[nodes]
        if role.current is not None:  # an overcommitted node may stay as it is
            bound = np.maximum(bound, np.add.reduceat(role.current[order], starts))
        can_exceed = np.add.reduceat(pairs.ub[order], starts) > bound
        # without skip_slack every row of two or more pairs is kept (the models stay as they were);
        # a single pair that could exceed the cap needs its row too: its bound is the class's count
        row = can_exceed if role.skip_slack else (counts > 1) | can_exceed
        sel = np.repeat(row, counts)
        if row.any():
            lb.add_rows(counts[row], pairs.var[order][sel], np.ones(int(sel.sum()), np.int64), -INF, bound[row])


def _can_exceed(where: IntArray, load: IntArray, room: IntArray) -> npt.NDArray[np.bool_]:
    """Per node k: whether the sum of ``load`` over entries at ``k`` exceeds ``room[k]``, exactly."""
    if len(load) == 0 or int(np.abs(load).max()) * len(load) < (1 << 63):
        total = np.zeros(len(room), dtype=np.int64)
        np.add.at(total, where, load)
        return total > room
    return np.array([exact_sum(load[where == k]) > int(room[k]) for k in range(len(room))], dtype=np.bool_)


def _runs(node: IntArray, res: IntArray) -> tuple[IntArray, IntArray]:
    """The lengths and first indices of the runs of equal (node, resource): one row each."""
    if len(node) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    first = np.flatnonzero(np.r_[True, (node[1:] != node[:-1]) | (res[1:] != res[:-1])])
    return np.diff(np.append(first, len(node))).astype(np.int64), first
