"""Rows of the inter-pod rules over classes and domains, for every backend.

Notation, per rule and domain d: X_S(d) sums the variables y[c, i] of the classes S on the
neighbourhood's nodes of domain d, Fix_S(d) the pods of S fixed outside the neighbourhood
there, bnd(d) the running pods a spread counts, U_S(d) the sum of the variables' upper
bounds (the big-M). Only domains where a variable of the rule exists get rows; domains
outside the neighbourhood are constants. Every row is linear with integer coefficients (big-M,
no indicator constraints), so CP-SAT and the MILP backends read the same model, and each
auxiliary variable comes with a hint computed from the hint's y, so hints stay complete.

- Caps over domains (``GroupCap`` with a domain): X(d) <= cap[d] - Fix(d).
- ``Exclusion``: binaries u1 (a carrier matching the term is here, at most one) and u0
  (another carrier is here), u0 + u1 <= 1, and X_M(d) + Fix_M(d) <= u1 + K (1 - u0 - u1).
- ``Spread``: n_d = bnd(d) + Fix_K(d) + X_K(d); the floor L is an integer variable with
  L <= n_d everywhere (ordered) or the constant smallest running count; where a carrier may
  be, a binary r_d with X_C(d) <= U r_d and n_d - L <= maxSkew + M (1 - r_d).
- ``Attraction``: per cell (a domain per term) a starter binary w, at most one set, only
  where a starter carrier is; per term and domain without a constant anchor (a running or
  fixed supporter), X_A(t, d) <= U (X_F(t, d) + sum of w over the cells in d).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from kubeplace.models.domains import n_domains
from kubeplace.models.formulation.gpu_rows import PairModel
from kubeplace.models.linear import INF, LinearBuilder
from kubeplace.models.problem import Assignment, Attraction, BoolArray, Exclusion, GroupCap, IntArray, Spread

Hint = Callable[[IntArray], None]
"""Sets auxiliary variables in a complete value vector whose y part is already filled."""


class RuleBuilder(PairModel, Protocol):
    """What the rows need of the model builder (``models.formulation._Builder``): its pairs
    and the placements fixed outside the neighbourhood."""

    @property
    def fixed(self) -> Assignment: ...


@dataclass(frozen=True)
class Side:
    """The pods of some classes per domain: their variables here, bounds and fixed pods."""

    var: IntArray  # y variable index of each pair, sorted by domain
    domain_of_var: IntArray  # domain of each of those pairs
    starts: IntArray  # (D + 1,) var[starts[d]:starts[d + 1]] lie in domain d
    ub: IntArray  # (D,) U(d)
    fixed: IntArray  # (D,) Fix(d)

    def cols(self, d: int) -> IntArray:
        return self.var[self.starts[d]:self.starts[d + 1]]

    def present(self) -> IntArray:
        """Domains with a variable here."""
        return np.nonzero(np.diff(self.starts) > 0)[0]

    def count(self, values: IntArray) -> IntArray:
        """(D,) X(d) + Fix(d) for the assignment ``values``."""
        per = np.bincount(self.domain_of_var, weights=values[self.var], minlength=len(self.ub)).astype(np.int64)
        return per + self.fixed


def side(b: RuleBuilder, classes: Sequence[int], domain: IntArray, size: int) -> Side:
    cls = np.asarray(classes, dtype=np.int64)
    member = np.isin(b.pair_cls, cls)
    dom = domain[b.pair_node]
    sel = np.nonzero(member & (dom >= 0))[0]
    order = sel[np.argsort(dom[sel], kind="stable")]
    d_sorted = dom[order]
    starts = np.searchsorted(d_sorted, np.arange(size + 1)).astype(np.int64)
    ub = np.bincount(d_sorted, weights=b.y_ub[order], minlength=size).astype(np.int64)
    fx = b.fixed
    fmember = np.isin(fx.cls, cls) & (domain[fx.node] >= 0)
    fixed = np.bincount(domain[fx.node[fmember]], weights=fx.counts[fmember], minlength=size).astype(np.int64)
    return Side(b.y[order], d_sorted, starts, ub, fixed)


def touches(b: RuleBuilder, classes: Sequence[int]) -> bool:
    return bool(np.isin(b.pair_cls, np.asarray(classes, dtype=np.int64)).any())


def _binaries(lb: LinearBuilder, n: int) -> IntArray:
    return lb.add_vars(np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64))


def _row(lb: LinearBuilder, parts: Sequence[tuple[IntArray, int]], lo: int = -INF, hi: int = INF) -> None:
    """One row from (columns, coefficient) parts."""
    cols = np.concatenate([c for c, _ in parts]) if parts else np.zeros(0, dtype=np.int64)
    coefs = np.concatenate([np.full(len(c), k, dtype=np.int64) for c, k in parts]) if parts else cols
    if len(cols):
        lb.add_row(cols, coefs, lo, hi)


@dataclass
class RuleRows:
    """The auxiliaries the rules added, with what sets them in a hint."""

    hints: list[Hint] = field(default_factory=list)
    starters: dict[str, IntArray] = field(default_factory=dict)  # attraction name -> its w variables


def rule_rows(b: RuleBuilder) -> RuleRows:
    out = RuleRows()
    p = b.problem
    for cap in p.group_caps:
        if cap.domain is not None and touches(b, cap.classes):
            _domain_cap_rows(b, cap)
    for ex in p.exclusions:
        if touches(b, (*ex.carriers, *ex.matched)):
            out.hints += _exclusion_rows(b, ex)
    for sp in p.spreads:
        if touches(b, (*sp.carriers, *sp.counted)):
            out.hints += _spread_rows(b, sp)
    for at in p.attractions:
        if touches(b, (*at.carriers, *at.supporters)):
            out.hints += _attraction_rows(b, at, out.starters)
    for at in p.attractions:
        for rival in at.rivals:
            if at.name < rival and at.name in out.starters and rival in out.starters:
                w = np.concatenate([out.starters[at.name], out.starters[rival]])
                b.lb.add_row(w, np.ones(len(w), dtype=np.int64), -INF, 1)
    return out


def _domain_cap_rows(b: RuleBuilder, cap: GroupCap) -> None:
    assert cap.domain is not None
    s = side(b, cap.classes, cap.domain, len(cap.cap))
    for d in s.present().tolist():
        room = int(cap.cap[d]) - int(s.fixed[d])
        if s.ub[d] > room:
            b.lb.add_row(s.cols(d), np.ones(len(s.cols(d)), dtype=np.int64), -INF, max(room, 0))


def _exclusion_rows(b: RuleBuilder, ex: Exclusion) -> list[Hint]:
    size = n_domains(ex.domain)
    matched = set(ex.matched)
    a1 = side(b, [c for c in ex.carriers if c in matched], ex.domain, size)
    a0 = side(b, [c for c in ex.carriers if c not in matched], ex.domain, size)
    m = side(b, ex.matched, ex.domain, size)
    has_a1 = (np.diff(a1.starts) > 0) | (a1.fixed > 0)
    has_a0 = (np.diff(a0.starts) > 0) | (a0.fixed > 0)
    has_m = (np.diff(m.starts) > 0) | (m.fixed > 0)
    here = (np.diff(a1.starts) > 0) | (np.diff(a0.starts) > 0) | (np.diff(m.starts) > 0)
    rows = np.nonzero(here & (has_a1 | has_a0) & has_m)[0]
    hints: list[Hint] = []
    for d in rows.tolist():
        big = int(m.ub[d] + m.fixed[d])
        parts: list[tuple[IntArray, int]] = [(m.cols(d), 1)]
        u: list[tuple[int, Side]] = []
        if has_a1[d]:
            (u1,) = _binaries(b.lb, 1)
            _row(b.lb, [(a1.cols(d), 1), (np.array([u1]), -1)], hi=-int(a1.fixed[d]))  # at most one, sets u1
            parts += [(np.array([u1]), big - 1)]
            u.append((int(u1), a1))
        if has_a0[d]:
            (u0,) = _binaries(b.lb, 1)
            k = int(a0.ub[d] + a0.fixed[d])
            _row(b.lb, [(a0.cols(d), 1), (np.array([u0]), -k)], hi=-int(a0.fixed[d]))
            parts += [(np.array([u0]), big)]
            u.append((int(u0), a0))
        if len(u) == 2:
            b.lb.add_row(np.array([u[0][0], u[1][0]]), np.ones(2, dtype=np.int64), -INF, 1)
        _row(b.lb, parts, hi=big - int(m.fixed[d]))
        hints.append(_presence_hint(u, d))
    return hints


def _presence_hint(flags: list[tuple[int, Side]], d: int) -> Hint:
    def hint(values: IntArray) -> None:
        for var, s in flags:
            values[var] = 1 if int(values[s.cols(d)].sum()) + int(s.fixed[d]) > 0 else 0
    return hint


def _spread_rows(b: RuleBuilder, sp: Spread) -> list[Hint]:
    size = sp.n_domains
    k = side(b, sp.counted, sp.domain, size)
    c = side(b, sp.carriers, sp.domain, size)
    const = sp.bound + k.fixed  # n_d without this neighbourhood's variables
    k_here = np.diff(k.starts) > 0
    c_here = np.diff(c.starts) > 0
    hints: list[Hint] = []
    floor: list[tuple[IntArray, int]] = []  # -L, when the floor is a variable
    base = sp.floor  # the constant floor otherwise
    if sp.ordered and size >= sp.min_domains and size > 0:
        top = int((const + k.ub).max())
        outside = const[~k_here]
        (var,) = b.lb.add_vars(np.zeros(1, dtype=np.int64),
                               np.array([min(top, int(outside.min())) if len(outside) else top]))
        floor, base = [(np.array([var]), -1)], 0
        for d in np.nonzero(k_here)[0].tolist():  # L <= n_d
            _row(b.lb, [(np.array([var]), 1), (k.cols(d), -1)], hi=int(const[d]))
        hints.append(_floor_hint(int(var), k, sp))
    counted_carry = set(sp.counted) <= set(sp.carriers)  # a counted pod here is a carrier here
    for d in np.nonzero(c_here | (c.fixed > 0))[0].tolist():
        slack = sp.max_skew + base - int(const[d])  # the rule here: X_K(d) - L <= slack
        if c.fixed[d] > 0:  # carriers are here whatever the neighbourhood does
            if k_here[d] or floor:
                _row(b.lb, [(k.cols(d), 1), *floor], hi=slack)
            continue
        if not floor and slack < 0:
            _row(b.lb, [(c.cols(d), 1)], hi=0)  # the running pods already fill this domain
            continue
        if not k_here[d] and not floor:
            continue  # n_d is a constant within the rule
        if counted_carry and slack >= 0 and (not floor or int(const[d]) <= sp.max_skew):
            _row(b.lb, [(k.cols(d), 1), *floor], hi=slack)  # holds anyway where no carrier is
            continue
        (r,) = _binaries(b.lb, 1)
        big = int(const[d] + k.ub[d]) + 1
        _row(b.lb, [(c.cols(d), 1), (np.array([r]), -int(c.ub[d]))], hi=0)
        _row(b.lb, [(k.cols(d), 1), *floor, (np.array([r]), big)], hi=slack + big)
        hints.append(_presence_hint([(int(r), c)], d))
    return hints


def _floor_hint(var: int, k: Side, sp: Spread) -> Hint:
    def hint(values: IntArray) -> None:
        values[var] = int((sp.bound + k.count(values)).min())
    return hint


def _attraction_rows(b: RuleBuilder, at: Attraction, starters: dict[str, IntArray]) -> list[Hint]:
    sizes = [len(bound) for bound in at.bound_support]  # every domain of the key, not only this part's
    carriers = [side(b, at.carriers, dom, n) for dom, n in zip(at.domains, sizes, strict=True)]
    support = [side(b, at.supporters, dom, n) for dom, n in zip(at.domains, sizes, strict=True)]
    anchored = [bound | (s.fixed > 0) for bound, s in zip(at.bound_support, support, strict=True)]
    cells, w = _starter_cells(b, at)
    if len(w):
        starters[at.name] = w
        b.lb.add_row(w, np.ones(len(w), dtype=np.int64), -INF, 1)
    cell_domain = _cell_domains(at, cells)
    for t, (cs, ss) in enumerate(zip(carriers, support, strict=True)):
        for d in range(sizes[t]):
            if anchored[t][d]:
                continue
            w_here = w[cell_domain[:, t] == d] if len(w) else np.zeros(0, dtype=np.int64)
            here = cs.cols(d)
            if len(here):  # X_A(t, d) <= U (X_F(t, d) + sum w)
                big = int(cs.ub[d])
                _row(b.lb, [(here, 1), (ss.cols(d), -big), (w_here, -big)], hi=0)
            if cs.fixed[d] > 0:  # fixed carriers need an anchor here
                _row(b.lb, [(ss.cols(d), 1), (w_here, 1)], lo=1)
    return [_starter_hint(at, carriers, support, anchored, cells, w)] if len(w) else []


def _starter_cells(b: RuleBuilder, at: Attraction) -> tuple[IntArray, IntArray]:
    """The cells a starter may take (those holding a starter carrier here or fixed) and their
    binaries w, each set only where a starter is: w_c <= X_S(c) + Fix_S(c)."""
    if not at.starters:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    size = n_domains(at.cell)
    s = side(b, at.starters, at.cell, size)
    cells = np.nonzero((np.diff(s.starts) > 0) | (s.fixed > 0))[0]
    w = _binaries(b.lb, len(cells))
    for cell, var in zip(cells.tolist(), w.tolist(), strict=True):
        _row(b.lb, [(np.array([var]), 1), (s.cols(cell), -1)], hi=int(s.fixed[cell]))
    return cells.astype(np.int64), w


def _cell_domains(at: Attraction, cells: IntArray) -> IntArray:
    """(len(cells), T) each cell's domain per term."""
    out = np.full((len(cells), len(at.domains)), -1, dtype=np.int64)
    where = {int(c): i for i, c in enumerate(at.cell.tolist()) if c >= 0}
    for j, cell in enumerate(cells.tolist()):
        i = where.get(cell)
        if i is not None:
            out[j] = [int(d[i]) for d in at.domains]
    return out


def _starter_hint(at: Attraction, carriers: list[Side], support: list[Side], anchored: list[BoolArray],
                  cells: IntArray, w: IntArray) -> Hint:
    """The starter cell that anchors every carrier domain nothing else anchors (none needed: all 0)."""
    cell_domain = _cell_domains(at, cells)

    def hint(values: IntArray) -> None:
        values[w] = 0
        need = np.ones(len(cells), dtype=np.bool_)
        wanted = False
        for t, (cs, ss) in enumerate(zip(carriers, support, strict=True)):
            lonely = (cs.count(values) > 0) & ~anchored[t] & (ss.count(values) == 0)
            for d in np.nonzero(lonely)[0].tolist():
                wanted = True
                need &= cell_domain[:, t] == d
        if wanted and need.any():
            values[w[int(np.argmax(need))]] = 1
    return hint
