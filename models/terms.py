"""One table from objective term type to its exact value and its linear form.

Every place that reads a term goes through :data:`TERMS`: :func:`objective_value` (what plans and
rebalances report, and what decides whether an answer improves on the incumbent), the placement
model (``models.formulation.objective_model``) and the move model (``rebalance.model``). Both
models write a term through the same linearisation, over their columns as a
``linear_terms.TermModel``, at the same scale: a unit of the exact value is ``SCALE`` in the
linear goal. A term without a linear form says why: the exact models keep to the other terms,
and every answer is still evaluated with it (the greedy heuristics rank by it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, get_args

import numpy as np
import numpy.typing as npt

from kubeplace.models.evaluate import balance, gang_domains, measured_shift, nodes_used, placed_weight
from kubeplace.models.formulation.preference_rows import preference_rows
from kubeplace.models.formulation.rule_rows import Hint
from kubeplace.models.fragmentation import cluster_fragmentation
from kubeplace.models.framework import (
    FragmentationTerm,
    GangDomainsTerm,
    LoadBalanceTerm,
    NodesUsedTerm,
    ObjectiveTerm,
    PreferenceTerm,
)
from kubeplace.models.gpu import WHOLE
from kubeplace.models.linear import INF
from kubeplace.models.linear_terms import SCALE, TermModel, balance_cut, used_flag
from kubeplace.models.preferences import POINTS_PER_UNIT, preference_points
from kubeplace.models.problem import Assignment, IntArray, Problem

FloatArray = npt.NDArray[np.float64]
T = TypeVar("T")


@dataclass(frozen=True)
class TermKind(Generic[T]):
    """What one term type means: its exact value, its linear form (or why it has none), and
    whether it separates over independent parts of a problem."""

    evaluate: Callable[[Problem, Assignment, T], float]
    """The term's exact value for an assignment (lower is better)."""
    linearise: Callable[[TermModel, T, FloatArray], list[Hint]] | None
    """Adds the term's rows and goal to a model (``mu``: (R,) the mean utilisation the balance
    terms centre on); returns what sets its auxiliaries in a hint. None: no linear form."""
    no_linear_form: str = ""
    """Why ``linearise`` is None."""
    separable: bool = True
    """The value of a problem split into independent parts is the sum of the parts' values."""


def balance_rows(m: TermModel, term: LoadBalanceTerm, mu: FloatArray) -> list[Hint]:
    """Per node of ``m.nodes``: the tangent cuts of ``weight * (u - mu)^2`` (``linear_terms.balance_cut``)."""
    p = m.problem
    r = p.resource_index(term.resource)
    if r is None:
        return []
    hints: list[Hint] = []
    base = p.base(term.measured)
    mean = float(mu[r] + (measured_shift(p)[r] if term.measured else 0.0))
    for i in m.nodes:
        sel = np.nonzero(m.pair_node == i)[0]
        cut = balance_cut(m.lb, m.y[sel], p.demand[m.pair_cls[sel], r], m.y_ub[sel], int(base[i, r]),
                          int(p.capacity[i, r]), term.resource, term.weight, mean)
        if cut is not None:
            m.add_goal(np.array([cut.cost]), np.array([1]))
            hints.append(cut.hint)
    return hints


def _any_set(flag: int, cols: IntArray) -> Hint:
    """Sets ``flag`` to 1 when any of ``cols`` is positive, else 0."""
    def hint(values: IntArray) -> None:
        values[flag] = 1 if values[cols].sum() > 0 else 0
    return hint


def nodes_used_rows(m: TermModel, term: NodesUsedTerm) -> list[Hint]:
    """Per node not in use already that a column may put in use: a binary, at ``SCALE * weight``."""
    p = m.problem
    pods = p.resource_index("pods")
    hints = []
    for i in m.nodes:
        if pods is not None and p.used[i, pods] > 0:
            continue  # already in use whatever we do
        sel = np.nonzero(m.pair_node == i)[0]
        if len(sel) == 0:
            continue
        flag = used_flag(m.lb, m.y[sel], m.y_ub[sel])
        m.add_goal(np.array([flag]), np.array([SCALE * term.weight]))
        hints.append(_any_set(flag, m.y[sel]))
    return hints


