"""Solve orchestration: greedy first, then the exact backend improves within a budget.

1. Greedy placements (best-fit, spread); the better one is the incumbent. It is a
   valid answer on its own and the complete hint for the backend.
2. The LP bound on what any placement can place.
3. Small problems: the whole model, stage 1 (place; once per weight stage, the highest
   priorities first, when the tiers' strict weights do not fit one objective) then stage 2
   (objective).
   Large problems: large-neighbourhood search (``solver.lns``) around the incumbent.
The answer is never worse than the greedy one: a backend result replaces the
incumbent only when it is better by the exact evaluation of ``models.terms``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.models import evaluate
from kubeplace.models.config import SolverSettings
from kubeplace.models.formulation.placement import Neighbourhood
from kubeplace.models.framework import ObjectiveTerm
from kubeplace.models.problem import Assignment, IntArray, Problem
from kubeplace.models.terms import better, objective_value, separable
from kubeplace.solver.backends import get_backend
from kubeplace.solver.backends.base import Backend, Status
from kubeplace.solver.bound import placed_weight_bound, stage_room_gone
from kubeplace.solver.budget import Budget
from kubeplace.solver.greedy import FRAG_GREEDY, POLICIES, greedy, greedy_in_queue, guided
from kubeplace.solver.guided import kind_quotas
from kubeplace.solver.lns import improve
from kubeplace.solver.repair import repair
from kubeplace.solver.run import Event, Run, run_budget, stage_one, stage_two
from kubeplace.solver.shares import (
    GUIDED_SECONDS,
    GUIDED_SHARE,
    LP_BOUND_MIN_SECONDS,
    LP_BOUND_SHARE,
    MIN_LEFT_SECONDS,
    PART_MIN_SECONDS,
    PATTERN_SHARE,
    REPAIR_ROUNDS_PER_SECOND,
    REPAIR_SHARE,
    SLICE_MIN_SECONDS,
    WHOLE_PLACE_SHARE,
)
from kubeplace.solver.split import components, lift, restrict, subproblem

QUEUE_ORDER_PODS = 400
"""Up to this many pending pods (a window of a stream of arrivals, not a whole backlog), the
FGD greedy takes pods in queue order instead of largest first: on FGD's saturation replay that
order ends with more GPUs allocated (see ``solver.greedy.greedy_in_queue``)."""
DEFAULT_SETTINGS = SolverSettings()


@dataclass(frozen=True)
class SolveReport:
    assignment: Assignment
    status: str  # optimal | feasible | greedy
    placed_weight: int
    pods_placed: int
    objective: float
    bound: int | None  # upper bound on placed_weight
    seconds: float
    backend: str
    steps: tuple[str, ...] = field(default=())

    @property
    def gap(self) -> float | None:
        if self.bound is None or self.bound == 0:
            return None if self.bound is None else 0.0
        return max(0.0, (self.bound - self.placed_weight) / self.bound)


def solve(problem: Problem, terms: Sequence[ObjectiveTerm], settings: SolverSettings = DEFAULT_SETTINGS,
          on_event: Callable[[Event], None] | None = None, seeds: Sequence[tuple[Assignment, str]] = (),
          budget: Budget | None = None) -> SolveReport:
    """Within ``budget`` (the caller's; else ``run_budget``: the settings' time limit from now).
    Independent parts are solved one by one, each with a share of the budget, when
    the objective separates over them (the balance term does not: its mean is the whole
    cluster's). ``seeds`` are placements made elsewhere (the kube-scheduler emulation) that
    compete with the greedy ones, whole or part by part."""
    whole = run_budget(settings, budget)
    parts = [(c, n) for c, n in components(problem) if len(n)] if separable(terms) else []
    if len(parts) <= 1:
        return _solve_one(problem, terms, settings, whole, on_event, seeds)
    started = time.monotonic()
    pairs = [int(problem.eligible[np.ix_(c, n)].sum()) for c, n in parts]
    reports = []
    for k, (classes, nodes) in enumerate(parts):
        # counted: fixed shares of the whole, not what the clock says is left
        part = whole.part(pairs[k] / max(sum(pairs), 1)) if whole.counted else \
            whole.split(pairs[k] / max(sum(pairs[k:]), 1))
        sub = subproblem(problem, classes, nodes)
        sub_seeds = [(restrict(a, classes, nodes), name) for a, name in seeds]
        reports.append((_solve_one(sub, terms, settings, part.at_least(PART_MIN_SECONDS), None, sub_seeds),
                        classes, nodes))
    merged = Assignment.empty()
    for rep, classes, nodes in reports:
        merged = merged.merge(lift(rep.assignment, classes, nodes))
    whole_greedy, _ = _best_greedy(problem, terms, settings, whole, seeds, with_guided=False)
    steps = tuple(f"part {k + 1}/{len(parts)}: {', '.join(r.steps)}" for k, (r, _, _) in enumerate(reports))
    if better(problem, whole_greedy, merged, terms):
        merged, steps = whole_greedy, (*steps, "greedy on the whole problem kept")
    bounds = [r.bound for r, _, _ in reports]
    bound = None if any(b is None for b in bounds) else sum(b for b in bounds if b is not None)
    status = "optimal" if all(r.status == "optimal" for r, _, _ in reports) else (
        "greedy" if all(r.status == "greedy" for r, _, _ in reports) else "feasible")
    report = SolveReport(merged, status, evaluate.placed_weight(problem, merged), evaluate.pods_placed(merged),
                         objective_value(problem, merged, terms), bound, time.monotonic() - started,
                         reports[0][0].backend, steps)
    if on_event:
        on_event(Event("parts", report.pods_placed, report.placed_weight, report.objective, bound, report.seconds))
    return report


def _solve_one(problem: Problem, terms: Sequence[ObjectiveTerm], settings: SolverSettings, budget: Budget,
               on_event: Callable[[Event], None] | None, seeds: Sequence[tuple[Assignment, str]] = ()) -> SolveReport:
    started = time.monotonic()
    best, name = _best_greedy(problem, terms, settings, budget, seeds)  # the guided greedy takes a part
    run = Run(problem, terms, settings, budget, on_event, started, best, steps=[name])
    backend = get_backend(settings.backend)
    everything = placeable_weight(problem)
    if settings.stop_when_placed and evaluate.placed_weight(problem, best) >= everything:
        run.bound = everything  # every pod that can be placed is: the bound needs no LP
        run.steps.append("stopped: every pod placed")
        run.emit("greedy")
        return _report(run, backend.name, started)
    # the kind LP weighs one stage: with several, every pod that can be placed is the bound
    lp = placed_weight_bound(problem, budget.part(LP_BOUND_SHARE).at_least(LP_BOUND_MIN_SECONDS)) \
        if problem.n_stages == 1 else everything
    run.bound = None if lp is None else min(lp, everything)
    run.emit("greedy")
    if settings.stop_when_placed and run.placed_all():
        run.steps.append("stopped: the placement is at its bound")
    elif int(problem.eligible.sum()) <= settings.full_model_pairs:
        _solve_whole(run, backend)
    else:
        _repair(run)
        _patterns(run)
        improve(run, backend)
    return _report(run, backend.name, started)


def placeable_weight(problem: Problem) -> int:
    """The placed weight no placement can exceed for want of pods: every pod's, but those of a
    gang with fewer members (pending and running) than its minMember, which waits for the rest.
    (The LP bound knows only capacity.)"""
    return problem.weigh(np.arange(problem.n_classes, dtype=np.int64), placeable_counts(problem))


def placeable_counts(problem: Problem) -> IntArray:
    """(K,) the pods of each class that may be placed for all the batch knows: none of a gang
    short of its minMember."""
    count = problem.count.copy()
    for gang in problem.gangs:
        classes = list(gang.classes)
        if int(problem.count[classes].sum()) + gang.running < gang.min_member:
            count[classes] = 0
    return count


def _report(run: Run, backend: str, started: float) -> SolveReport:
    problem, a = run.problem, run.incumbent
    status = "optimal" if run.proved else ("feasible" if len(run.steps) > 1 else "greedy")
    return SolveReport(a, status, evaluate.placed_weight(problem, a), evaluate.pods_placed(a),
                       objective_value(problem, a, run.terms), run.bound,
                       time.monotonic() - started, backend, tuple(run.steps))


def _best_greedy(problem: Problem, terms: Sequence[ObjectiveTerm], settings: SolverSettings, budget: Budget,
                 seeds: Sequence[tuple[Assignment, str]] = (), with_guided: bool = True) -> tuple[Assignment, str]:
    """The best of the greedy placements and ``seeds`` (lexicographic, exact evaluation) that
    keep the inter-pod rules as the model states them, and its name. The guided one (an LP
    first) is left out when ``stop_when_placed`` and a plain one already places every pod that
    can be placed."""
    in_queue = int(problem.count.sum()) <= QUEUE_ORDER_PODS
    pack = settings.pack_devices and problem.has_devices
    exact = True if pack else None  # whole-node FGD whatever the batch's size
    candidates = [(greedy_in_queue(problem, FRAG_GREEDY, exact), f"{FRAG_GREEDY}, queue order")
                  if policy == FRAG_GREEDY and in_queue else (greedy(problem, policy, exact=exact), policy)
                  for policy in POLICIES if policy != FRAG_GREEDY or problem.has_devices]
    if settings.stop_when_placed and with_guided:
        everything = placeable_weight(problem)
        with_guided = not any(evaluate.placed_weight(problem, c) >= everything
                              and not (problem.has_domain_rules and evaluate.rule_violations(problem, c))
                              for c, _ in candidates)
    quotas = kind_quotas(problem, budget.part(GUIDED_SHARE).within(GUIDED_SECONDS)) if with_guided else None
    if quotas is not None:
        candidates += [(guided(problem, *quotas), "guided"), (guided(problem, *quotas, packed=True), "guided best-fit")]
    candidates += seeds
    if problem.has_domain_rules:
        candidates = [(a, n) for a, n in candidates if not evaluate.rule_violations(problem, a)]
    best, name = candidates[0] if candidates else (Assignment.empty(), "none keeps the rules")
    for candidate, policy in candidates[1:]:
        if better(problem, candidate, best, terms):
            best, name = candidate, policy
    if pack:
        best, name = _packed(problem, candidates, best, name)
    return best, f"greedy ({name})"


def _packed(problem: Problem, candidates: Sequence[tuple[Assignment, str]], best: Assignment,
            name: str) -> tuple[Assignment, str]:
    """The FGD placement instead of ``best`` when it places as much (``SolverSettings.pack_devices``):
    in a stream of batches, the next batch's GPU pods need the devices this one leaves whole."""
    weight = evaluate.placed_weight(problem, best)
    for candidate, policy in candidates:
        if policy.startswith(FRAG_GREEDY) and evaluate.placed_weight(problem, candidate) >= weight:
            return candidate, policy
    return best, name


def _patterns(run: Run) -> None:
    """Column generation over node patterns when pods are left unplaced: exact per node
    (device packing included), so it places what pooled capacity cannot tell apart, and
    its converged LP proves a bound tighter than the kind LP. Budgeted by the clock and
    priced on two threads, so it is skipped when one worker asks for reproducibility."""
    if run.deterministic or run.bound is None or run.problem.n_stages > 1:
        return  # (its pricing weighs one stage)
    if evaluate.placed_weight(run.problem, run.incumbent) >= run.bound:
        return
    from kubeplace.solver.patterns import pattern_placement  # loads highspy: only when it runs

    found = pattern_placement(run.problem, run.incumbent, run.budget.split(PATTERN_SHARE), seed=run.settings.seed)
    if found.assignment is not None:
        run.offer(found.assignment, "patterns")
    if found.proved_bound is not None:
        run.bound = min(run.bound, math.ceil(found.proved_bound - 1e-6))
        run.steps.append("bound proved by column generation")


def _repair(run: Run) -> None:
    """Ruin and recreate (``solver.repair``) while gangs are left out: it moves whole gangs
    across the cluster, which the small CP-SAT neighbourhoods of the LNS cannot."""
    p = run.problem
    target = run.bound if run.bound is not None else placeable_weight(p)
    if not p.gangs or evaluate.placed_weight(p, run.incumbent) >= target:
        return
    budget = run.budget.split(REPAIR_SHARE)
    rounds = max(1, int(REPAIR_ROUNDS_PER_SECOND * budget.total)) if budget.counted else 1 << 30
    found = repair(p, run.incumbent, target, np.random.default_rng(run.settings.seed), rounds,
                   lambda: not budget.counted and budget.expired())
    run.budget.charge(found.rounds / REPAIR_ROUNDS_PER_SECOND)
    run.offer(found.assignment, "repair")
    run.steps.append(f"repair rounds: {found.rounds}")


def _solve_whole(run: Run, backend: Backend) -> None:
    hood = Neighbourhood.whole(run.problem)
    first_proved = run.placed_all()
    if not first_proved and run.left() > MIN_LEFT_SECONDS:
        first_proved = _place_by_stage(run, backend, hood, WHOLE_PLACE_SHARE)
    if run.settings.stop_when_placed and first_proved:
        run.steps.append("stopped: the placement is proved optimal")
    elif run.left() > MIN_LEFT_SECONDS:
        second = stage_two(run, backend, hood, 1.0)
        run.proved = first_proved and (second is None or second.status == Status.OPTIMAL)
    if first_proved and run.bound is not None:
        run.bound = min(run.bound, evaluate.placed_weight(run.problem, run.incumbent))


def _place_by_stage(run: Run, backend: Backend, hood: Neighbourhood, share: float) -> bool:
    """Stage one in each weight stage, the highest first, each keeping what the incumbent places
    in the stages above: lexicographic at any number of priorities (one solve with a single
    stage). A stage whose every placeable pod is placed, or with no room left for any of its
    pods (``stage_room_gone``), is skipped; the ``share`` of the time left is split evenly
    between the stages still open. True when every stage is proved."""
    p = run.problem
    if p.n_stages == 1:
        return stage_one(run, backend, hood, share).status == Status.OPTIMAL
    eligible_somewhere = np.where(p.eligible.any(axis=1), placeable_counts(p), 0)
    targets = p.stage_weights(np.arange(p.n_classes, dtype=np.int64), eligible_somewhere)
    end = run.left() * (1 - share)
    proved = True
    for stage in range(p.n_stages):
        reached = evaluate.stage_weights(p, run.incumbent)
        open_stages = sum(1 for s in range(stage, p.n_stages) if reached[s] < targets[s])
        if reached[stage] >= targets[stage] or stage_room_gone(p, reached[:stage]):
            continue
        if run.left() <= MIN_LEFT_SECONDS:
            return False
        seconds = max(SLICE_MIN_SECONDS, (run.left() - end) / open_stages)
        result = stage_one(run, backend, hood, min(1.0, seconds / run.left()), stage)
        proved = proved and result.status == Status.OPTIMAL
    return proved
