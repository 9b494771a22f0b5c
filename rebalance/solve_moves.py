"""Solving the move-aware model and turning its answer into pod moves.

The objective is the profile's (its score plugins' terms, ``Layout.terms``), measured exactly by
``models.terms`` as ``plan`` measures it. A greedy answer for each kind of term the objective
has (balance, nodes used, GPU fragmentation) is the first incumbent, the best of them by the
exact objective. Then, when the objective has a linear form, stage 1 minimises it (with
``move_cost`` per move when given) and stage 2 keeps stage 1's goal and minimises the number of
moves. The current placement (no move) is the fallback: an answer replaces it only when the
exact objective is better, so a rebalance never makes the cluster worse by its own measure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubeplace.models import evaluate
from kubeplace.models.config import SolverSettings
from kubeplace.models.linear_terms import SCALE
from kubeplace.models.problem import FULL, IntArray
from kubeplace.rebalance.greedy_moves import MOVES, everywhere
from kubeplace.rebalance.layout import Layout
from kubeplace.rebalance.model import Budgets, MoveModel, build_moves, objective_goal
from kubeplace.solver.backends import get_backend
from kubeplace.solver.backends.base import BackendResult
from kubeplace.solver.budget import Budget
from kubeplace.solver.run import Event, OnEvent
from kubeplace.solver.shares import MOVES_FIRST_SHARE, MOVES_MIN_SECONDS, MOVES_WEIGHTED_SHARE

REPLACEMENT_NOTE = ("an evicted pod is recreated by its controller and placed by its scheduler: kubeplace "
                    "decides the target, the default scheduler may choose another node")


@dataclass(frozen=True)
class Settings:
    budgets: Budgets = field(default_factory=Budgets)
    move_cost: float | None = None
    """None: lexicographic (best goal, then fewest moves); else a move costs this much objective."""
    solver: SolverSettings = field(default_factory=SolverSettings)
    max_targets: int = 24


@dataclass(frozen=True)
class Move:
    namespace: str
    name: str
    uid: str
    source: str
    target: str
    why: str
    owner: str = ""
    scheduler_name: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "from": self.source, "to": self.target,
                "why": self.why}


@dataclass(frozen=True)
class RebalancePlan:
    profile: str
    moves: tuple[Move, ...]
    excluded: tuple[tuple[str, str], ...]
    objective_before: float
    objective_after: float
    status: str
    seconds: float
    notes: tuple[str, ...] = ()

    def summary(self) -> dict[str, Any]:
        return {"profile": self.profile, "objective_before": round(self.objective_before, 6),
                "objective_after": round(self.objective_after, 6), "pods_moved": len(self.moves),
                "pods_excluded": len(self.excluded), "status": self.status, "seconds": round(self.seconds, 3)}

    def to_dict(self) -> dict[str, Any]:
        return {"moves": [m.to_dict() for m in self.moves], "summary": self.summary(),
                "excluded": [{"pod": k, "reason": r} for k, r in self.excluded], "notes": list(self.notes)}


def run(model: MoveModel, goal: list[tuple[int, int]], settings: Settings, budget: Budget,
        rows: Sequence[tuple[list[tuple[int, int]], int]] = (), hint: IntArray | None = None) -> BackendResult:
    """One backend call on the move model within ``budget`` (at least MOVES_MIN_SECONDS, counted
    from the call: building the model is not charged to it)."""
    call = budget.at_least(MOVES_MIN_SECONDS)
    lm = model.build(goal, list(rows), hint)
    return get_backend(settings.solver.backend).solve(lm, settings.solver, call.from_now())


def first_answer(layout: Layout, budgets: Budgets) -> IntArray:
    """The best greedy answer (``greedy_moves.MOVES``: one per kind of term the objective has) by the
    exact objective (fewer moves on a tie); the current placement when none improves on it. The
    greedy moves keep each node's room but not the group caps: an answer breaking one (two pods
    with one host port on a node) is no candidate, so it is never kept over the exact answer."""
    view = everywhere(layout)
    best, best_value = layout.x0, layout.value(layout.x0)
    for kind, greedy in MOVES.items():
        if any(isinstance(t, kind) for t in layout.terms):
            y = greedy(view, budgets)
            if not layout.within_caps(y):
                continue
            value = layout.value(y)
            if value < best_value - 1e-12 or (value <= best_value + 1e-12 and _moved(layout, y) < _moved(layout, best)):
                best, best_value = y, value
    return best


def _moved(layout: Layout, y: IntArray) -> int:
    return int(np.maximum(layout.x0 - y, 0).sum())


def _emitter(layout: Layout, started: float, on_event: OnEvent | None) -> Callable[[str, IntArray], None]:
    """Reports placement ``y`` after a step as an Event: its exact objective and pods moved."""
    placed = len(layout.pods)

    def emit(step: str, y: IntArray) -> None:
        if on_event is not None:
            on_event(Event(step, placed, 0, layout.value(y), None, time.monotonic() - started, _moved(layout, y)))

    return emit


def rebalance(layout: Layout, settings: Settings, on_event: OnEvent | None = None) -> RebalancePlan:
    """The moves; ``on_event`` hears of the current placement, the greedy answer and each exact
    stage's answer (Event with ``moves``)."""
    started = time.monotonic()
    emit = _emitter(layout, started, on_event)
    name = layout.objective.value
    excluded = tuple((p.key, why) for p, why in layout.excluded)
    before = layout.value(layout.x0)
    emit("current", layout.x0)
    if layout.n_classes == 0:
        return RebalancePlan(name, (), excluded, before, before, "nothing movable", 0.0, (REPLACEMENT_NOTE,))
    first_y = first_answer(layout, settings.budgets)
    emit("greedy", first_y)
    model = build_moves(layout, settings.budgets, settings.max_targets, also=first_y)
    mu = evaluate.mean_utilisation(layout.problem, layout.assignment(layout.x0))
    goal = objective_goal(model, mu)
    budget = Budget(started, settings.solver.time_limit)
    best, status = _exact(model, goal, first_y, settings, budget, emit) if goal else (first_y, "greedy")
    after = layout.value(best)
    if after >= before - 1e-12:
        best, after, status = layout.x0, before, f"{status} (no improvement)"
    emit("final", best)
    plan_moves = to_moves(layout, best)
    return RebalancePlan(name, tuple(plan_moves), excluded, before, after, status, time.monotonic() - started,
                         (REPLACEMENT_NOTE,))


