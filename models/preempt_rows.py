"""Preemption in the linear model: which victims go, and the lexicographic stages.

Added to the placement model of a :class:`models.preempt_problem.PreemptionProblem` through
:class:`models.formulation.Extension`. ``k[v]`` is the ``y`` variable of victim class v (its pods
kept); evicted = count - k.

- **Units.** The classes of one running gang share a binary ``z`` (evicted): ``k + count z = count``.
- **Who may use freed room** (the kube-scheduler's rule, for the whole batch at once). On each
  node, for each power level ``t`` of the pending pods there: a binary ``b`` set when a pod of
  power ``t`` goes there, and then the pods of power >= t must fit with every victim they may
  not evict (priority >= t) still there, evicted or not::

      sum_{power >= t} d y + sum_{prio < t} d k + M b <= free,   M = sum_{prio >= t} d count

  so room freed by a victim is used only by pods allowed to preempt it (a pod that may not
  preempt, at level -inf, fits as if nobody were evicted), and pods of a lower level never count
  on room that a victim above them frees for a pod of a higher level: one decision for the batch.
- **No eviction without a preemptor.** A victim is evicted only where a pod of higher power goes
  (``count - k <= count * sum_{t > prio} b``); a gang unit, on one of its nodes. Capacity rows
  do the rest: two preemptors never count on the same freed room, and a pod or gang that is not
  placed frees nothing (its victims would break no row if kept, and the stages keep them).
- **Stages** (lexicographic; each later stage keeps the earlier ones' values): placed weight
  (the placement model's own objective: pods placed and victims kept, tier by tier of priority,
  see ``models.preempt_problem``; once per weight stage when the tiers need several); the
  highest victim priority (``h[t]`` set when a victim
  of tier >= t goes; minimise sum h); PodDisruptionBudget violations (per budget, victims it
  protects beyond ``disruptionsAllowed``); the victims, each weighted 1 + its tier; then the
  profile's terms.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from kubeplace.models.formulation.capacity_rows import Pairs, PreemptionLevel, level_rows
from kubeplace.models.formulation.gpu_rows import PairModel
from kubeplace.models.linear import INF
from kubeplace.models.preempt_problem import PreemptionProblem
from kubeplace.models.problem import Assignment, IntArray


class Stage(enum.IntEnum):
    PLACE = 0
    HIGHEST = 1
    BUDGETS = 2
    VICTIMS = 3
    TERMS = 4


ORDER = ("pods placed net of pods evicted, by priority", "highest victim priority", "PodDisruptionBudget violations",
         "victims, weighted by priority", "the profile's objective")
"""What each stage minimises or maximises, in order (the plan's summary states it)."""


@dataclass(frozen=True)
class VictimValues:
    """An answer's preemption goals, exactly (lower is better)."""

    evicted: IntArray
    """(V,) pods of each victim class evicted."""
    highest: int
    """Number of victim tiers up to the highest one evicted (0: nobody evicted)."""
    violations: int
    cost: int

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.highest, self.violations, self.cost)


def victim_values(pp: PreemptionProblem, a: Assignment) -> VictimValues:
    return values_of_evicted(pp, pp.victim_count - pp.kept(a))


def values_of_evicted(pp: PreemptionProblem, evicted: IntArray) -> VictimValues:
    """The goals when ``evicted[v]`` pods of each victim class v go."""
    gone = evicted > 0
    highest = int(pp.victim_tier[gone].max()) + 1 if gone.any() else 0
    allowed = np.array([b.allowed for b in pp.budgets], dtype=np.int64)
    violations = int(np.maximum(pp.protected.astype(np.int64) @ evicted - allowed, 0).sum()) if len(allowed) else 0
    return VictimValues(evicted, highest, violations, int((evicted * pp.victim_cost_weight).sum()))


