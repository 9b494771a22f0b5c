"""Solving with preemption: the greedy first, then the exact stages, one after the other.

The starting point is the plan without preemption (every victim kept), then the greedy of
``solver.greedy_preemption``. The exact backend then solves the stages of ``models.preempt_rows``
in order, each keeping the values the incumbent reached in the earlier ones: placed weight,
highest victim priority, PodDisruptionBudget violations, weighted victims, the profile's terms.
An answer replaces the incumbent only when it is better in that order by exact evaluation, and
only after the model's own rows accept it, so the result is never worse than the greedy's and
never breaks a rule. Every stage proven optimal proves the victim set optimal for the order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kubeplace.models import evaluate
from kubeplace.models.config import SolverSettings
from kubeplace.models.formulation.placement import Formulation, Neighbourhood, objective_model, placement_model
from kubeplace.models.framework import ObjectiveTerm
from kubeplace.models.preempt_problem import PreemptionProblem
from kubeplace.models.preempt_rows import Stage, VictimRows, VictimValues, victim_values
from kubeplace.models.problem import Assignment
from kubeplace.models.terms import has_linear_form, objective_value
from kubeplace.solver.backends import get_backend
from kubeplace.solver.bound import stage_room_gone
from kubeplace.solver.budget import Budget
from kubeplace.solver.greedy_preemption import greedy_preemption
from kubeplace.solver.shares import PREEMPTION_GREEDY_SHARE, PREEMPTION_MIN_SECONDS, PREEMPTION_SHARES

MAX_PAIRS = 200_000
"""Above this many (class, node) pairs the exact stages are skipped: the greedy answer stands."""

Key = tuple[int, int, int, int, float]


@dataclass(frozen=True)
class PreemptionReport:
    assignment: Assignment
    """Pending pods placed and victims kept, in the preemption problem's classes."""
    values: VictimValues
    placed_weight: int
    objective: float
    status: str
    """optimal (every stage proven) | feasible | greedy."""
    seconds: float
    backend: str
    steps: tuple[str, ...]


def key_of(pp: PreemptionProblem, a: Assignment, terms: Sequence[ObjectiveTerm]) -> Key:
    """The stated order, lower is better: more placed weight, then the victims' goals, then the
    profile's objective."""
    v = victim_values(pp, a)
    return (-evaluate.placed_weight(pp.problem, a), *v.key, objective_value(pp.problem, a, terms))


def feasible(pp: PreemptionProblem, a: Assignment) -> bool:
    """The model's rows accept ``a`` (every pod it places has its pair in the model)."""
    form = placement_model(pp.problem, Neighbourhood.whole(pp.problem), a, VictimRows(pp))
    lm = form.model
    if lm.hint is None:
        return False
    placed = int(lm.hint[: form.n_pairs].sum())
    return placed == int(a.counts.sum()) and not lm.violations(lm.hint)


def solve_preemption(pp: PreemptionProblem, start: Assignment, settings: SolverSettings, budget: Budget,
                     say: Callable[[str], None] | None = None) -> PreemptionReport:
    """``start``: the pending placements of the plan without preemption; ``budget``: the caller's
    phase (what that plan left of plan --preempt's budget)."""
    started = time.monotonic()
    terms = pp.terms
    kept = pp.all_kept()
    incumbent = kept.merge(start)
    steps = ["no preemption"]
    if not feasible(pp, incumbent):
        incumbent, steps = kept, ["nothing placed"]
    greedy = greedy_preemption(pp, incumbent, budget.first(PREEMPTION_GREEDY_SHARE))
    greedy = replace(greedy, devices=incumbent.devices)  # it never moves the pods sharing a GPU
    if key_of(pp, greedy, terms) < key_of(pp, incumbent, terms) and feasible(pp, greedy):
        incumbent = greedy
        steps.append("greedy preemption")
    backend = get_backend(settings.backend)
    proven = int(pp.problem.eligible.sum()) <= MAX_PAIRS
    if not proven:
        steps.append(f"exact stages skipped (more than {MAX_PAIRS} pairs)")
    for stage, weight_stage in _steps(pp):
        if not proven:
            break
        if stage == Stage.TERMS and not has_linear_form(terms):
            continue
        if weight_stage and stage_room_gone(pp.problem, evaluate.stage_weights(pp.problem, incumbent)[:weight_stage]):
            continue  # nothing of this weight stage fits beside what the stages above keep: 0 is its optimum
        share = PREEMPTION_SHARES[stage] / sum(v for s, v in PREEMPTION_SHARES.items() if s >= stage)
        if stage == Stage.PLACE:  # the place share, split between the weight stages left
            share /= pp.problem.n_stages - weight_stage
        form = stage_model(pp, stage, incumbent, terms, weight_stage)
        result = backend.solve(form.model, settings, budget.split(share).at_least(PREEMPTION_MIN_SECONDS))
        if say is not None:
            say(f"preemption stage {stage.name.lower()}: {result.status.value}")
        proven = proven and result.status.value == "optimal"
        if result.values is None:
            proven = False
            continue
        found = form.assignment(result.values)
        if key_of(pp, found, terms) < key_of(pp, incumbent, terms) and feasible(pp, found):
            incumbent = found
            steps.append(stage.name.lower())
    values = victim_values(pp, incumbent)
    status = "optimal" if proven else ("feasible" if len(steps) > 1 else "greedy")
    return PreemptionReport(incumbent, values, evaluate.placed_weight(pp.problem, incumbent),
                            objective_value(pp.problem, incumbent, terms), status,
                            time.monotonic() - started, backend.name, tuple(steps))


def _steps(pp: PreemptionProblem) -> list[tuple[Stage, int]]:
    """The exact stages in order; the place stage once per weight stage, the highest first (a
    higher priority's preemptors and kept pods before any lower one's, at any number of them)."""
    return [(stage, w) for stage in Stage for w in (range(pp.problem.n_stages) if stage == Stage.PLACE else [0])]


def stage_model(pp: PreemptionProblem, stage: Stage, incumbent: Assignment,
                terms: Sequence[ObjectiveTerm], weight_stage: int = 0) -> Formulation:
    """The model of ``stage``; the place stage maximises ``weight_stage``, the stages above it
    keeping what ``incumbent`` places."""
    p = pp.problem
    hood = Neighbourhood.whole(p)
    values = victim_values(pp, incumbent)
    rows = VictimRows(pp, stage, values.key)
    if stage == Stage.PLACE:
        return placement_model(p, hood, incumbent, rows, evaluate.stage_weights(p, incumbent)[:weight_stage])
    mu = evaluate.mean_utilisation(p, incumbent)
    return objective_model(p, hood, terms if stage == Stage.TERMS else (), evaluate.stage_weights(p, incumbent), mu,
                           incumbent, rows)

