"""Objective terms as linear rows, node by node: one linearisation for every model.

The placement model (``models.formulation``) and the move model (``rebalance.model``) both
write their goals through these functions, so a term means the same in both, at the same scale:
a unit of the exact objective (``models.terms.objective_value``) is ``SCALE`` in the linear goal.

- ``LoadBalanceTerm``: per node, a load variable ``L = sum_j ceil(d_j / g) x_j`` (in grains of
  the resource, see :func:`grain`) and a cost ``s`` bounded below by the tangents of
  ``w (u - mu)^2`` at breakpoints of u on a grid of ``BREAKPOINT_STEP`` (and at mu and the ends
  of the node's range): exact at the breakpoints, linear, integer coefficients.
- ``NodesUsedTerm``: per node not in use already, a binary set when anything goes there.

Each model shows itself to the linearisations as a :class:`TermModel` (its columns as pairs of
the problem's classes and nodes); ``models.terms`` holds the table from term type to them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kubeplace.models.formulation.rule_rows import RuleBuilder
from kubeplace.models.linear import INF, LinearBuilder
from kubeplace.models.problem import FULL, IntArray, exact_sum

SCALE = 10_000
"""A unit of the exact objective in the linear goal: (u - mu)^2 is counted in 1/SCALE."""
BREAKPOINT_STEP = 0.05
MEBIBYTE = 1 << 20
MAX_GRAINS = 1 << 24
"""The most grains of load a node's balance cut counts (its grain grows beyond): its offsets stay
within the rows' range (INF) up to a load of several times its capacity."""


class TermModel(RuleBuilder, Protocol):
    """What a term's linearisation reads and writes of the model being built: its columns as
    (problem class, node) pairs with their ``y`` variables and bounds, the placements fixed
    outside it, the nodes whose columns may change, and where its goal goes (the placement model
    minimises it; the move model keeps it apart, to bound it by a row in its second stage)."""

    @property
    def nodes(self) -> IntArray: ...

    def add_goal(self, cols: IntArray, coefs: IntArray) -> None:
        """Adds ``coefs`` times the variables ``cols`` to the goal, in 1/SCALE of the exact objective."""
        ...


def grain(resource: str) -> int:
    """Units of one step of load in the balance term (bytes are counted in MiB)."""
    return MEBIBYTE if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-") else 1


def breakpoints(lo: float, hi: float, mu: float) -> list[float]:
    """Where the tangents touch: the grid within [lo, hi], the ends, and mu when inside."""
    first = math.ceil(lo / BREAKPOINT_STEP - 1e-9)
    grid = [k * BREAKPOINT_STEP for k in range(first, int(hi / BREAKPOINT_STEP + 1e-9) + 1)]
    points = {round(u, 6) for u in [lo, hi, *grid] if lo - 1e-9 <= u <= hi + 1e-9}
    if lo <= mu <= hi:
        points.add(round(mu, 6))
    return sorted(points)


@dataclass(frozen=True)
class BalanceCut:
    """The variables of one node's balance term, and how to value them for a hint."""

    cost: int  # s: the goal variable
    load: int  # L
    cols: IntArray  # the placement variables L sums
    coefs: IntArray  # their demand in grains
    capacity: int  # in grains
    slopes: tuple[int, ...]
    offsets: tuple[int, ...]

    def hint(self, values: IntArray) -> None:
        """Sets L and the least s its cuts allow from the placement variables in ``values``."""
        load = int((self.coefs * values[self.cols]).sum())
        values[self.load] = load
        need = max((a * load + off for a, off in zip(self.slopes, self.offsets, strict=True)), default=0)
        values[self.cost] = max(0, -(-need // self.capacity))


def balance_cut(lb: LinearBuilder, cols: IntArray, demand: IntArray, col_ub: IntArray, used: int, capacity: int,
                resource: str, weight: int, mu: float) -> BalanceCut | None:
    """One node's share of ``weight * (u - mu)^2`` for ``resource``: the node has ``capacity``
    and ``used`` already (raw units), the variables ``cols`` (at most ``col_ub`` each) add
    ``demand`` each. The caller adds ``cost`` to its goal. None when the node lacks the resource,
    or when its cuts' coefficients would pass what the rows hold (INF: a node loaded hundreds of
    times over, or a weight as large): its imbalance is then left to the exact objective. The
    grain grows with a node of more than MAX_GRAINS grains, so that a node near the quantity
    limit keeps its cut."""
    g = max(grain(resource), -(-capacity // MAX_GRAINS))
    cap = capacity // g
    if cap <= 0 or len(cols) == 0:
        return None
    base = -(-used // g)
    d = -(-np.asarray(demand, dtype=np.int64) // g)
    top = min(exact_sum(d * np.asarray(col_ub, dtype=np.int64)), FULL)  # sums saturate, never wrap
    lo = base / cap
    hi = max(lo, min(1.0, (base + top) / cap))
    peak = max((base + top) / cap, mu, 1.0)  # (u - mu)^2 <= peak^2 wherever L may be
    points = breakpoints(lo, hi, mu)
    slopes = [2 * SCALE * weight * (u - mu) for u in points]
    offsets = [SCALE * weight * ((u - mu) ** 2 * cap + 2 * (u - mu) * (base - u * cap)) for u in points]
    if any(not abs(v) < INF for v in (*slopes, *offsets)):
        return None
    (load,) = lb.add_vars(np.array([0]), np.array([top]))
    lb.add_row(np.concatenate([cols, [load]]), np.concatenate([d, [-1]]), 0, 0)
    (s,) = lb.add_vars(np.array([0]), np.array([min(SCALE * weight * math.ceil(peak + 1) ** 2, INF)]))
    for a, off in zip(slopes, offsets, strict=True):
        lb.add_row(np.array([s, load]), np.array([cap, -round(a)]), round(off), INF)
    return BalanceCut(int(s), int(load), np.asarray(cols, dtype=np.int64), d, cap, tuple(map(round, slopes)),
                      tuple(map(round, offsets)))


def used_flag(lb: LinearBuilder, cols: IntArray, col_ub: IntArray) -> int:
    """A binary that must be 1 when any of ``cols`` is positive (a node put in use); the
    caller adds it to its goal at ``SCALE * weight``."""
    (flag,) = lb.add_vars(np.array([0]), np.array([1]))
    big = max(int(np.asarray(col_ub).sum()), 1)
    lb.add_row(np.concatenate([cols, [flag]]), np.concatenate([np.ones(len(cols), np.int64), [-big]]), -INF, 0)
    return int(flag)