@dataclass
class VictimRows:
    """The extension for one stage; ``limits`` are the earlier stages' values to keep."""

    pp: PreemptionProblem
    stage: Stage = Stage.PLACE
    limits: tuple[int, int, int] = (0, 0, 0)
    kept: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    units: list[int] = field(default_factory=list)
    levels: list[tuple[int, int, int]] = field(default_factory=list)  # (b variable, node, power)
    tiers: list[int] = field(default_factory=list)
    budget_vars: list[tuple[int, int]] = field(default_factory=list)  # (variable, budget)

    def rows(self, b: PairModel) -> None:
        pp = self.pp
        n = pp.n_pending
        victim_pair = np.full(pp.n_victims, -1, dtype=np.int64)
        is_victim = b.pair_cls >= n
        victim_pair[b.pair_cls[is_victim] - n] = np.nonzero(is_victim)[0]
        assert (victim_pair >= 0).all(), "every victim class has its one pair"
        self.kept = b.y[victim_pair]
        self._units(b)
        self._levels(b)
        if self.stage >= Stage.HIGHEST:
            self._highest(b)
        if self.stage >= Stage.BUDGETS:
            self._budgets(b)
        if self.stage >= Stage.VICTIMS:
            self._victims(b)

    def _units(self, b: PairModel) -> None:
        pp, count = self.pp, self.pp.victim_count
        for g in range(len(pp.gang_units)):
            (z,) = b.lb.add_vars(np.array([0]), np.array([1]))
            self.units.append(int(z))
            for v in np.nonzero(pp.victim_unit == g)[0].tolist():
                b.lb.add_row(np.array([self.kept[v], z]), np.array([1, int(count[v])]), int(count[v]), int(count[v]))

    def _levels(self, b: PairModel) -> None:
        pp, p, n = self.pp, self.pp.problem, self.pp.n_pending
        count, prio, demand = pp.victim_count, pp.victim_priority, p.demand
        pending = b.pair_cls < n
        justified: dict[int, list[int]] = {}  # victim class -> b variables of levels above it
        for i in np.unique(pp.victim_node).tolist():
            here = np.nonzero(pp.victim_node == i)[0]
            pairs = np.nonzero(pending & (b.pair_node == i))[0]
            power = pp.power[b.pair_cls[pairs]]
            for t in np.unique(power).tolist():
                (flag,) = b.lb.add_vars(np.array([0]), np.array([1]))
                self.levels.append((int(flag), int(i), int(t)))
                at = pairs[power == t]
                b.lb.add_row(np.concatenate([b.y[at], [flag]]),
                             np.concatenate([np.ones(len(at), np.int64), [-int(b.y_ub[at].sum())]]), -INF, 0)
                above, below = here[prio[here] >= t], here[prio[here] < t]
                for v in below.tolist():
                    justified.setdefault(v, []).append(int(flag))
                # node i's room at level t: its pods of power >= t beside the victims below t kept
                # and, once the flag is set, the whole load of those above it
                held = (demand[n + above] * count[above][:, None]).sum(axis=0)
                level = PreemptionLevel(p.free[i], int(flag), held, self.kept[below], demand[n + below])
                on = pairs[power >= t]
                level_rows(b.lb, Pairs(b.pair_cls[on], b.pair_node[on], b.y[on], b.y_ub[on], demand), level)
        for v in range(pp.n_victims):
            flags = justified.get(v, [])
            if pp.victim_unit[v] < 0:  # evicted <= count * (levels above it here)
                b.lb.add_row(np.array([self.kept[v], *flags]), np.array([1] + [int(count[v])] * len(flags)),
                             int(count[v]), INF)
        for g, z in enumerate(self.units):
            flags = sorted({f for v in np.nonzero(pp.victim_unit == g)[0].tolist() for f in justified.get(v, [])})
            b.lb.add_row(np.array([z, *flags]), np.array([1] + [-1] * len(flags)), -INF, 0)

    def _highest(self, b: PairModel) -> None:
        pp = self.pp
        tier, count = pp.victim_tier, pp.victim_count
        h = b.lb.add_vars(np.zeros(len(pp.tiers), np.int64), np.ones(len(pp.tiers), np.int64))
        self.tiers = h.tolist()
        for v in range(pp.n_victims):  # evicted => h[tier] (k + count h >= count)
            b.lb.add_row(np.array([self.kept[v], h[tier[v]]]), np.array([1, int(count[v])]), int(count[v]), INF)
        for t in range(len(h) - 1):
            b.lb.add_row(np.array([h[t], h[t + 1]]), np.array([1, -1]), 0, INF)
        if self.stage == Stage.HIGHEST:
            b.lb.add_objective(h, np.ones(len(h), np.int64))
        elif len(h):
            b.lb.add_row(h, np.ones(len(h), np.int64), -INF, self.limits[0])

    def _budgets(self, b: PairModel) -> None:
        pp = self.pp
        count = pp.victim_count
        for j, budget in enumerate(pp.budgets):
            protected = np.array([v for v in range(pp.n_victims) if j in pp.victim_budgets[v]], dtype=np.int64)
            if len(protected) == 0:
                continue
            total = int(count[protected].sum())
            (s,) = b.lb.add_vars(np.array([0]), np.array([total]))
            self.budget_vars.append((int(s), j))
            # s >= evicted - allowed  <=>  s + sum k >= total - allowed
            b.lb.add_row(np.concatenate([[s], self.kept[protected]]), np.ones(len(protected) + 1, np.int64),
                         total - budget.allowed, INF)
        cols = np.array([s for s, _ in self.budget_vars], dtype=np.int64)
        if self.stage == Stage.BUDGETS:
            b.lb.add_objective(cols, np.ones(len(cols), np.int64))
        elif len(cols):
            b.lb.add_row(cols, np.ones(len(cols), np.int64), -INF, self.limits[1])

    def _victims(self, b: PairModel) -> None:
        pp = self.pp
        w = pp.victim_cost_weight
        if self.stage == Stage.VICTIMS:  # minimise sum w (count - k): maximise sum w k
            b.lb.add_objective(self.kept, -w)
        elif len(w):
            b.lb.add_row(self.kept, w, int((w * pp.victim_count).sum()) - self.limits[2], INF)

    def complete(self, b: PairModel, values: IntArray) -> None:
        pp = self.pp
        kept = values[self.kept]
        evicted = pp.victim_count - kept
        for g, z in enumerate(self.units):
            values[z] = int(evicted[pp.victim_unit == g].sum() > 0)
        pending = b.pair_cls < pp.n_pending
        for flag, i, t in self.levels:
            at = pending & (b.pair_node == i)
            at[at] = pp.power[b.pair_cls[at]] == t
            values[flag] = int(values[b.y[at]].sum() > 0)
        tier = pp.victim_tier
        top = int(tier[evicted > 0].max()) if (evicted > 0).any() else -1
        for t, h in enumerate(self.tiers):
            values[h] = int(t <= top)
        for s, j in self.budget_vars:
            protected = np.array([j in vb for vb in pp.victim_budgets], dtype=np.bool_)
            values[s] = max(0, int(evicted[protected].sum()) - pp.budgets[j].allowed)
