"""The scheduling loop of ``kubeplace serve``.

Informer events fill the queue (:mod:`serve.queue`) with *units*: a pod, or a whole gang. Each
cycle takes a batch of units and

1. builds a snapshot from the informer's typed store (:mod:`serve.snapshots`), the pods this
   scheduler decided to bind that the watch has not shown bound yet counted as bound
   (*assumed*), so everything already bound or being bound is held fixed as usage; only the
   batch's pods are pending;
2. plans it (:func:`plan.pipeline.make_plan`: the solve stops once nothing more can be placed,
   within a budget that grows with the batch; the plan is checked by the independent verifier);
   a unit with a violation is not bound. With preemption (the default) the plan is
   :func:`plan.preempt.make_preemption_plan`'s: its victims are removed and their preemptors
   nominated (``serve.preempt``), those wait in the queue until their victims are gone;
3. binds, up to ``bind_workers`` bindings at once in unit order (``kube.binder.bind_concurrently``),
   asking the lease before *every* binding: a replica that is no longer the leader, or asked to
   stop, stops there and leaves the rest to the next cycle or the next leader. A 409 (someone
   else bound it, it is being deleted) is an outcome, counted and logged, never retried for that
   pod. Under :meth:`Scheduler.run` the bindings go on in threads of their own while the next
   batches are planned: binding is never on the planning path (the next cycles count the pods
   being bound as bound, *assumed*, as the kube-scheduler's cache assumes them); only beyond
   ``BINDING_CYCLES`` cycles' bindings in flight does planning wait for the oldest.

A gang member that fails to bind is reported; a gang left below minMember gets an Event and is
re-planned next cycle (its bound members then count as running). A gang whose members do not
all exist yet waits; past its timeout (the PodGroup's ``scheduleTimeoutSeconds``, or the pod
annotation ``kubeplace.io/gang-timeout-seconds`` for CRD-free gangs, default 60 s) it is reported
timed out: an Event per member, a metric, the PodGroup status.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Protocol

from kubeplace.kube.binder import Binding, BindResult, Outcome, PodBinder, bind_concurrently
from kubeplace.kube.gangs import gang_timeout
from kubeplace.kube.memo import memo_entries
from kubeplace.kube.objects import (
    CPU,
    MEMORY,
    PODS,
    GangKey,
    Node,
    Pod,
    PodGroup,
    Snapshot,
)
from kubeplace.kube.raw_objects import object_label
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.framework import PluginError
from kubeplace.models.gpu import device_notes
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import GangStatus, Placement, Plan, Unplaced
from kubeplace.plan.preemption_plan import make_preemption_plan
from kubeplace.plan.verify import Violation
from kubeplace.serve import events as ev
from kubeplace.serve import hints
from kubeplace.serve.cycle_report import CycleReport, Decided
from kubeplace.serve.decisions import DecisionLog
from kubeplace.serve.events import EventClient, EventRecorder
from kubeplace.serve.hints import ClusterEvent, unit_hints, unplaced_hints
from kubeplace.serve.informer import (
    RawObject,
    Store,
    object_key,
)
from kubeplace.serve.intake import Intake, unit_of
from kubeplace.serve.leader import AlwaysLeader
from kubeplace.serve.memory import Collector, Trimmer
from kubeplace.serve.outcomes import SchedulerOutcomes
from kubeplace.serve.prebind import PreBindClient, devices_refused, volumes_waiting
from kubeplace.serve.prometheus import ERROR, SCHEDULED, UNSCHEDULABLE, Metrics
from kubeplace.serve.queue import SchedulingQueue, Unit
from kubeplace.serve.settings import DEFAULT_SETTINGS, ServeSettings, cycle_options
from kubeplace.serve.snapshots import Snapshots, UsageSource
from kubeplace.serve.victims import PreemptClient, Preemptions

log = logging.getLogger("kubeplace.serve")
RESULTS_KEPT = 1_000
ANSWERED = (Outcome.BOUND, Outcome.CONFLICT, Outcome.NOT_FOUND)
"""Binding outcomes that say the API server answered for that pod (no reason to start slowly)."""
BINDING_CYCLES = 8
"""Cycles whose bindings may be in flight at once (the API server's QPS limits them, not the
planning); beyond it the next plan waits for the oldest cycle's bindings: a bound on what is held
when the API server is far slower than planning, never reached while it keeps up."""
GANGS_KEPT = 10_000
"""Waiting gangs remembered (since when they wait); beyond it the oldest are forgotten (a gang
deleted while waiting leaves no other trace to clean up by)."""


class ServeClient(PodBinder, PreBindClient, EventClient, PreemptClient, Protocol):
    """What the loop writes through :class:`kube.client.Cluster` (tests pass a fake)."""

    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None: ...


class LeaderCheck(Protocol):
    def is_leader(self) -> bool: ...


def _finished(bindings: list[Future[CycleReport]]) -> None:
    """Waits for these cycles' bindings (their errors are logged where they happen)."""
    for binding in bindings:
        binding.result()