def _exact(model: MoveModel, goal: list[tuple[int, int]], first_y: IntArray, settings: Settings,
           budget: Budget, emit: Callable[[str, IntArray], None]) -> tuple[IntArray, str]:
    """Stage 1 (the goal, with move_cost per move) and, when lexicographic, stage 2 (fewest
    moves for stage 1's goal), from the greedy answer; the better of it and theirs."""
    layout = model.layout
    moves = [(int(v), 1) for v in model.m]
    hint = complete_hint(model, goal, first_y)
    weighted = settings.move_cost is not None
    cost = round((settings.move_cost or 0) * SCALE)
    first = goal + [(v, cost) for v, _ in moves] if weighted else goal
    share = MOVES_WEIGHTED_SHARE if weighted else MOVES_FIRST_SHARE
    result = run(model, first, settings, budget.part(share), hint=hint)
    status = result.status.value
    best = hint if result.values is None else result.values
    if result.values is not None:
        emit("objective", model.dense(result.values))
    if not weighted and result.values is not None:
        bound = int(sum(c * int(result.values[v]) for v, c in goal))
        second = run(model, moves, settings, budget, rows=[(goal, bound)], hint=result.values)
        if second.values is not None:
            best = second.values
            status = f"{status}+{second.status.value}"
            emit("fewest moves", model.dense(second.values))
    y = model.dense(best)
    if layout.value(first_y) < layout.value(y) - 1e-12:
        return first_y, f"{status} (greedy kept)"
    return y, status


