"""The inter-pod rules' counts in a greedy placement: per rule and domain,
numpy arrays updated as pods are taken, and how many more pods of a class each node allows.

- ``Exclusion``: planned carriers per domain (matching the term themselves or not) and
  planned matched pods; a carrier that matches goes only where no matched pod is (then at most
  one), another carrier where no matched pod is, a matched pod where no carrier is.
- ``Spread``: n_d (running and placed pods counted, on the eligible nodes) and carriers per
  domain; a counted carrier may raise n_d up to maxSkew + the floor, the floor being the
  current smallest n_d (ordered) or the smallest running count. The floor only grows, so a
  check at each step implies the rule on the final placement.
- ``Attraction``: supporters per term and domain (running ones included) and the group's
  starter cell, once a carrier took a cell nothing else anchors.

Each per-domain limit is exact for one pod; :meth:`RuleCounts.per_domain_classes` names the
classes that must be placed one pod at a time because a limit is shared by several nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kubeplace.models.domains import n_domains
from kubeplace.models.problem import UNCAPPED, Assignment, Attraction, BoolArray, Exclusion, IntArray, Problem, Spread


@dataclass
class _ExclusionCounts:
    rule: Exclusion
    self_matching: BoolArray  # (K,) carriers matching the term
    carriers: IntArray  # (D,) planned carriers that do not match the term
    matching_carriers: IntArray  # (D,) planned carriers that do
    matched: IntArray  # (D,) planned matched pods (matching carriers included)


@dataclass
class _SpreadCounts:
    rule: Spread
    n: IntArray  # (D,) running + planned counted pods
    carriers: IntArray  # (D,) planned carriers


@dataclass
class _AttractionCounts:
    rule: Attraction
    support: list[IntArray]  # per term: (D_t,) running and planned supporters
    cell_domains: IntArray  # (cells, T)
    starter: int = -1  # the starter cell, -1 while none


def _cell_domains(at: Attraction) -> IntArray:
    out = np.full((n_domains(at.cell), len(at.domains)), -1, dtype=np.int64)
    have = at.cell >= 0
    out[at.cell[have]] = np.stack([d[have] for d in at.domains], axis=1)
    return out


@dataclass
class RuleCounts:
    excl: list[_ExclusionCounts]
    spread: list[_SpreadCounts]
    attr: list[_AttractionCounts]
    by_name: dict[str, int]  # attraction name -> index in attr
    roles: dict[int, tuple[list[int], list[int], list[int]]]
    """Per class: the exclusions, spreads and attractions it takes part in."""
    wide: dict[int, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    """Per class, its limits shared by the nodes of a domain (see :func:`shared_limits`)."""
    relaxed: int = -1
    """A spread whose limit :meth:`cap` leaves out (a caller placing a level it checked itself)."""

    @staticmethod
    def start(problem: Problem) -> RuleCounts:
        k = problem.n_classes
        excl = []
        for ex in problem.exclusions:
            size = n_domains(ex.domain)
            matching = np.zeros(k, dtype=np.bool_)
            matching[[c for c in ex.carriers if c in set(ex.matched)]] = True
            excl.append(_ExclusionCounts(ex, matching, *(np.zeros(size, dtype=np.int64) for _ in range(3))))
        spread = [_SpreadCounts(sp, sp.bound.copy(), np.zeros(sp.n_domains, dtype=np.int64)) for sp in problem.spreads]
        attr = [_AttractionCounts(at, [b.astype(np.int64) for b in at.bound_support], _cell_domains(at))
                for at in problem.attractions]
        roles: dict[int, tuple[list[int], list[int], list[int]]] = {}

        def role(c: int) -> tuple[list[int], list[int], list[int]]:
            return roles.setdefault(c, ([], [], []))

        for j, ex in enumerate(problem.exclusions):
            for c in {*ex.carriers, *ex.matched}:
                role(c)[0].append(j)
        for j, sp in enumerate(problem.spreads):
            for c in {*sp.carriers, *sp.counted}:
                role(c)[1].append(j)
        for j, at in enumerate(problem.attractions):
            for c in {*at.carriers, *at.supporters}:
                role(c)[2].append(j)
        return RuleCounts(excl, spread, attr, {at.name: j for j, at in enumerate(problem.attractions)}, roles,
                          shared_limits(problem))

    def copy(self) -> RuleCounts:
        return RuleCounts(
            [_ExclusionCounts(e.rule, e.self_matching, e.carriers.copy(), e.matching_carriers.copy(), e.matched.copy())
             for e in self.excl],
            [_SpreadCounts(s.rule, s.n.copy(), s.carriers.copy()) for s in self.spread],
            [_AttractionCounts(a.rule, [x.copy() for x in a.support], a.cell_domains, a.starter) for a in self.attr],
            self.by_name, self.roles, self.wide)

    # -- how many more pods of a class each node allows --------------------------------
    def cap(self, c: int, nodes: IntArray) -> IntArray:
        out = np.full(len(nodes), UNCAPPED, dtype=np.int64)
        roles = self.roles.get(c)
        if roles is None:
            return out
        for j in roles[0]:
            out = np.minimum(out, self._exclusion_cap(self.excl[j], c, nodes))
        for j in roles[1]:
            if j != self.relaxed:
                out = np.minimum(out, self._spread_cap(self.spread[j], c, nodes))
        for j in roles[2]:
            if c in self.attr[j].rule.carriers:
                out = np.where(self.allowed(j, c, nodes), out, 0)
        return out

    @staticmethod
    def _exclusion_cap(e: _ExclusionCounts, c: int, nodes: IntArray) -> IntArray:
        d = e.rule.domain[nodes]
        at = np.maximum(d, 0)
        carrier, matched = c in e.rule.carriers, c in e.rule.matched
        others = e.carriers[at] + e.matching_carriers[at]
        if carrier and matched:
            cap = np.where((e.matched[at] == 0) & (e.carriers[at] == 0), 1, 0)
        elif carrier:
            cap = np.where(e.matched[at] == 0, UNCAPPED, 0)
        else:
            cap = np.where(others == 0, UNCAPPED, 0)
        return np.where(d >= 0, cap, UNCAPPED).astype(np.int64)

    @staticmethod
    def floor_of(rule: Spread, n: IntArray) -> int:
        """The floor with counts ``n``: the smallest (ordered), else the smallest running count."""
        if not rule.ordered:
            return rule.floor
        return int(n.min()) if rule.n_domains >= rule.min_domains and rule.n_domains else 0

    def floor(self, s: _SpreadCounts) -> int:
        return self.floor_of(s.rule, s.n)

    def _spread_cap(self, s: _SpreadCounts, c: int, nodes: IntArray) -> IntArray:
        d = s.rule.domain[nodes]
        at = np.maximum(d, 0)
        room = s.rule.max_skew + self.floor(s) - s.n[at] if len(s.n) else np.zeros(len(nodes), dtype=np.int64)
        carrier, counted = c in s.rule.carriers, c in s.rule.counted
        if carrier and counted:
            cap = room
        elif carrier:
            cap = np.where(room >= 0, UNCAPPED, 0)
        else:  # counted only: limited where carriers already are
            cap = np.where(s.carriers[at] > 0, room, UNCAPPED)
        return np.where(d >= 0, np.maximum(cap, 0), UNCAPPED).astype(np.int64)

    def anchored(self, j: int, nodes: IntArray) -> BoolArray:
        """Nodes where every term's domain holds a supporter or is the starter cell's."""
        a = self.attr[j]
        ok = np.ones(len(nodes), dtype=np.bool_)
        for t, dom in enumerate(a.rule.domains):
            d = dom[nodes]
            supported = (d >= 0) & (a.support[t][np.maximum(d, 0)] > 0 if len(a.support[t]) else False)
            if a.starter >= 0:
                supported |= (d >= 0) & (d == a.cell_domains[a.starter, t])
            ok &= supported
        return ok

    def allowed(self, j: int, c: int, nodes: IntArray) -> BoolArray:
        """Where carrier class c may go now: anchored nodes, and while the group has no starter,
        if c may start it, any cell (the caller places a starter in one cell only)."""
        ok = self.anchored(j, nodes)
        if c in self.attr[j].rule.starters and self.starter_possible(j):
            ok |= self.attr[j].rule.cell[nodes] >= 0
        return ok

    def starter_possible(self, j: int) -> bool:
        a = self.attr[j]
        if a.starter >= 0 or not a.rule.starters:
            return False
        return all(self.attr[self.by_name[r]].starter < 0 for r in a.rule.rivals if r in self.by_name)

    # -- updates -------------------------------------------------------------------------
    def take(self, c: int, node: int, k: int) -> None:
        roles = self.roles.get(c)
        if roles is None or k <= 0:
            return
        for j in roles[0]:
            e = self.excl[j]
            d = int(e.rule.domain[node])
            if d < 0:
                continue
            if c in e.rule.carriers:
                (e.matching_carriers if e.self_matching[c] else e.carriers)[d] += k
            if c in e.rule.matched:
                e.matched[d] += k
        for j in roles[1]:
            s = self.spread[j]
            d = int(s.rule.domain[node])
            if d < 0:
                continue
            if c in s.rule.counted:
                s.n[d] += k
            if c in s.rule.carriers:
                s.carriers[d] += k
        for j in roles[2]:
            a = self.attr[j]
            if c in a.rule.carriers and a.starter < 0 and not self.anchored(j, np.array([node]))[0]:
                a.starter = int(a.rule.cell[node])
            if c in a.rule.supporters:
                for t, dom in enumerate(a.rule.domains):
                    if dom[node] >= 0:
                        a.support[t][dom[node]] += k

    def absorb(self, a: Assignment) -> None:
        """Counts placements made elsewhere: supporters before carriers, so that only a carrier
        nothing anchors makes its cell the starter."""
        carriers = {c for at in self.attr for c in at.rule.carriers}
        starters = {c for at in self.attr for c in at.rule.starters}
        items = sorted(zip(a.cls.tolist(), a.node.tolist(), a.counts.tolist(), strict=True),
                       key=lambda item: (item[0] in carriers, item[0] not in starters))
        for c, i, k in items:
            self.take(c, i, k)

    def carrier_of(self, c: int) -> int:
        """The attraction whose carrier class c is, or -1."""
        roles = self.roles.get(c)
        return next((j for j in roles[2] if c in self.attr[j].rule.carriers), -1) if roles else -1

    def water_level(self, c: int) -> _SpreadCounts | None:
        """The spread whose domains class c fills level by level: the one with the fewest domains
        among those it carries and is counted by."""
        roles = self.roles.get(c)
        mine = [self.spread[j] for j in roles[1] if c in self.spread[j].rule.carriers
                and c in self.spread[j].rule.counted] if roles else []
        return min(mine, key=lambda s: s.rule.n_domains) if mine else None


def shared_limits(problem: Problem) -> dict[int, tuple[tuple[str, int], ...]]:
    """Per class, the rules whose limit is shared by the nodes of a domain of more than one
    node, as ("spread" | "exclusion" | "cap", index): such a class goes one pod (or one
    checked level) at a time, or the limit would be granted once per node."""
    out: dict[int, list[tuple[str, int]]] = {}

    def wide(domain: IntArray) -> bool:
        return bool((np.bincount(domain[domain >= 0]) > 1).any()) if (domain >= 0).any() else False

    for j, ex in enumerate(problem.exclusions):
        if wide(ex.domain):
            for c in set(ex.carriers) & set(ex.matched):
                out.setdefault(c, []).append(("exclusion", j))
    for j, sp in enumerate(problem.spreads):
        if wide(sp.domain):
            for c in set(sp.counted):
                out.setdefault(c, []).append(("spread", j))
    for j, cap in enumerate(problem.group_caps):
        if cap.domain is not None and wide(cap.domain):
            for c in cap.classes:
                out.setdefault(c, []).append(("cap", j))
    return {c: tuple(limits) for c, limits in out.items()}
