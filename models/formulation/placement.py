"""The model builder: an aggregated Problem (or a neighbourhood of it) as a LinearModel.

Variables ``y[c, i]`` count class-c pods on node i, one per eligible pair of the
neighbourhood's nodes. Goals are lexicographic and solved in stages:

1. ``placement_model``: maximise the priority-weighted number of pods placed (with several
   weight stages, ``Problem.weight_stage``: one stage's, the stages above it kept as floor rows).
2. ``objective_model``: keep stage 1's value as a constraint and minimise the score
   plugins' terms, linearised as ``models.terms`` says (the squared deviation of a
   node's utilisation from the mean bounded below by its tangents at a few breakpoints:
   exact at the breakpoints, linear, integer coefficients, the same in CP-SAT and in a
   MILP, and the same in the move model of ``rebalance``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kubeplace.models.formulation.capacity_rows import ExistingNodes, Pairs, capacity_rows, group_cap_rows
from kubeplace.models.formulation.gpu_rows import DeviceVars, PairModel, device_hint, device_rows, device_use
from kubeplace.models.formulation.rule_rows import Hint, RuleRows, rule_rows
from kubeplace.models.framework import ObjectiveTerm
from kubeplace.models.linear import INF, LinearBuilder, LinearModel
from kubeplace.models.problem import Assignment, DeviceUse, Gang, IntArray, Problem
from kubeplace.models.terms import linearise

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Neighbourhood:
    """The nodes whose pods may change; everything placed elsewhere stays as it is."""

    nodes: IntArray
    fixed: Assignment

    @staticmethod
    def whole(problem: Problem) -> Neighbourhood:
        return Neighbourhood(np.arange(problem.n_nodes, dtype=np.int64), Assignment.empty())


class Extension(Protocol):
    """Rows and goals a caller adds to the model (preemption's victims and their stages): called
    once the pairs, capacity, device, group and gang rows are built."""

    def rows(self, b: PairModel) -> None:
        """Adds variables, rows and objective terms through ``b.lb``."""
        ...

    def complete(self, b: PairModel, values: IntArray) -> None:
        """Sets its variables in a hint whose pair and device variables are already set."""
        ...


@dataclass(frozen=True)
class Formulation:
    model: LinearModel
    problem: Problem
    pair_cls: IntArray  # variable j < n_pairs is y[pair_cls[j], pair_node[j]]
    pair_node: IntArray
    devices: DeviceVars | None = None

    @property
    def n_pairs(self) -> int:
        return int(self.pair_cls.shape[0])

    def assignment(self, values: IntArray) -> Assignment:
        y = np.asarray(values[: self.n_pairs], dtype=np.int64)
        keep = y > 0
        used = device_use(self.problem, self.pair_cls, self.pair_node, np.arange(self.n_pairs), self.devices,
                          values) if self.problem.has_devices else DeviceUse.empty()
        return Assignment(self.pair_cls[keep], self.pair_node[keep], y[keep], used)


# --- shared pieces ----------------------------------------------------------------------


@dataclass
class _Builder:
    problem: Problem
    hood: Neighbourhood
    lb: LinearBuilder
    pair_cls: IntArray
    pair_node: IntArray
    y: IntArray  # variable index per pair
    y_ub: IntArray  # upper bound per pair
    devices: DeviceVars | None = None
    gang_vars: list[int] = field(default_factory=list)
    domain_vars: list[tuple[int, int, int]] = field(default_factory=list)  # (var, gang, domain)
    rules: RuleRows = field(default_factory=RuleRows)

    @property
    def fixed(self) -> Assignment:
        return self.hood.fixed

    @property
    def nodes(self) -> IntArray:
        return self.hood.nodes

    def add_goal(self, cols: IntArray, coefs: IntArray) -> None:
        self.lb.add_objective(cols, coefs)

    @staticmethod
    def start(problem: Problem, hood: Neighbourhood) -> _Builder:
        elig = problem.eligible[:, hood.nodes]
        cls, local = np.nonzero(elig)
        node = hood.nodes[local]
        fixed_per_class = hood.fixed.placed_per_class(problem.n_classes)
        remaining = problem.count - fixed_per_class
        fit = _fit_count(problem, cls, node)
        ub = np.minimum(np.minimum(remaining[cls], fit), _own_caps(problem, cls, node))
        keep = ub > 0
        cls, node, ub = cls[keep], node[keep], ub[keep]
        builder = LinearBuilder()
        y = builder.add_vars(np.zeros(len(cls), dtype=np.int64), ub)
        b = _Builder(problem, hood, builder, cls.astype(np.int64), node.astype(np.int64), y, ub)
        b._count_rows(remaining)
        b._node_rows()
        b._gang_rows(fixed_per_class)
        b.rules = rule_rows(b)
        return b

    def _count_rows(self, remaining: IntArray) -> None:
        order = np.argsort(self.pair_cls, kind="stable")
        counts = np.bincount(self.pair_cls, minlength=self.problem.n_classes)
        rows = np.nonzero(counts > 1)[0]
        if len(rows) == 0:
            return
        starts = np.concatenate([[0], np.cumsum(counts)])
        cols = np.concatenate([self.y[order[starts[c]:starts[c + 1]]] for c in rows])
        self.lb.add_rows(counts[rows], cols, np.ones(len(cols), dtype=np.int64), -INF, remaining[rows])

    def _node_rows(self) -> None:
        """Capacity rows, device rows, and group caps per node of several classes (one class's cap is its
        variables' bound, ``_own_caps``; caps per topology domain are ``formulation.rule_rows``'),
        those that can bind only."""
        pairs = Pairs(self.pair_cls, self.pair_node, self.y, self.y_ub, self.problem.demand)
        role = ExistingNodes(self.hood.nodes, self.problem.free, skip_slack=True)
        capacity_rows(self.lb, pairs, role, resource_major=True)
        if self.problem.has_devices:
            self.devices = device_rows(self)
        caps = [cap for cap in self.problem.group_caps if cap.domain is None and len(cap.classes) > 1]
        group_cap_rows(self.lb, pairs, role, caps)

    def _gang_rows(self, fixed_per_class: IntArray) -> None:
        for g, gang in enumerate(self.problem.gangs):
            classes = np.asarray(gang.classes, dtype=np.int64)
            fixed = int(fixed_per_class[classes].sum())
            member = np.isin(self.pair_cls, classes)
            (z,) = self.lb.add_vars(np.array([1 if fixed > 0 else 0]), np.array([1]))
            self.gang_vars.append(int(z))
            cols = np.concatenate([self.y[member], [z]])
            need = max(gang.still_needed - fixed, 0)
            # placed (in hood) + fixed >= still_needed * z
            self.lb.add_row(cols, np.concatenate([np.ones(int(member.sum()), np.int64), [-need]]), 0, INF)
            # nothing placed unless z
            size = int(self.problem.count[classes].sum())
            self.lb.add_row(cols, np.concatenate([np.ones(int(member.sum()), np.int64), [-size]]), -INF, 0)
            if gang.domain is not None:
                self._gang_domain_rows(g, gang, member)

    def _gang_domain_rows(self, g: int, gang: Gang, member: npt.NDArray[np.bool_]) -> None:
        """One domain for all members: members fixed outside the neighbourhood choose it
        (nothing may go elsewhere); otherwise a binary per domain, at most one set, and a
        domain's members only if its binary is."""
        assert gang.domain is not None
        fixed = self.hood.fixed
        held = np.unique(gang.domain[fixed.node[np.isin(fixed.cls, np.asarray(gang.classes))]])
        pair_domain = gang.domain[self.pair_node[member]]
        cols = self.y[member]
        if len(held):
            outside = ~np.isin(pair_domain, held[:1]) if len(held) == 1 else np.ones(len(cols), dtype=np.bool_)
            if outside.any():
                self.lb.add_row(cols[outside], np.ones(int(outside.sum()), np.int64), -INF, 0)
            return
        domains = np.unique(pair_domain)
        if len(domains) <= 1:
            return
        w = self.lb.add_vars(np.zeros(len(domains), dtype=np.int64), np.ones(len(domains), dtype=np.int64))
        self.lb.add_row(w, np.ones(len(domains), np.int64), -INF, 1)
        size = int(self.problem.count[list(gang.classes)].sum())
        for d, var in zip(domains.tolist(), w.tolist(), strict=True):
            sel = pair_domain == d
            self.lb.add_row(np.concatenate([cols[sel], [var]]),
                            np.concatenate([np.ones(int(sel.sum()), np.int64), [-size]]), -INF, 0)
            self.domain_vars.append((int(var), g, int(d)))

    def placed_weight(self, stage: int) -> tuple[IntArray, IntArray]:
        """The variables and weights of the pairs whose class is in weight ``stage``."""
        mine = self.problem.stage_of_class[self.pair_cls] == stage
        return self.y[mine], self.problem.weight[self.pair_cls[mine]]

    def floor_rows(self, floors: Sequence[int]) -> None:
        """Each stage ``s < len(floors)`` places at least ``floors[s]`` (fixed pods included)."""
        fixed = fixed_weights(self.problem, self.hood)
        for stage, floor in enumerate(floors):
            cols, coefs = self.placed_weight(stage)
            if floor - fixed[stage] > 0:
                self.lb.add_row(cols, coefs, floor - fixed[stage], INF)


def _own_caps(problem: Problem, cls: IntArray, node: IntArray) -> IntArray:
    """The per-node caps of a single class, as bounds of its variables."""
    ub = np.full(len(cls), INF, dtype=np.int64)
    for cap in problem.group_caps:
        if cap.domain is None and len(cap.classes) == 1:
            sel = cls == cap.classes[0]
            ub[sel] = np.minimum(ub[sel], cap.cap[node[sel]])
    return ub


def _fit_count(problem: Problem, cls: IntArray, node: IntArray) -> IntArray:
    """How many pods of class cls[j] fit alone on node[j]."""
    d = problem.demand[cls]
    f = problem.free[node]
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(d > 0, f // np.maximum(d, 1), np.iinfo(np.int64).max)
    return np.clip(per.min(axis=1), 0, None).astype(np.int64) if len(cls) else np.zeros(0, np.int64)


def fixed_weights(problem: Problem, hood: Neighbourhood) -> tuple[int, ...]:
    """The weight the pods fixed outside the neighbourhood place in each stage."""
    return problem.stage_weights(hood.fixed.cls, hood.fixed.counts)


def _values_from(builder: _Builder, assignment: Assignment | None) -> IntArray | None:
    if assignment is None:
        return None
    y = assignment.dense(builder.problem.n_classes, builder.problem.n_nodes)
    return y[builder.pair_cls, builder.pair_node]


# --- stage 1 ----------------------------------------------------------------------------


def placement_model(problem: Problem, hood: Neighbourhood, hint: Assignment | None = None,
                    extension: Extension | None = None, floors: Sequence[int] = ()) -> Formulation:
    """Maximise the priority-weighted number of pods placed on the neighbourhood, in weight
    stage ``len(floors)``, each higher stage placing at least its floor (one stage: no floor)."""
    b = _Builder.start(problem, hood)
    if extension is not None:
        extension.rows(b)
    b.floor_rows(floors)
    stage = len(floors)
    cols, coefs = b.placed_weight(stage)
    b.lb.add_objective(cols, coefs)
    values = _values_from(b, hint)
    full = None if values is None else _complete_hint(b, values, [], hint, extension)
    return Formulation(b.lb.build(maximize=True, offset=fixed_weights(problem, hood)[stage], hint=full),
                       problem, b.pair_cls, b.pair_node, b.devices)


# --- stage 2 ----------------------------------------------------------------------------


def objective_model(problem: Problem, hood: Neighbourhood, terms: Sequence[ObjectiveTerm],
                    floors: Sequence[int], mu: FloatArray, hint: Assignment | None = None,
                    extension: Extension | None = None) -> Formulation:
    """Minimise the objective terms while placing at least ``floors`` (stage 1's weight in each
    weight stage, ``evaluate.stage_weights``)."""
    b = _Builder.start(problem, hood)
    if extension is not None:
        extension.rows(b)
    b.floor_rows(floors)
    term_hints = linearise(b, terms, mu)
    values = _values_from(b, hint)
    full = None if values is None else _complete_hint(b, values, term_hints, hint, extension)
    return Formulation(b.lb.build(maximize=False, hint=full), problem, b.pair_cls, b.pair_node, b.devices)


def _complete_hint(b: _Builder, y_values: IntArray, term_hints: Sequence[Hint],
                   hint: Assignment | None, extension: Extension | None = None) -> IntArray:
    """A value for every variable (y from the assignment, auxiliaries computed), so the
    backend receives a complete, feasible hint."""
    values = np.zeros(b.lb.n_vars, dtype=np.int64)
    values[b.y] = y_values
    if hint is not None:
        device_hint(b, values, hint)
    for gang_var, gang in zip(b.gang_vars, b.problem.gangs, strict=True):
        placed = int(y_values[np.isin(b.pair_cls, np.asarray(gang.classes))].sum())
        values[gang_var] = 1 if placed > 0 or values[gang_var] else 0
    for var, g, d in b.domain_vars:
        gang = b.problem.gangs[g]
        assert gang.domain is not None
        in_domain = np.isin(b.pair_cls, np.asarray(gang.classes)) & (gang.domain[b.pair_node] == d)
        values[var] = 1 if y_values[in_domain].sum() > 0 else 0
    for rule_hint in b.rules.hints:
        rule_hint(values)
    for term_hint in term_hints:
        term_hint(values)
    if extension is not None:
        extension.complete(b, values)
    return values
