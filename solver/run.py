"""One solve in progress: the incumbent, the time budget, and the two model stages.

``solver.solve`` (the whole model) and ``solver.lns`` (neighbourhoods of it) both improve the
incumbent of a :class:`Run` through :func:`stage_one` (place more) and :func:`stage_two` (a
better objective); an answer replaces the incumbent only when the exact evaluation of
``models.terms`` says it is better.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kubeplace.models import evaluate
from kubeplace.models.config import SolverSettings
from kubeplace.models.formulation.placement import Neighbourhood, objective_model, placement_model
from kubeplace.models.framework import ObjectiveTerm
from kubeplace.models.problem import Assignment, Problem
from kubeplace.models.terms import better, has_linear_form, objective_value
from kubeplace.solver.backends.base import Backend, BackendResult
from kubeplace.solver.budget import Budget, CountedClock
from kubeplace.solver.shares import SLICE_MIN_SECONDS


@dataclass(frozen=True)
class Event:
    """Progress of a solve: the incumbent after some step.

    A plan's incumbent is its placed weight (``bound`` bounds it from above) and its objective;
    a rebalance's is its objective and ``moves``, the pods it moves (None for a plan)."""

    step: str
    pods_placed: int
    placed_weight: int
    objective: float
    bound: int | None
    seconds: float
    moves: int | None = None


OnEvent = Callable[[Event], None]
"""What hears of a solve's progress (the CLI's progress bar, a report's recorder)."""


@dataclass
class Run:
    problem: Problem
    terms: Sequence[ObjectiveTerm]
    settings: SolverSettings
    budget: Budget
    """The solve's (``run_budget``: counted when deterministic); every backend call takes a slice of it."""
    on_event: OnEvent | None
    started: float
    incumbent: Assignment
    bound: int | None = None
    steps: list[str] = field(default_factory=list)
    proved: bool = False

    @property
    def deterministic(self) -> bool:
        """One worker: the budget is counted in backend slices, not on the clock, so the
        number of rounds and every answer are the same from run to run."""
        return self.settings.workers <= 1

    def left(self) -> float:
        return self.budget.left()

    def placed_all(self) -> bool:
        """Nothing more can be placed: the incumbent's placed weight is at the bound."""
        return self.bound is not None and evaluate.placed_weight(self.problem, self.incumbent) >= self.bound

    def offer(self, candidate: Assignment, step: str) -> bool:
        """Keeps ``candidate`` if it beats the incumbent (exact evaluation) and keeps the
        inter-pod rules (a ruin that removed a spread's pods may leave a domain over its skew)."""
        if not better(self.problem, candidate, self.incumbent, self.terms):
            return False
        if self.problem.has_domain_rules and evaluate.rule_violations(self.problem, candidate):
            return False
        self.incumbent = candidate
        self.steps.append(step)
        self.emit(step)
        return True

    def emit(self, step: str) -> None:
        if self.on_event:
            p, a = self.problem, self.incumbent
            self.on_event(Event(step, evaluate.pods_placed(a), evaluate.placed_weight(p, a),
                                objective_value(p, a, self.terms), self.bound,
                                time.monotonic() - self.started))

    def slice(self, share: float) -> Budget:
        """The budget of one backend call that may take ``share`` of the time left."""
        return self.budget.spend(self.budget.split(share).at_least(SLICE_MIN_SECONDS).total)


def run_budget(settings: SolverSettings, within: Budget | None = None, started: float | None = None) -> Budget:
    """A solve's budget, made once where a run starts: the seconds of ``within`` (a caller's
    phase), else ``settings.time_limit`` (the user's), from ``started`` (now) on the wall clock;
    with one worker counted from zero instead (``Run.deterministic``: the phase's whole seconds,
    not what the wall clock says is left, so that runs repeat). A phase's seconds count from
    when its solve starts: building the model is not charged to it."""
    seconds = settings.time_limit if within is None else within.seconds
    if within is not None and within.counted:
        return within
    if settings.workers <= 1:
        return Budget(0.0, seconds, CountedClock())
    return Budget(time.monotonic() if started is None else started, seconds, time.monotonic)


def stage_one(run: Run, backend: Backend, hood: Neighbourhood, share: float, stage: int = 0) -> BackendResult:
    """Places more of weight ``stage``, the higher stages keeping what the incumbent places."""
    floors = evaluate.stage_weights(run.problem, run.incumbent)[:stage]
    form = placement_model(run.problem, hood, run.incumbent.on_nodes(hood.nodes), floors=floors)
    result = backend.solve(form.model, run.settings, run.slice(share))
    if result.status.has_solution and result.values is not None:
        run.offer(hood.fixed.merge(form.assignment(result.values)), "place")
    return result


def stage_two(run: Run, backend: Backend, hood: Neighbourhood, share: float) -> BackendResult | None:
    if not has_linear_form(run.terms):
        return None
    mu = evaluate.mean_utilisation(run.problem, run.incumbent)
    floors = evaluate.stage_weights(run.problem, run.incumbent)
    form = objective_model(run.problem, hood, run.terms, floors, mu, run.incumbent.on_nodes(hood.nodes))
    result = backend.solve(form.model, run.settings, run.slice(share))
    if result.status.has_solution and result.values is not None:
        run.offer(hood.fixed.merge(form.assignment(result.values)), "objective")
    return result

