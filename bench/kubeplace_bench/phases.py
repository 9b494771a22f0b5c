"""Where a plan's time goes: wall seconds per phase of ``make_plan`` and of the verification
(``bench synthetic --phases``).

The phases are the pipeline's own steps, timed by wrapping the functions the pipeline calls
for the time of one run (the scheduler's code carries no timers): a nested call of a phase
already being timed counts once, in the outer one. ``solve`` includes ``greedy`` and
``lp_bound``; ``to_plan`` includes ``explain``; ``plan_verify`` is the check ``make_plan``
makes of its own plan, ``verify`` the bench's one after it.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

PHASES: tuple[tuple[str, str, str], ...] = (  # name, module, attribute
    ("instantiate", "kubeplace.plan.pipeline", "instantiate"),
    ("aggregate", "kubeplace.plan.pipeline", "aggregate"),
    ("emulation", "kubeplace.plan.pipeline", "_emulation"),
    ("solve", "kubeplace.plan.pipeline", "solve"),
    ("greedy", "kubeplace.solver.solve", "_best_greedy"),
    ("lp_bound", "kubeplace.solver.solve", "placed_weight_bound"),
    ("to_plan", "kubeplace.plan.pipeline", "_to_plan"),
    ("explain", "kubeplace.plan.pipeline", "explain"),
    ("replay_order", "kubeplace.plan.pipeline", "replay_order"),
    ("plan_verify", "kubeplace.plan.pipeline", "verify_plan"),
    ("verify", "kubeplace_bench.scale", "verify_plan"),
)
"""The phases timed, each a function looked up in a module's globals when it is called."""


@contextmanager
def timed_phases(seconds: dict[str, float], cpu: dict[str, float] | None = None) -> Iterator[None]:
    """While open, adds each phase's wall seconds into ``seconds`` and its CPU seconds (the
    process's, every thread's: the solver's workers too) into ``cpu`` (by phase name): on a
    shared machine the wall seconds also count the time others took the cores."""
    cpu = {} if cpu is None else cpu
    saved: list[tuple[Any, str, Any]] = []
    active: set[str] = set()
    for name, module_name, attribute in PHASES:
        module = importlib.import_module(module_name)
        original = getattr(module, attribute)
        saved.append((module, attribute, original))
        setattr(module, attribute, _timed(name, original, seconds, cpu, active))
    try:
        yield
    finally:
        for module, attribute, original in reversed(saved):
            setattr(module, attribute, original)


def _timed(name: str, function: Callable[..., Any], seconds: dict[str, float], cpu: dict[str, float],
           active: set[str]) -> Callable[..., Any]:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if name in active:
            return function(*args, **kwargs)
        active.add(name)
        started, started_cpu = time.perf_counter(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started
            cpu[name] = cpu.get(name, 0.0) + time.process_time() - started_cpu
            active.discard(name)
    return timed
