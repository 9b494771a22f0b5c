"""The schedulers a simulation compares, driven in simulated time.

- ``kubeplace``: the ``serve`` scheduler itself (:class:`serve.loop.Scheduler`: its queue with
  batch windows and backoff, gangs, preemption, the configuration's profile, the verifier its
  cycle runs), on the simulation's store and clock; the simulation only calls the queue when a
  batch is due (:meth:`serve.queue.SchedulingQueue.next_due`) and the cycle with it.
- ``kube-scheduler``: the kube-scheduler emulation (``solver.emulate``: default profile, one pod
  at a time in queue order, no preemption, gang members one by one);
- ``best-fit``, ``fgd``: the FGD authors' policies exactly as their simulator runs them, one pod
  at a time in queue order (``simulate.policies``: their score, typical pods, device choice and
  tie order; ``simulate.policies.cycle`` runs them in a cycle).

The baselines try a pending pod when it arrives, and a pod they could not place again only on
an event that may make it fit (``serve.hints``: a pod left or was scaled down, a node came or
changed, a pod was placed for one with pod affinity or a hard spread constraint, a member of its
gang arrived), at once: the kube-scheduler's queue with its QueueingHints and no backoff (an
arrival never makes another pending pod fit, so a saturated cluster is not planned again at
every arrival). Their placements are plans like kubeplace's (``plan.pipeline.plan_placed_by``),
so every one of them is checked by the independent verifier; a refused placement is not bound,
counted, and tried again on the next event that may help it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from prometheus_client import CollectorRegistry

from kubeplace.kube.gangs import without_gang
from kubeplace.kube.objects import Pod, Snapshot
from kubeplace.models.aggregate import Aggregation
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.framework import PluginSet
from kubeplace.models.gpu import device_notes
from kubeplace.models.problem import Assignment
from kubeplace.plan.pipeline import plan_placed_by
from kubeplace.serve.decisions import DecisionLog
from kubeplace.serve.events import EventRecorder
from kubeplace.serve.hints import unit_hints
from kubeplace.serve.intake import Intake, unit_of
from kubeplace.serve.loop import Scheduler
from kubeplace.serve.outcomes import SchedulerOutcomes
from kubeplace.serve.queue import SchedulingQueue, Unit
from kubeplace.serve.settings import ServeSettings
from kubeplace.serve.snapshots import Snapshots
from kubeplace.simulate.names import KUBE_SCHEDULER, KUBEPLACE, SCHEDULERS
from kubeplace.simulate.policies import POLICIES
from kubeplace.simulate.policies.cycle import cycle_placer, marks_of, trace_typical
from kubeplace.simulate.policies.typical import TaskDistribution
from kubeplace.simulate.trace import RawObject
from kubeplace.simulate.world import SimClient, World
from kubeplace.solver.emulate.scheduler import as_candidate, emulate

MAX_CYCLES_AT_ONCE = 10_000
MAX_BATCH = 1_000_000
"""A baseline tries every pod due at once, in queue order."""
"""Cycles run at one simulated instant before the simulation gives up on it (a loop guard)."""
CYCLE_SECONDS = 0.01
"""How much later than its batch's instant a ``serve`` cycle's outcomes count (a unit's backoff
starts then). Live a cycle's snapshot and plan take a few to tens of milliseconds (6-27 ms, the
10th to 90th percentile, on the fidelity trace), so a unit backing off for whole seconds comes
back just after a batch that closes that many seconds after its own, not into it."""


class SimScheduler(Protocol):
    name: str
    cycles: int

    @property
    def refused(self) -> int:
        """Placements the independent verifier refused (never bound)."""

    def on_change(self, resource: str, event: str, old: RawObject | None, new: RawObject | None) -> None: ...

    def due(self) -> float | None:
        """When it next wants to run (simulated seconds), None when it waits for a change."""

    def run_due(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Setup:
    """What a scheduler under test is given."""

    config: Configuration
    profile: Profile
    solver: SolverSettings
    serve: ServeSettings
    typical: TaskDistribution | None = None
    """FGD's typical pods (``simulate.policies.typical``); None: those of the trace replayed."""


