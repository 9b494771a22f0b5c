"""Scale benchmark: synthetic clusters from a seed, planned end to end and side by side
with the one-pod-at-a-time kube-scheduler emulation (``solver.emulate``) on the same input.

Timed from a loaded snapshot to a verified plan (aggregation, greedy, exact backend,
plan, independent verification), with the peak resident memory of the process. The
emulation runs with the profile's filters (kubeplace's own ones, such as Tenant, included), and
its placements are re-checked by the independent verifier too.
"""

from __future__ import annotations

import resource
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from kubeplace.kube.objects import Snapshot
from kubeplace.kube.parse import build_snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.terms import objective_value
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.verify import verify
from kubeplace.solver.emulate.scheduler import emulate
from kubeplace.solver.greedy import BEST_FIT, SPREAD, greedy
from kubeplace.solver.run import OnEvent
from kubeplace_bench.phases import timed_phases
from kubeplace_bench.synthetic import SyntheticSpec, manifests


@dataclass(frozen=True)
class ScaleResult:
    nodes: int
    pods: int
    backend: str
    seconds_snapshot: float
    seconds_plan: float
    seconds_verify: float
    pods_placed: int
    bound: int | None
    status: str
    objective: float
    greedy_objective: float
    classes: int
    default_scheduler_placed: int
    default_scheduler_seconds: float
    default_scheduler_violations: int
    peak_mib: int
    rules: str = "none"
    cpu_seconds_plan: float = 0.0
    """CPU seconds of the process (every thread, the solver's included) while planning: on a
    shared machine the wall seconds also count the time others took the cores."""
    cpu_seconds_verify: float = 0.0
    plan_peak_mib: int = 0
    """The peak resident memory up to the verified plan (the snapshot, the plan and its
    verification; ``peak_mib`` also counts the default-scheduler emulation after it)."""
    phase_seconds: dict[str, float] = field(default_factory=dict)
    """Wall seconds per phase of the plan and its verification (``kubeplace_bench.phases``), when asked."""
    phase_cpu_seconds: dict[str, float] = field(default_factory=dict)
    """CPU seconds per phase, likewise."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def peak_mib() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)


def synthetic_snapshot(spec: SyntheticSpec) -> Snapshot:
    return build_snapshot([(m, "synthetic") for m in manifests(spec)], scheduler_name="kubeplace")


def run_scale(spec: SyntheticSpec, backend: str, time_limit: float, on_event: OnEvent | None = None,
              phases: bool = False, default_scheduler: bool = True) -> ScaleResult:
    """``phases``: also time the plan's phases (``kubeplace_bench.phases``); ``default_scheduler``:
    False leaves out the one-pod-at-a-time emulation beside it (its figures are then 0)."""
    started = time.perf_counter()
    snapshot = synthetic_snapshot(spec)
    loaded, loaded_cpu = time.perf_counter(), time.process_time()
    config, profile = Configuration(), Profile()
    phase_seconds: dict[str, float] = {}
    phase_cpu: dict[str, float] = {}
    with timed_phases(phase_seconds, phase_cpu) if phases else nullcontext():
        planned = make_plan(snapshot, config, profile, SolverSettings(backend=backend, time_limit=time_limit),
                            on_event)
        planned_at, planned_cpu = time.perf_counter(), time.process_time()
        # the plugins the plan was made with: the verifier's own checks, not their instantiation, are timed
        violations = verify_plan(snapshot, planned.plan.placements, config, profile, planned.plugins)
    if violations:
        raise AssertionError(f"kubeplace produced an invalid plan: {violations[0]}")
    verified, verified_cpu = time.perf_counter(), time.process_time()
    plan_peak = peak_mib()
    emu_start = time.perf_counter()
    # with the profile's filters (Tenant, ...)
    emulated = emulate(snapshot, filters=planned.plugins.filters) if default_scheduler else None
    emu_seconds = time.perf_counter() - emu_start
    emulation_placed = [] if emulated is None else list(emulated.placements)
    emulation_violations = verify(snapshot, emulation_placed) if emulated is not None else []
    s = planned.plan.summary
    problem, terms = planned.aggregation.problem, planned.terms
    first = min(objective_value(problem, greedy(problem, policy), terms) for policy in (BEST_FIT, SPREAD))
    return ScaleResult(len(snapshot.nodes), len(snapshot.pending), backend, round(loaded - started, 2),
                       round(planned_at - loaded, 2), round(verified - planned_at, 2), s.pods_placed, s.bound,
                       s.status, round(s.objective, 3), round(first, 3), problem.n_classes, len(emulation_placed),
                       round(emu_seconds, 2), len(emulation_violations), peak_mib(), spec.rules,
                       round(planned_cpu - loaded_cpu, 2), round(verified_cpu - planned_cpu, 2), plan_peak,
                       {name: round(seconds, 2) for name, seconds in phase_seconds.items()},
                       {name: round(seconds, 2) for name, seconds in phase_cpu.items()})