def gang_domains_rows(m: TermModel, term: GangDomainsTerm) -> list[Hint]:
    """Per gang with a preferred key and per domain its members may use here: a binary,
    set if any member goes there, costing ``weight`` (in SCALE). Domains its members fixed
    outside the model already use cost nothing more."""
    hints = []
    fixed = m.fixed
    for gang in m.problem.gangs:
        if gang.preferred is None:
            continue
        classes = np.asarray(gang.classes, dtype=np.int64)
        held = np.unique(gang.preferred[fixed.node[np.isin(fixed.cls, classes)]])
        member = np.isin(m.pair_cls, classes)
        pair_domain = gang.preferred[m.pair_node[member]]
        cols = m.y[member]
        size = int(m.problem.count[classes].sum())
        for d in np.setdiff1d(np.unique(pair_domain), held).tolist():
            sel = pair_domain == d
            (u,) = m.lb.add_vars(np.array([0]), np.array([1]))
            m.lb.add_row(np.concatenate([cols[sel], [u]]), np.concatenate([np.ones(int(sel.sum()), np.int64),
                                                                           [-size]]), -INF, 0)
            m.add_goal(np.array([u]), np.array([SCALE * term.weight]))
            hints.append(_any_set(int(u), cols[sel]))
    return hints


TERMS: Mapping[type, TermKind[Any]] = {
    LoadBalanceTerm: TermKind[LoadBalanceTerm](
        lambda p, a, t: t.weight * balance(p, a, t.resource, t.measured), balance_rows,
        separable=False),  # its mean is the whole cluster's
    NodesUsedTerm: TermKind[NodesUsedTerm](
        lambda p, a, t: t.weight * nodes_used(p, a), lambda m, t, _mu: nodes_used_rows(m, t)),
    GangDomainsTerm: TermKind[GangDomainsTerm](
        lambda p, a, t: t.weight * gang_domains(p, a), lambda m, t, _mu: gang_domains_rows(m, t)),
    FragmentationTerm: TermKind[FragmentationTerm](
        lambda p, a, t: t.weight * cluster_fragmentation(p, a, by_devices=True)[0] / WHOLE, None,
        no_linear_form="FGD fragmentation weighs the free GPU capacity of every node against the workload's "
                       "task shapes: no linear form; it ranks greedy candidates and every answer"),
    PreferenceTerm: TermKind[PreferenceTerm](
        lambda p, a, t: t.weight * preference_points(p, a, t.plugin) / POINTS_PER_UNIT,
        lambda m, t, _mu: preference_rows(m, t)),
}
"""Every objective term type (``framework.ObjectiveTerm``) and what it means."""

TERM_TYPES: tuple[type, ...] = get_args(ObjectiveTerm)


def kind_of(term: ObjectiveTerm) -> TermKind[Any]:
    return TERMS[type(term)]


def objective_value(problem: Problem, a: Assignment, terms: Sequence[ObjectiveTerm]) -> float:
    """The second goal as the plan reports it (lower is better)."""
    total = 0.0
    for t in terms:
        total += kind_of(t).evaluate(problem, a, t)
    return total


def better(problem: Problem, a: Assignment, b: Assignment, terms: Sequence[ObjectiveTerm]) -> bool:
    """True when a beats b lexicographically (placed weight, then objective)."""
    wa, wb = placed_weight(problem, a), placed_weight(problem, b)
    if wa != wb:
        return wa > wb
    return objective_value(problem, a, terms) < objective_value(problem, b, terms) - 1e-9


def has_linear_form(terms: Sequence[ObjectiveTerm]) -> bool:
    """Whether any of ``terms`` adds to a linear goal."""
    return any(kind_of(t).linearise is not None for t in terms)


def separable(terms: Sequence[ObjectiveTerm]) -> bool:
    return all(kind_of(t).separable for t in terms)


def linearise(m: TermModel, terms: Sequence[ObjectiveTerm], mu: FloatArray) -> list[Hint]:
    """Writes every term with a linear form into ``m``, in order; the hints of their auxiliaries."""
    hints: list[Hint] = []
    for t in terms:
        rows = kind_of(t).linearise
        if rows is not None:
            hints += rows(m, t, mu)
    return hints