class Scheduler:
    def __init__(self, client: ServeClient, store: Store, config: Configuration, profile: Profile,
                 solver: SolverSettings, settings: ServeSettings = DEFAULT_SETTINGS, *,
                 leader: LeaderCheck | None = None, recorder: EventRecorder | None = None,
                 metrics: Metrics | None = None, clock: Callable[[], float] = time.monotonic,
                 usage_source: UsageSource | None = None) -> None:
        self.client = client
        self.store = store
        self.config, self.profile, self.solver, self.settings = config, profile, solver, settings
        self.leader: LeaderCheck = leader or AlwaysLeader()
        self.recorder = recorder or EventRecorder(client)
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.queue = SchedulingQueue(initial=settings.initial_backoff, maximum=settings.max_backoff,
                                     max_in_unschedulable=settings.max_in_unschedulable, clock=clock)
        self.stop_event = threading.Event()
        self.results: list[BindResult] = []
        """The bindings this scheduler attempted, in the order answered (the last RESULTS_KEPT to
        RESULTS_KEPT x 2 of them: a long-running scheduler must not keep them all)."""
        self.snapshots = Snapshots(store, client, settings.scheduler_name, settings.namespaces,
                                   assume_seconds=settings.assume_seconds, targets_namespace=settings.targets_namespace,
                                   targets_refresh=settings.targets_refresh, usage_source=usage_source,
                                   usage_refresh=settings.usage_refresh, metrics_max_age=settings.metrics_max_age,
                                   clock=clock)
        self._gang_since: dict[GangKey, float] = {}
        self._waiting_gangs: set[GangKey] = set()
        self.decide = DecisionLog()
        self.outcomes = SchedulerOutcomes(settings.scheduler_name, self.metrics.registry, self.decide, clock)
        self.intake = Intake(self.queue, store, settings.scheduler_name, settings.namespaces, self.snapshots.assumed,
                             self.decide, self.outcomes, clock)
        self._binders = ThreadPoolExecutor(max(1, settings.bind_workers), thread_name_prefix="bind")
        self._finisher = ThreadPoolExecutor(BINDING_CYCLES, thread_name_prefix="finish")
        self._pipelined = False
        self._binding: list[Future[CycleReport]] = []
        """The cycles whose bindings are (or were lately) in flight, oldest first."""
        self._books = threading.Lock()
        """Guards the gang tables below, which the planning thread and the binding threads share."""
        self.trimmer = Trimmer()
        self.collector = Collector()
        self._bindings_went_well = False
        self._usage_told = float("-inf")
        self.preemptions = Preemptions(client, self.recorder, self.metrics, settings.scheduler_name,
                                       settings.eviction_api, clock, settings.assume_seconds, self.decide)

    def warm_up(self) -> None:
        """Plans two pods on a node that holds one, throwing the plan away: loads the solver's
        modules and backends before the first real cycle needs them. One pod left out takes the
        solve past the greedy answer (the bound, the exact backends), as a cycle does whenever
        something does not fit; without it that first cycle pays for loading them (0.3 s on an
        idle machine, about 1 s on a loaded one). Never fails the scheduler."""
        node = Node("warm-up", allocatable={CPU: 1000, MEMORY: 1 << 30, PODS: 10})
        pods = tuple(Pod(f"warm-up-{i}", "warm-up", scheduler_name=self.settings.scheduler_name,
                         requests={CPU: 600, PODS: 1}) for i in range(2))
        try:
            make_plan(Snapshot(nodes=(node,), pending=pods, bound=()), self.config, self.profile,
                      cycle_options(self.solver, self.settings, len(pods)))
        except Exception:  # only a warm-up
            log.warning("warm-up plan failed", exc_info=True)

    def close(self) -> None:
        """Stops the binding threads (a cycle in progress is not waited for) and sends the
        queued Events."""
        self._finisher.shutdown(wait=False, cancel_futures=True)
        self._binders.shutdown(wait=False, cancel_futures=True)
        self.recorder.close()
        self.collector.close()

    def tables(self) -> dict[str, int]:
        """The size of every table this scheduler keeps (a soak checks that none grows for ever)."""
        return {**self.queue.sizes(), **self.intake.sizes(), **self.outcomes.sizes(), **self.preemptions.sizes(),
                "decisions": self.decide.remembered(), "events_remembered": self.recorder.remembered(),
                "events_queued": self.recorder.queued(), "assumed": len(self.snapshots.assumed),
                "gangs_since": len(self._gang_since), "gangs_waiting": len(self._waiting_gangs),
                "results": len(self.results), "metric_series": self.metrics.series(),
                "memo_entries": memo_entries(), **{f"store_{r}": n for r, n in self.store.sizes().items()}}

    # ------------------------------------------------------------------ informer events

    def on_change(self, resource: str, event: str, old: RawObject | None, new: RawObject | None) -> None:
        self.intake.on_change(resource, event, old, new)

    def resync_queue(self) -> None:
        """Queues every pending pod of the store (at start and on becoming the leader)."""
        self.intake.resync()

    # ------------------------------------------------------------------ the loop

    def run(self, stop: threading.Event | None = None) -> None:
        """Cycles until ``stop`` (default :attr:`stop_event`) is set; cycles only as leader.

        A cycle's bindings run in a thread of their own while the next batches are planned (its
        pods already count as bound there, see :class:`serve.snapshots.Assumed`); at most
        ``BINDING_CYCLES`` cycles bind at once."""
        stop = stop or self.stop_event
        leading = False
        self._pipelined = True
        try:
            while not stop.is_set():
                if not self.leader.is_leader():
                    leading = False
                    self.metrics.leader.set(0)
                    stop.wait(0.05)
                    continue
                if not leading:
                    leading = True
                    self.metrics.leader.set(1)
                    self.resync_queue()
                units = self.queue.pop_batch(self.settings.batch_window, self.settings.batch_size, stop,
                                             timeout=0.2, quiet=self.settings.batch_quiet,
                                             per_unit=self.settings.batch_window_per_unit,
                                             least=self.settings.batch_window_min)
                if units:
                    try:
                        self.cycle(units, stop)
                    except Exception:  # a bug in one cycle must not stop the scheduler
                        log.exception("cycle failed", extra={"fields": {"units": len(units)}})
                        for unit in units:
                            self.queue.unschedulable(unit, "cycle failed")
                if units:
                    self.collector.between_cycles()  # (not mid-cycle: serve.memory)
                self.trimmer.maybe()
                self._usage_maybe_changed()
                self.metrics.pending(self.queue.pending())
        finally:
            self._pipelined = False
            _finished(self._binding)
            self._binding = []

    def _usage_maybe_changed(self) -> None:
        """The measured usage has no watch: every ``usage_refresh`` seconds it may have changed
        (LoadAware filters by it), an event for the units waiting (none without metrics)."""
        if self.snapshots.usage_source is not None and self.clock() - self._usage_told >= self.settings.usage_refresh:
            self._usage_told = self.clock()
            self.queue.move(hints.NODE_METRICS)

    def cycle(self, units: Sequence[Unit], stop: threading.Event | None = None) -> CycleReport:
        """Plans, verifies and binds the pending pods of ``units``. Called by :meth:`run`, it
        returns once the plan is made and the bindings go on in the binding thread (the report
        fills in as they do); otherwise it returns when they are done."""
        stop = stop or self.stop_event
        try:
            decided = self._plan_cycle(units)
        except PluginError as error:  # a plugin failing for the whole batch: each pod's reason
            return self._plugin_failed(units, str(error))
        if decided.report.pods == 0:
            return decided.report
        if not self._pipelined:
            return self._finish(decided, stop)
        self._binding = [b for b in self._binding if not b.done()]
        if len(self._binding) >= BINDING_CYCLES:
            _finished([self._binding.pop(0)])
        self._binding.append(self._finisher.submit(self._finish_safely, decided, stop))
        return decided.report

    def _plugin_failed(self, units: Sequence[Unit], why: str) -> CycleReport:
        """The units of a cycle whose plan a plugin failed (a hook about the whole batch, or a build
        failing on no one object: ``models.plugin_guard``): each pending pod's Event and its unit's
        backoff say so, as the kube-scheduler fails a pod whose plugin returns an error."""
        report = CycleReport(units=len(units))
        wanted = set(units)
        for raw in self.store.items("pods"):
            if not (raw.get("spec") or {}).get("nodeName") and self.intake.unit_of_raw(raw) in wanted:
                report.unplaced.append(object_key(raw))
                self.decide(pod=object_key(raw), outcome="error", why=why)
                self.recorder.pod_event(ev.unparsed_pod(raw), ev.FAILED_SCHEDULING, why, ev.WARNING)
        log.warning("plugin failed", extra={"fields": {"units": len(units), "why": why}})
        for unit in units:
            self.queue.unschedulable(unit, why)
        return report

    def _plan_cycle(self, units: Sequence[Unit]) -> Decided:
        """Snapshot, plan and verify; the placements to bind are assumed from now on."""
        started = self.clock()
        report = CycleReport(units=len(units))
        wanted = set(units)
        snapshot, broken = self._snapshot(wanted)
        report.seconds_snapshot = self.clock() - started
        for raw, why in broken:
            unit = self.intake.unit_of_raw(raw)
            if raw.get("kind") != "Pod" or not self.intake.is_ours(raw) or unit not in wanted:
                log.warning("object left out of the snapshot", extra={"fields": {"object": object_label(raw),
                                                                                  "why": why}})
                continue
            report.unplaced.append(object_key(raw))
            self.queue.unschedulable(unit, why, frozenset())  # (its own update, or the flush)
            self.decide(pod=object_key(raw), outcome="invalid", why=why)
            self.recorder.pod_event(ev.unparsed_pod(raw), ev.FAILED_SCHEDULING, why, ev.WARNING)
            wanted.discard(unit)
        present = {unit_of(p) for p in snapshot.pending}
        for unit in wanted - present:
            self.queue.done(unit)  # nothing of it is pending any more
            if isinstance(unit, GangKey):  # (deleted, or bound by another): nothing waits for it
                with self._books:
                    self._gang_since.pop(unit, None)
                    self._waiting_gangs.discard(unit)
                    self.metrics.gangs_waiting.set(len(self._waiting_gangs))
                self.decide.forget(str(unit))
        report.pods = len(snapshot.pending)
        decided = Decided(report, started, list(units), snapshot)
        if not snapshot.pending:
            return decided
        self.metrics.cycles.inc()
        self.intake.attempted([p.key for p in snapshot.pending])
        planning = self.clock()
        options = cycle_options(self.solver, self.settings, len(snapshot.pending))
        planned = (make_preemption_plan(snapshot, self.config, self.profile, options, preemption=self.solver)
                   if self.settings.preempt else make_plan(snapshot, self.config, self.profile, options))
        plan = planned.plan
        report.seconds_plan, report.seconds_solve = self.clock() - planning, plan.summary.seconds
        decided.steps = ", ".join(plan.steps)
        self.metrics.solve_seconds.observe(self.clock() - started)
        if plan.summary.gap is not None:
            self.metrics.solver_gap.set(plan.summary.gap)
        pods = decided.pods = {(p.namespace, p.name): p for p in snapshot.pending}
        decided.gangs = {g.key: g for g in plan.gangs}
        decided.proven = plan.summary.bound is not None and plan.summary.placed_weight >= plan.summary.bound
        for p in plan.placements:
            decided.by_unit.setdefault(unit_of(pods[(p.namespace, p.name)]), []).append(p)
        decided.refused = self._refused(planned.violations, pods, plan)
        held = self._preempt(plan, pods, snapshot, decided.refused)
        decided.refused.update(held)
        decided.nominated = set(held)
        for u in plan.unplaced:
            decided.unplaced.setdefault(unit_of(pods[(u.namespace, u.name)]), []).append(u)
        for unit, placements in decided.by_unit.items():
            if unit not in decided.refused:
                for p in placements:  # held as usage (and its devices) by the next cycles while being bound
                    notes = device_notes(p.gpus, pods[(p.namespace, p.name)].requests, self.config.gpu)
                    self.snapshots.assumed.assume(f"{p.namespace}/{p.name}", p.uid, p.node, notes)
        return decided

    def _finish_safely(self, decided: Decided, stop: threading.Event) -> CycleReport:
        try:
            return self._finish(decided, stop)
        except Exception:  # a bug in one cycle must not stop the scheduler
            log.exception("binding failed", extra={"fields": {"units": len(decided.units)}})
            for unit in decided.units:
                self.queue.unschedulable(unit, "cycle failed")
            return decided.report

    def _finish(self, decided: Decided, stop: threading.Event) -> CycleReport:
        """Binds what :meth:`_plan_cycle` decided and reports each unit's outcome."""
        report, by_unit, refused, unplaced, pods = (decided.report, decided.by_unit, decided.refused,
                                                    decided.unplaced, decided.pods)
        order = [u for u in decided.units if u in by_unit or u in unplaced]
        bind_started = self.clock()
        outcomes, starts = self._bind_units([u for u in order if u in by_unit and u not in refused], by_unit, pods,
                                            stop, report, decided.started)
        report.seconds_bind = self.clock() - bind_started
        groups = {g.key: g for g in decided.snapshot.pod_groups}
        with self._books:  # (another cycle's bindings may be answered at the same time)
            for unit in order:
                if unit in refused:
                    report.unplaced += [f"{p.namespace}/{p.name}" for p in by_unit[unit]]
                    self._attempt(ERROR, decided.started, len(by_unit[unit]))
                    waits_for = (unit_hints(pods[(p.namespace, p.name)] for p in by_unit[unit])
                                 if unit in decided.nominated else None)  # (its victims' deletion)
                    self._waits(unit, by_unit[unit], pods, refused[unit], waits_for)
                    continue
                results = outcomes.get(unit, [])
                if any(r.outcome in (Outcome.NOT_ATTEMPTED, Outcome.UNKNOWN) for r in results):
                    report.interrupted = True  # stopped, not the leader, or the server unreachable: later
                    self.queue.requeue(unit)
                    continue
                gang = decided.gangs.get(unit) if isinstance(unit, GangKey) else None
                if results:
                    self._after_binding(unit, [pods[(r.binding.namespace, r.binding.name)] for r in results
                                               if r.outcome == Outcome.BOUND],
                                        [r for r in results if r.outcome != Outcome.BOUND], gang,
                                        groups.get(unit) if isinstance(unit, GangKey) else None, starts[unit],
                                        unit in unplaced, unplaced_hints(unplaced.get(unit, []), pods, decided.proven))
                if unit in unplaced:
                    self._attempt(UNSCHEDULABLE, decided.started, len(unplaced[unit]))
                    self._unplaced(unit, unplaced[unit], pods, gang, groups, report,
                                   requeue=unit not in by_unit, proven=decided.proven)
            self.metrics.gangs_waiting.set(len(self._waiting_gangs))
        self.metrics.cycle_seconds.observe(self.clock() - decided.started)
        log.info("cycle", extra={"fields": {
            "units": report.units, "pods": report.pods, "bound": len(report.bound), "failed": len(report.failed),
            "unplaced": len(report.unplaced), "interrupted": report.interrupted,
            "seconds_snapshot": round(report.seconds_snapshot, 3), "seconds_plan": round(report.seconds_plan, 3),
            "seconds_solve": round(report.seconds_solve, 3), "seconds_bind": round(report.seconds_bind, 3),
            "seconds": round(self.clock() - decided.started, 3), "solver": decided.steps,
            "repeated_decisions_not_logged": self.decide.take_repeats()}})
        return report

    def _snapshot(self, wanted: set[Unit]) -> tuple[Snapshot, list[tuple[RawObject, str]]]:
        snapshot, broken = self.snapshots.take(lambda pods: self.preemptions.adjust(pods,
                                                                                  lambda p: unit_of(p) in wanted),
                                               keep=lambda p: unit_of(p) in wanted)
        return replace(snapshot, pending=tuple(p for p in snapshot.pending if unit_of(p) in wanted)), broken

    def _preempt(self, plan: Plan, pods: Mapping[tuple[str, str], Pod], snapshot: Snapshot,
                 refused: Mapping[Unit, str]) -> dict[Unit, str]:
        """Carries out the plan's preemptions (``serve.preempt``) but those of refused units;
        returns the units waiting for their victims, with why (held back like refused ones)."""
        if not plan.preemptions and (plan.summary.preemption is None or not plan.summary.preemption.attempts):
            return {}
        by_key = {pod.key: pod for pod in pods.values()}
        keep = tuple(v for v in plan.preemptions if not any(unit_of(by_key[k]) in refused for k in v.for_pods))
        running = {p.key: p for p in snapshot.bound}
        nominated = self.preemptions.carry_out(replace(plan, preemptions=keep), pods, running)
        held: dict[Unit, str] = {}
        for key, n in nominated.items():
            held.setdefault(unit_of(by_key[key]),
                            f"nominated to {n.node}: waiting for {', '.join(n.victims)} to terminate")
        return held

    # ------------------------------------------------------------------ binding

    def _refused(self, violations: Sequence[Violation], pods: Mapping[tuple[str, str], Pod],
                 plan: Plan) -> dict[Unit, str]:
        """Units with a placement (or a victim) the independent verifier refused (the planner
        runs it); a victim's refusal refuses the units it would be evicted for."""
        refused: dict[Unit, str] = {}
        victims = {v.key: v.for_pods for v in plan.preemptions}
        by_key = {pod.key: pod for pod in pods.values()}
        for violation in violations:
            key = f"{violation.namespace}/{violation.name}"
            for unit in {unit_of(by_key[k]) for k in victims.get(key, (key,)) if k in by_key}:
                refused.setdefault(unit, f"plan refused by the verifier: {violation}")
            self.metrics.binds_failed.labels("refused").inc()
            self.decide(pod=f"{violation.namespace}/{violation.name}", node=violation.node, outcome="refused",
                        why=str(violation))
        return refused

    def _bind_units(self, units: Sequence[Unit], by_unit: Mapping[Unit, list[Placement]],
                    pods: Mapping[tuple[str, str], Pod], stop: threading.Event, report: CycleReport,
                    started: float) -> tuple[dict[Unit, list[BindResult]], dict[Unit, float]]:
        """Binds the units' placements, several at once (``kube.binder.bind_concurrently``), asking
        before every binding whether this replica still leads and is not stopping. Returns each
        unit's results (``not_attempted`` for those never tried; none for a unit waiting for its
        claims) and when each unit started waiting (for the latency metrics). ``started``: when the
        cycle started (the attempt's)."""
        now = self.clock()
        starts: dict[Unit, float] = {}
        jobs: list[tuple[Unit, Pod, Binding]] = []
        for unit in units:
            starts[unit] = min(self.intake.first_seen([f"{p.namespace}/{p.name}" for p in by_unit[unit]], now),
                               default=now)

        def halt() -> str:
            if stop.is_set():
                return "stopping"
            return "" if self.leader.is_leader() else "not the leader any more"

        for unit in units:
            if isinstance(unit, GangKey):
                starts[unit] = min(starts[unit], self._gang_since.get(unit, starts[unit]))
            placements = by_unit[unit]
            waiting, waits_for = "", None
            if any(p.volumes for p in placements) and not halt():  # (halted: its bindings are not attempted)
                waiting = volumes_waiting(self.client, self.store, self.decide, placements,
                                          unit if isinstance(unit, GangKey) else None)
                waits_for = hints.PREBIND  # (its claims bound: at once, as a Pending plugin's hint)
            if not waiting and any(p.claims for p in placements) and not halt():
                waiting = devices_refused(self.client, self.store, self.decide, placements,
                                          unit if isinstance(unit, GangKey) else None)
                waits_for = None  # (a write refused: backs off)
            if waiting:  # its claims first: the unit is bound in a later cycle
                for p in placements:
                    self.snapshots.assumed.forget(f"{p.namespace}/{p.name}")
                report.unplaced += [f"{p.namespace}/{p.name}" for p in placements]
                self._waits(unit, placements, pods, waiting, waits_for, pending=waits_for is not None)
                continue
            for p in placements:
                pod = pods[(p.namespace, p.name)]
                note = device_notes(p.gpus, pod.requests, self.config.gpu)
                jobs.append((unit, pod, Binding(p.namespace, p.name, p.uid, p.node, note)))

        def done(index: int, result: BindResult) -> None:
            unit, pod, _ = jobs[index]
            self._bound_one(pod, unit, result, report, started)

        results = bind_concurrently(self.client, [b for _, _, b in jobs], self._binders,
                                    self.settings.bind_workers, halt, done,
                                    first=self.settings.bind_workers if self._bindings_went_well else 1)
        if results:  # the next cycle binds at full width at once after one whose every binding was answered
            self._bindings_went_well = all(r.outcome in ANSWERED for r in results)
        outcomes: dict[Unit, list[BindResult]] = {}
        for (unit, pod, _), result in zip(jobs, results, strict=True):
            outcomes.setdefault(unit, []).append(result)
            if result.outcome == Outcome.NOT_ATTEMPTED:
                self.snapshots.assumed.forget(pod.key)
                self.decide(pod=pod.key, gang=unit if isinstance(unit, GangKey) else None,
                            outcome="not_attempted", why=result.message)
        return outcomes, starts

    def _waits(self, unit: Unit, placements: Sequence[Placement], pods: Mapping[tuple[str, str], Pod],
               why: str, waits_for: frozenset[ClusterEvent] | None = None, pending: bool = False) -> None:
        """A placed unit not bound this cycle (refused by the verifier, nominated and waiting for
        its victims, waiting for its claims): back off, or wait for ``waits_for`` (``pending``:
        and skip the backoff then), and each pod's Event says why."""
        self.queue.unschedulable(unit, why, waits_for, pending=pending)
        for p in placements:
            self.recorder.pod_event(pods[(p.namespace, p.name)], ev.FAILED_SCHEDULING, why, ev.WARNING)

    def _attempt(self, result: str, started: float, pods: int = 1) -> None:
        """``pods`` attempts of a cycle started at ``started`` ended with ``result`` now."""
        self.metrics.attempted(result, self.settings.scheduler_name, self.clock() - started, pods)

    def _bound_one(self, pod: Pod, unit: Unit, result: BindResult, report: CycleReport, started: float) -> None:
        """What one binding's answer changes: the log, assumed usage, metrics, the pod's Event;
        ``started``: when the cycle that planned it started."""
        self.results.append(result)
        if len(self.results) >= 2 * RESULTS_KEPT:
            del self.results[:RESULTS_KEPT]
        node = result.binding.node
        self.decide(pod=pod.key, scheduler=self.settings.scheduler_name, node=node,
                    gang=unit if isinstance(unit, GangKey) else None, outcome=str(result.outcome), why=result.message,
                    seconds=self._waited(pod.key))
        if result.outcome not in (Outcome.BOUND, Outcome.UNKNOWN):  # unknown: it may be bound; never twice
            self.snapshots.assumed.forget(pod.key)
        if result.outcome == Outcome.BOUND:
            report.bound.append(pod.key)
            self.metrics.pods_bound.inc()
            self._attempt(SCHEDULED, started)
            attempts = self.intake.attempts(pod.key)
            seen = self.intake.forget(pod.key)
            self.metrics.bound(None if seen is None else self.clock() - seen, attempts)
            self.recorder.pod_event(pod, ev.SCHEDULED, f"Successfully assigned {pod.key} to {node}")
            return
        if result.outcome != Outcome.NOT_ATTEMPTED:
            self._attempt(ERROR, started)
        report.failed[pod.key] = str(result.outcome)
        self.metrics.binds_failed.labels(str(result.outcome)).inc()

    def _after_binding(self, unit: Unit, bound: list[Pod], failed: list[BindResult], gang: GangStatus | None,
                       group: PodGroup | None, start: float, leftover: bool,
                       waits_for: frozenset[ClusterEvent] | None) -> None:
        """``leftover``: the plan left some of the unit's pods out; ``waits_for``: their hints."""
        if not failed:
            if gang is not None:
                self._waiting_gangs.discard(gang.key)
                self._gang_since.pop(gang.key, None)
                self.metrics.gang_latency.observe(max(0.0, self.clock() - start))
                if group is not None:
                    self.recorder.pod_group_status(group, ev.PHASE_SCHEDULED, gang.running + len(bound))
            if leftover:  # members beyond what was placed: try them again later
                self.queue.unschedulable(unit, "not every pod placed", waits_for)
            else:
                self.queue.done(unit)
            return
        if gang is not None and gang.running + len(bound) < gang.min_member:
            message = (f"gang {gang.key} has {gang.running + len(bound)} of minMember {gang.min_member} pods "
                       f"bound after {len(failed)} binding(s) failed ({failed[0].message}); re-planned next cycle")
            self.metrics.gangs_below_min.inc()
            self.decide(gang=gang.key, outcome="below_min_member", why=message)
            for pod in bound:
                self.recorder.pod_event(pod, ev.GANG_BELOW_MIN, message, ev.WARNING)
        lost = all(r.outcome in (Outcome.CONFLICT, Outcome.NOT_FOUND) for r in failed)
        if lost:  # taken or gone: the cluster changed, plan the rest again at once
            self.queue.requeue(unit)
        else:
            self.queue.unschedulable(unit, failed[0].message)

    def _waited(self, key: str) -> float | None:
        waited = self.outcomes.waited(key)
        return None if waited is None else round(waited, 3)

    # ------------------------------------------------------------------ not placed

    def _unplaced(self, unit: Unit, entries: list[Unplaced], pods: Mapping[tuple[str, str], Pod],
                  gang: GangStatus | None, groups: Mapping[GangKey, PodGroup], report: CycleReport,
                  requeue: bool, proven: bool) -> None:
        members = [pods[(u.namespace, u.name)] for u in entries]
        gang_key = gang.key if gang is not None else None
        group = groups.get(gang.key) if gang is not None else None
        timed_out = ""
        if gang is not None and not gang.placed:
            now = self.clock()
            seen = self.intake.first_seen([p.key for p in members], now)
            since = self._gang_since.setdefault(gang.key, min(seen, default=now))
            if len(self._gang_since) > GANGS_KEPT:
                for old in list(self._gang_since)[: GANGS_KEPT // 2]:
                    self._gang_since.pop(old, None)
                    self._waiting_gangs.discard(old)
            waiting = gang.reason.startswith(("gang waiting", "gang timed out"))
            if waiting:
                self._waiting_gangs.add(gang.key)
                timeout = gang_timeout(group)
                if now - since >= timeout:
                    self._gang_since[gang.key] = now  # reported again after another timeout
                    timed_out = (f"gang {gang.key} timed out: {len(gang.members) + gang.running} of minMember "
                                 f"{gang.min_member} pods exist after {timeout}s")
                    self.metrics.gangs_timed_out.inc()
                    self.decide(gang=gang_key, outcome="timed_out", why=timed_out)
            else:
                self._waiting_gangs.discard(gang.key)
            if group is not None:
                self.recorder.pod_group_status(group, ev.PHASE_PENDING if waiting else ev.PHASE_SCHEDULING,
                                               gang.running, timed_out)
        for pod, entry in zip(members, entries, strict=True):
            why = "; ".join(entry.reasons)
            report.unplaced.append(pod.key)
            self.decide(pod=pod.key, scheduler=self.settings.scheduler_name, gang=gang_key, outcome="unschedulable",
                        why=why)
            self.recorder.pod_event(pod, ev.FAILED_SCHEDULING, why, ev.WARNING)
            if timed_out:
                self.recorder.pod_event(pod, ev.GANG_TIMED_OUT, timed_out, ev.WARNING)
        self.metrics.unschedulable.inc(len(members))
        if requeue:
            retry_by = None
            if gang is not None and gang.key in self._waiting_gangs:  # (reported at its timeout)
                retry_by = self._gang_since[gang.key] + gang_timeout(group)
            self.queue.unschedulable(unit, entries[0].reasons[0] if entries[0].reasons else "",
                                     unplaced_hints(entries, pods, proven), retry_by)