class CycleClock:
    """The clock ``serve``'s Scheduler reads in the simulation: the simulated time, and
    ``CYCLE_SECONDS`` later while a cycle runs."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.in_cycle = False

    def __call__(self) -> float:
        return self.world.clock.now + (CYCLE_SECONDS if self.in_cycle else 0.0)


class KubeplaceCycle:
    """``kubeplace serve``'s Scheduler on the simulation's store, client and clock."""

    def __init__(self, world: World, setup: Setup, name: str = KUBEPLACE) -> None:
        self.name = name
        self.client = SimClient(world)
        self.settings = setup.serve
        self.clock = CycleClock(world)
        self.scheduler = Scheduler(self.client, world.store, setup.config, setup.profile, setup.solver, setup.serve,
                                   recorder=EventRecorder(self.client, clock=world.clock), clock=self.clock)
        self.cycles = 0
        world.listeners.append(self.on_change)

    @property
    def refused(self) -> int:
        return int(self.scheduler.metrics.value("kubeplace_binds_failed_total", {"outcome": "refused"}))

    def on_change(self, resource: str, event: str, old: RawObject | None, new: RawObject | None) -> None:
        self.scheduler.on_change(resource, event, old, new)

    def due(self) -> float | None:
        s = self.settings
        return self.scheduler.queue.next_due(s.batch_window, s.batch_size, s.batch_quiet, s.batch_window_per_unit,
                                             s.batch_window_min)

    def run_due(self) -> None:
        s = self.settings
        for _ in range(MAX_CYCLES_AT_ONCE):
            units = self.scheduler.queue.pop_batch(s.batch_window, s.batch_size, timeout=0, quiet=s.batch_quiet,
                                                   per_unit=s.batch_window_per_unit,
                                                   least=s.batch_window_min)  # (as serve batches live)
            if not units:
                return
            self.cycles += 1
            self.clock.in_cycle = True
            try:
                self.scheduler.cycle(units)
            finally:
                self.clock.in_cycle = False

    def close(self) -> None:
        self.scheduler.close()


class KubeSchedulerPlacer:
    """The kube-scheduler emulation, its node search going on from where the previous cycle's
    stopped, as the kube-scheduler's does from pod to pod (``nextStartNodeIndex``)."""

    def __init__(self) -> None:
        self.start = 0

    def __call__(self, snapshot: Snapshot, agg: Aggregation, plugins: PluginSet) -> Assignment:
        p = agg.problem
        pods = [snapshot.pending[m] for members in p.members for m in members]
        class_of = {snapshot.pending[m].key: c for c, members in enumerate(p.members) for m in members}
        node_of = {name: i for i, name in enumerate(p.node_names)}
        emulated = emulate(snapshot, pods, plugins.filters, start=self.start)
        self.start = emulated.next_start
        return as_candidate(p, [(class_of[f"{ns}/{name}"], node_of[node]) for ns, name, node in emulated.placements])


Placer = Callable[[Snapshot, Aggregation, PluginSet], Assignment]


def simulated(policy: str) -> Callable[[World, Setup], Placer]:
    """The policy ``simulate.policies.POLICIES`` names, against the typical pods of the setup or
    the trace."""

    def make(world: World, setup: Setup) -> Placer:
        marks = marks_of(setup.profile)
        typical = setup.typical if setup.typical is not None else trace_typical(world.arriving, setup.config.gpu, marks)
        return cycle_placer(POLICIES[policy], typical, marks)
    return make


PLACERS: dict[str, Callable[[World, Setup], Placer]] = {KUBE_SCHEDULER: lambda _w, _s: KubeSchedulerPlacer(),
                                                        **{policy: simulated(policy) for policy in POLICIES}}
