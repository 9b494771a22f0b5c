"""The score plugins' preferences as linear goals (stage 2), for every backend and both models
(placement and moves: ``linear_terms.TermModel``).

One point (``models.preferences``) is ``POINT`` in the linear goal, so the goal counts the
same as :func:`models.terms.objective_value`.

- ``NodePreference``: a coefficient per pair, ``weight * POINT * cost[c, i]`` (the points a pod
  loses on node i against its class's best node): exact.
- ``DomainPreference`` whose carriers are the counted pods: per domain with a variable of the
  neighbourhood, s_d >= the chords of f(n) = n (n - 1) / 2 + n * bound between consecutive
  points of a grid over n's range, n = X(d) + Fix(d) (the pods fixed outside the neighbourhood
  are constants). f is convex, so s_d = f(n) at the grid's points and at most the chord between
  them; the grid is every integer up to ``MAX_CHORDS`` steps, exact there.
- ``DomainPreference`` towards running pods only: a coefficient ``points * bound[d]`` per pair.
"""

from __future__ import annotations

import math

import numpy as np

from kubeplace.models.formulation.rule_rows import Hint, side
from kubeplace.models.framework import PreferenceTerm
from kubeplace.models.linear import INF
from kubeplace.models.linear_terms import SCALE, TermModel
from kubeplace.models.preferences import POINTS_PER_UNIT, node_cost, pairs
from kubeplace.models.problem import DomainPreference, IntArray, NodePreference

POINT = SCALE // POINTS_PER_UNIT
MAX_CHORDS = 32


def preference_rows(b: TermModel, term: PreferenceTerm) -> list[Hint]:
    """Adds the goal of ``term`` (its plugin's preferences at its weight); the hints of its auxiliaries."""
    hints: list[Hint] = []
    p = b.problem
    for pref in p.preferences:
        if pref.plugin != term.plugin:
            continue
        unit = term.weight * POINT
        if isinstance(pref, NodePreference):
            row = np.full(p.n_classes, -1, dtype=np.int64)
            row[list(pref.classes)] = np.arange(len(pref.classes))
            sel = np.nonzero(row[b.pair_cls] >= 0)[0]
            cost = node_cost(p, pref)[row[b.pair_cls[sel]], b.pair_node[sel]]
            b.add_goal(b.y[sel], unit * cost)
        elif pref.self_counted:
            hints += _pair_rows(b, pref, unit * pref.points)
        else:
            sel = np.nonzero(np.isin(b.pair_cls, np.asarray(pref.carriers)) & (pref.domain[b.pair_node] >= 0))[0]
            b.add_goal(b.y[sel], unit * pref.points * pref.bound[pref.domain[b.pair_node[sel]]])
    return hints


def grid(lo: int, hi: int) -> list[int]:
    """Integers from lo to hi, every one up to MAX_CHORDS steps, evenly spaced beyond."""
    step = max(1, math.ceil((hi - lo) / MAX_CHORDS))
    return sorted({*range(lo, hi, step), hi})


def _pair_rows(b: TermModel, pref: DomainPreference, coef: int) -> list[Hint]:
    s = side(b, pref.carriers, pref.domain, len(pref.bound))
    present = s.present()
    if len(present) == 0:
        return []
    remaining = int(b.problem.count[list(pref.carriers)].sum()) - int(s.fixed.sum())
    lo = s.fixed[present]
    hi = lo + np.minimum(s.ub[present], max(remaining, 0))
    top = pairs(hi, pref.bound[present])  # s_d never needs more than f at the largest count
    aux = b.lb.add_vars(np.zeros(len(present), dtype=np.int64), top)
    b.add_goal(aux, np.full(len(present), coef, dtype=np.int64))
    chords: list[tuple[int, int, IntArray]] = []  # (aux, domain, (steps, 3) rows of step, rise, offset)
    for k_d, (var, d) in enumerate(zip(aux.tolist(), present.tolist(), strict=True)):
        points = grid(int(lo[k_d]), int(hi[k_d]))
        f = pairs(np.asarray(points, dtype=np.int64), np.full(len(points), int(pref.bound[d]), dtype=np.int64))
        rows = []
        cols = s.cols(d)
        for k in range(len(points) - 1):
            step, rise = points[k + 1] - points[k], int(f[k + 1] - f[k])
            # step * s - rise * X >= step * f(k) + rise * (Fix - k)
            offset = step * int(f[k]) + rise * (int(lo[k_d]) - points[k])
            b.lb.add_row(np.concatenate([[var], cols]), np.concatenate([[step], np.full(len(cols), -rise)]),
                         offset, INF)
            rows.append((step, rise, offset))
        chords.append((var, d, np.asarray(rows, dtype=np.int64).reshape(-1, 3)))

    def hint(values: IntArray) -> None:
        x = s.count(values) - s.fixed
        for var, d, rows in chords:
            need = [-(-(off + rise * int(x[d])) // step) for step, rise, off in rows.tolist()]
            values[var] = max([0, *need])  # within f(hi): every chord is at most f there
    return [hint]