def complete_hint(model: MoveModel, goal: list[tuple[int, int]], y: IntArray | None = None) -> IntArray:
    """The current placement (y = x0, nothing moved), with every auxiliary variable (loads,
    tangent-cut values, node-in-use flags) at the least value its rows allow, in row order:
    a row sets its highest-numbered auxiliary once the others in it are known."""
    lm = model.build(goal)
    values = model.hint(y)
    n_core = 1 + max(int(model.y.max(initial=-1)), int(model.m.max(initial=-1)), int(model.t.max(initial=-1)))
    known: set[int] = set()
    for r in range(lm.n_rows):
        cols, coefs = lm.row(r)
        aux = [int(j) for j in cols if j >= n_core]
        if not aux:
            continue
        j = max(aux)
        if any(k not in known for k in aux if k != j):
            continue
        c = int(coefs[list(cols).index(j)])
        act = int(sum(int(cc) * int(values[jj]) for jj, cc in zip(cols, coefs, strict=True) if jj != j))
        lo, hi = int(lm.row_lb[r]), int(lm.row_ub[r])
        if lo == hi:
            need = (lo - act) // c
        elif c > 0 and lo > -(1 << 52):
            need = -(-(lo - act) // c)
        elif c < 0 and hi < (1 << 52):
            need = -(-(act - hi) // -c)
        else:
            continue
        values[j] = max(int(values[j]), need) if j in known else need
        known.add(j)
    return np.minimum(np.maximum(values, lm.var_lb), lm.var_ub)


def to_moves(layout: Layout, y: IntArray) -> list[Move]:
    p = layout.problem
    load_before, load_after = layout.load(layout.x0), layout.load(y)
    by_place: dict[tuple[int, str], list[Any]] = {}
    for k, pod in enumerate(layout.pods):
        by_place.setdefault((int(layout.pod_class[k]), pod.node_name), []).append(pod)
    for pods_here in by_place.values():  # the lowest priority, then the youngest, moves first
        pods_here.sort(key=lambda pod: (pod.priority, _negated(pod.creation), pod.key))
    out: list[Move] = []
    for c in range(layout.n_classes):
        delta = y[c] - layout.x0[c]
        sources = [i for i in np.nonzero(delta < 0)[0] for _ in range(int(-delta[i]))]
        targets = [i for i in np.nonzero(delta > 0)[0] for _ in range(int(delta[i]))]
        for i, j in zip(sources, targets, strict=True):
            pod = by_place[(c, p.node_names[i])].pop(0)
            why = _why(layout, int(i), int(j), load_before, load_after, int(layout.agg_class[c]))
            out.append(Move(pod.namespace, pod.name, pod.uid, p.node_names[i], p.node_names[j], why,
                            pod.owner_kind, pod.scheduler_name))
    return sorted(out, key=lambda m: (m.source, m.namespace, m.name))


def _why(layout: Layout, i: int, j: int, before: IntArray, after: IntArray, agg_class: int) -> str:
    p = layout.problem
    names = p.node_names
    pods = p.resource_index("pods")
    balanced = [r for r, _, _ in layout.balance_terms()]
    if not balanced:
        if pods is not None and after[i, pods] == 0:
            return f"empties {names[i]}"
        return f"packs onto {names[j]}"
    share = np.where(p.capacity[j] > 0, p.demand[agg_class] / np.maximum(p.capacity[j], 1), 0)
    r = max(balanced, key=lambda k: share[k])
    name = p.resources[r].split("/")[-1]
    beyond = layout.agg.beyond_full  # what the saturated sums of requests leave out
    measured = any(k == r and m for k, _, m in layout.balance_terms())
    if measured:
        before, after, name = before - p.used + p.base(True), after - p.used + p.base(True), f"{name} load"

    base = p.base(measured)  # the loads are this plus the movable pods' requests

    def pct(load: IntArray, n: int) -> str:
        """The true figure; '>' the saturated one where a sum of the model saturated at FULL
        and the true one is not known (the movable pods' requests, a measured load)."""
        saturated = load[n, r] - base[n, r] >= FULL or (measured and base[n, r] >= FULL)
        over = ">" if saturated else ""
        amount = float(load[n, r]) + (float(beyond[n, r]) if beyond is not None and not measured else 0.0)
        return f"{over}{100 * amount / max(p.capacity[n, r], 1):.0f}%"

    return (f"balance {name}: {names[i]} {pct(before, i)}->{pct(after, i)}, "
            f"{names[j]} {pct(before, j)}->{pct(after, j)}")


def _negated(text: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in text)