"""Each baseline's placer, made once per simulation (the kube-scheduler's keeps where its
search stopped): the kube-scheduler emulation and the policies of ``simulate.policies``."""
assert set(PLACERS) | {KUBEPLACE} == set(SCHEDULERS)


class Baseline:
    """A one-pod-at-a-time policy; a pod it could not place is tried again on an event that may
    help it (``serve.queue.SchedulingQueue`` with no backoff and no flush: perfect hints)."""

    def __init__(self, world: World, setup: Setup, name: str) -> None:
        self.name = name
        self.world = world
        self.setup = setup
        self.place = PLACERS[name](world, setup)
        self.client = SimClient(world)
        self.snapshots = Snapshots(world.store, self.client, world.scheduler_name, None, clock=world.clock)
        self.queue = SchedulingQueue(initial=0.0, maximum=0.0, max_in_unschedulable=math.inf, clock=world.clock)
        self.intake = Intake(self.queue, world.store, world.scheduler_name, None, self.snapshots.assumed,
                             DecisionLog(), SchedulerOutcomes(world.scheduler_name, CollectorRegistry(),
                                                              DecisionLog(), world.clock), world.clock)
        self.refused = 0
        self.cycles = 0
        world.listeners.append(self.on_change)

    def on_change(self, resource: str, event: str, old: RawObject | None, new: RawObject | None) -> None:
        self.intake.on_change(resource, event, old, new)

    def due(self) -> float | None:
        return self.queue.next_due(window=0.0, size=MAX_BATCH)

    def run_due(self) -> None:
        for _ in range(MAX_CYCLES_AT_ONCE):
            units = self.queue.pop_batch(window=0.0, size=MAX_BATCH, timeout=0)
            if not units:
                return
            self._run(units)

    def _run(self, units: list[Unit]) -> None:
        """Places the pending pods of ``units`` in queue order; the units left out wait."""
        wanted = set(units)
        snapshot, _ = self.snapshots.take(keep=lambda p: unit_of(p) in wanted)
        snapshot = replace(snapshot, pending=tuple(p for p in snapshot.pending if unit_of(p) in wanted))
        unit_of_pod = {pod.key: unit_of(pod) for pod in snapshot.pending}  # (before gangs are dropped)
        if not snapshot.pending:
            for unit in units:
                self.queue.done(unit)
            return
        if self.name == KUBE_SCHEDULER:
            snapshot = without_gangs(snapshot)
        self.cycles += 1
        planned = plan_placed_by(snapshot, self.setup.config, self.setup.profile, self.place, self.name)
        refused = {(v.namespace, v.name) for v in planned.violations}
        self.refused += len(refused)
        pods = {pod.key: pod for pod in snapshot.pending}
        placed = set()
        for p in planned.plan.placements:
            if (p.namespace, p.name) not in refused:
                key = f"{p.namespace}/{p.name}"
                placed.add(key)
                self.world.bind(key, p.node, device_notes(p.gpus, pods[key].requests, self.setup.config.gpu))
        left: dict[Unit, list[Pod]] = {}
        for pod in snapshot.pending:
            if pod.key not in placed:
                left.setdefault(unit_of_pod[pod.key], []).append(pod)
        for unit in units:
            if unit in left:
                self.queue.unschedulable(unit, "not placed", unit_hints(left[unit]))
            else:
                self.queue.done(unit)

    def close(self) -> None:
        return None


def without_gangs(snapshot: Snapshot) -> Snapshot:
    """The snapshot as the kube-scheduler's default profile sees it: no pod belongs to a gang
    (it knows no gang marks and binds every member on its own)."""
    return replace(snapshot, pending=tuple(without_gang(p) for p in snapshot.pending),
                   bound=tuple(without_gang(p) for p in snapshot.bound), pod_groups=())


def make_scheduler(name: str, world: World, setup: Setup) -> SimScheduler:
    if name == KUBEPLACE:
        return KubeplaceCycle(world, setup)
    return Baseline(world, setup, name)
