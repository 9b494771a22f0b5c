"""The scheduling queue: which units (a pod, or a whole gang) the next cycle plans.

Three parts, as the kube-scheduler's ``PriorityQueue``: the *active* queue, the *backoff* queue
and the *unschedulable* units.

A unit enters the *active* queue when its first pod is seen pending. A gang is *complete* once
its minMember pods exist (the intake says, :class:`serve.gang_members.GangMembers`); until then it
waits for its members. :meth:`SchedulingQueue.pop_batch` hands over the active units together,
oldest first, when

- ``size`` complete units are active;
- the oldest complete unit has waited the *adaptive window*: ``least`` seconds, and ``per_unit``
  more for each other complete unit waiting with it, at most ``window`` (latency that follows the
  load: a lone unit in an idle queue, a gang as soon as its last member arrived, is handed over
  after ``least`` at most, the time a client takes to create the next pod of a burst, so that a
  burst created pod by pod still gets one joint plan, as ``kubeplace simulate``'s pods arriving at
  one instant do; a backlog waits a little for more to join its joint plan, never more than
  ``window``);
- a gang still incomplete has waited ``window`` (it is planned, and reported waiting);
- or no unit arrived for ``quiet`` seconds (arrivals paused: what is there is all there is), for
  the complete units.

An incomplete gang rides along only when it is due itself: a gang whose members are still being
created (a slow API server, a busy controller) is not planned half there. Without ``per_unit``
the window is fixed, as it was (``kubeplace simulate``'s): a batch closes ``window`` after its
oldest unit, ``quiet`` after the newest arrival or at ``size`` units, and takes every unit,
complete or not.

A unit the cycle could not place goes, with the events that may help it (its *hints*,
:mod:`serve.hints`), to the *unschedulable* units: it comes back only when one of those events
happens (:meth:`SchedulingQueue.move`: a node added or made more usable, a pod deleted or scaled
down...), when it changes itself (:meth:`SchedulingQueue.updated`; a new gang member or its
PodGroup: :meth:`SchedulingQueue.activate`), or when it has waited ``max_in_unschedulable``
seconds (the kube-scheduler's podMaxInUnschedulablePodsDuration, 5 minutes: the safety net).
An event brings it to the active queue if its backoff is over, else to the backoff queue
(``queueAfterBackoff``). The backoff is ``initial`` doubled per failed attempt, at most
``maximum`` seconds (:func:`serve.backoff.doubling`), but an idle queue (no unit a batch would
take) plans a unit an event moved to the backoff queue at once, as the kube-scheduler pops its
backoff queue when its active queue is empty (SchedulerPopFromBackoffQ, on by default since
1.33): the room it waited for may be free now, and the next arrival would take it. A unit that failed for no reason the
cycle understood (an error, a binding that failed, a plan refused) is given no hints: it goes
to the backoff queue and comes back by itself when its backoff is over, as the kube-scheduler
does with a pod that failed with no rejecting plugin.

An event that happens while a unit is being planned is remembered (the last time each kind of
event happened), and a unit that fails with a hint for it is retried at once: its plan was made
on a cluster that has changed since.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubeplace.kube.objects import GangKey
from kubeplace.serve.backoff import doubling
from kubeplace.serve.hints import TRANSIENT, UNSCHEDULABLE_TIMEOUT, WILDCARD, ClusterEvent

Unit = GangKey | str
"""What one cycle plans and binds together: a whole gang, or one pod by its key ``namespace/name``."""

MAX_IN_UNSCHEDULABLE = 300.0
"""The kube-scheduler's DefaultPodMaxInUnschedulablePodsDuration (5 minutes)."""
FLUSH_PERIOD = 30.0
"""The kube-scheduler looks for units past ``max_in_unschedulable`` every 30 s
(``flushUnschedulablePodsLeftover``): they come back together, at the multiples of it on the
queue's clock, not one cycle each."""
ACTIVE, BACKOFF, UNSCHEDULABLE = "active", "backoff", "unschedulable"
"""The queues, as the kube-scheduler's ``scheduler_pending_pods`` metric labels them."""


@dataclass
class _Waiting:
    """A unit in the backoff queue."""

    attempts: int
    retry_at: float
    reason: str
    after_event: bool = False
    """Moved here from the unschedulable units by an event that may help it (the kube-scheduler's
    podBackoffQ), not backing off after a failure the cycle did not understand (its
    podErrorBackoffQ): an idle queue plans it before its backoff is over."""


def adaptive_window(window: float, per_unit: float | None, units: int, least: float = 0.0) -> float:
    """How long the oldest of ``units`` complete units waits for others to join its batch:
    ``least``, and ``per_unit`` more for each other unit waiting, at most ``window``; always
    ``window`` without ``per_unit``."""
    if per_unit is None:
        return window
    return min(window, least + per_unit * max(0, units - 1))


@dataclass(frozen=True)
class _Unschedulable:
    """A unit waiting for an event."""

    tried_at: float
    backoff_until: float
    flush_at: float
    """When it goes back by itself: at the first flush ``max_in_unschedulable`` after
    ``tried_at``, or sooner when the cycle asked (a gang waiting for its members, to be
    reported at its timeout)."""
    reason: str
    hints: frozenset[ClusterEvent]
    pending: bool
    """Waiting for something under way (its claims bound): an event it waits for brings it back
    at once, its backoff skipped (the kube-scheduler's queueImmediately for a Pending plugin)."""


class SchedulingQueue:
    def __init__(self, *, initial: float = 1.0, maximum: float = 10.0,
                 max_in_unschedulable: float = MAX_IN_UNSCHEDULABLE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.initial = initial
        self.maximum = maximum
        self.max_in_unschedulable = max_in_unschedulable
        self.clock = clock
        self._cond = threading.Condition()
        self._active: dict[Unit, float] = {}  # unit -> since when (insertion order = arrival order)
        self._waiting: dict[Unit, _Waiting] = {}  # the backoff queue
        self._unschedulable: dict[Unit, _Unschedulable] = {}
        self._by_hints: dict[frozenset[ClusterEvent], dict[Unit, None]] = {}
        """The unschedulable units grouped by their hints (an event visits the groups, not the units)."""
        self._flushes: list[tuple[float, int, Unit]] = []
        """(flush_at, serial, unit) of the unschedulable units, a heap; entries of units gone since
        are dropped when they come up, and the heap is rebuilt when they are half of it."""
        self._attempts: dict[Unit, int] = {}
        self._in_flight: dict[Unit, int] = {}  # unit -> the event serial when it was handed over
        self._dirty: set[Unit] = set()  # in flight when something changed for them: no backoff
        self._seen: dict[ClusterEvent, int] = {}
        """The serial of the last event of each kind (a unit in flight compares it with its own)."""
        self._serial = itertools.count(1)
        self._last_serial = 0
        self._arrived = float("-inf")  # when the newest unit entered the active queue
        self.moved: dict[tuple[str, str], int] = {}
        """Units moved, by (queue, event label): the kube-scheduler's scheduler_queue_incoming_pods_total."""
        self._incomplete: set[Unit] = set()
        """Gangs whose minMember pods do not all exist yet, wherever they are (active, backing
        off, planned): they wait for their members, not for the batch."""

    # ------------------------------------------------------------------ producers (informer events)

    def add(self, unit: Unit, complete: bool = True) -> None:
        """A pending pod of ``unit`` was seen; a unit already queued, backing off, unschedulable
        or being planned keeps its place. ``complete``: False for a gang whose members do not all
        exist yet."""
        with self._cond:
            self._mark(unit, complete)
            if unit in self._in_flight:
                self._dirty.add(unit)
            elif unit not in self._active and unit not in self._waiting and unit not in self._unschedulable:
                self._active[unit] = self._arrived = self.clock()
                self._count(ACTIVE, "PodAdd")
                self._cond.notify_all()

    def activate(self, unit: Unit, complete: bool = True) -> None:
        """Something changed for this unit (a gang member arrived, its PodGroup): retry it now
        (the kube-scheduler's ``Activate``)."""
        with self._cond:
            self._mark(unit, complete)
            if unit in self._in_flight:
                self._dirty.add(unit)
                return
            self._waiting.pop(unit, None)
            self._drop_unschedulable(unit)
            self._arrive(unit)
            self._count(ACTIVE, "ForceActivate")
            self._cond.notify_all()

    def updated(self, unit: Unit, complete: bool = True) -> None:
        """A pod of ``unit`` changed what placement reads (``EventUnscheduledPodUpdate``): an
        unschedulable unit goes back once its backoff is over; one queued or backing off keeps
        its place; one not queued is queued."""
        with self._cond:
            self._mark(unit, complete)
            if unit in self._in_flight:
                self._dirty.add(unit)
            elif unit in self._unschedulable:
                self._requeue_after_backoff(unit, self.clock(), "UnscheduledPodUpdate")
            elif unit not in self._active and unit not in self._waiting:
                self._active[unit] = self._arrived = self.clock()
                self._count(ACTIVE, "UnscheduledPodUpdate")
                self._cond.notify_all()

    def move(self, event: ClusterEvent) -> int:
        """``event`` happened: every unschedulable unit with a hint for it goes back, to the
        active queue or, still backing off, to the backoff queue (the kube-scheduler's
        ``MoveAllToActiveOrBackoffQueue``); units in flight remember it. Returns how many moved."""
        with self._cond:
            serial = self._last_serial = next(self._serial)
            self._seen[event] = serial
            now = self.clock()
            moved = 0
            for hints in [h for h in self._by_hints if event == WILDCARD or event in h]:
                for unit in list(self._by_hints.get(hints, ())):
                    self._requeue_after_backoff(unit, now, event.label(), self._unschedulable[unit].pending)
                    moved += 1
            return moved

    def cluster_changed(self) -> int:
        """Moves every unschedulable unit (a wildcard event); returns how many moved."""
        return self.move(WILDCARD)

    def forget(self, unit: Unit) -> None:
        """The unit has no pending pod any more (bound, deleted)."""
        with self._cond:
            self._incomplete.discard(unit)
            self._active.pop(unit, None)
            self._waiting.pop(unit, None)
            self._drop_unschedulable(unit)
            self._attempts.pop(unit, None)
            self._in_flight.pop(unit, None)
            self._dirty.discard(unit)

    # ------------------------------------------------------------------ the cycle's answers

    def done(self, unit: Unit) -> None:
        """Planned and bound: out of the queue, its attempts forgotten."""
        with self._cond:
            self._in_flight.pop(unit, None)
            self._attempts.pop(unit, None)
            if unit not in self._dirty:
                self._incomplete.discard(unit)
            if unit in self._dirty:  # e.g. a gang member that arrived while its gang was bound
                self._dirty.discard(unit)
                self._arrive(unit)
                self._cond.notify_all()

    def requeue(self, unit: Unit) -> None:
        """Not finished (binding interrupted, a gang member failed): plan it again next cycle."""
        with self._cond:
            self._in_flight.pop(unit, None)
            self._dirty.discard(unit)
            self._waiting.pop(unit, None)
            self._drop_unschedulable(unit)
            self._arrive(unit)
            self._cond.notify_all()

    def unschedulable(self, unit: Unit, reason: str = "", hints: frozenset[ClusterEvent] | None = None,
                      retry_by: float | None = None, pending: bool = False) -> float:
        """Could not be placed. With ``hints`` (the events that may help it) it waits for one of
        them, for ``max_in_unschedulable`` seconds at most (or until ``retry_by``), then comes
        back after its backoff (``pending``: at once); without, it backs off and comes back by
        itself. Either way it is retried at once if something it waits for happened while it
        was planned. Returns its backoff in seconds (0: at once)."""
        with self._cond:
            handed_over = self._in_flight.pop(unit, self._last_serial)
            attempts = self._attempts.get(unit, 0) + 1
            self._attempts[unit] = attempts
            backoff = doubling(attempts, self.initial, self.maximum)
            self._active.pop(unit, None)
            self._waiting.pop(unit, None)
            self._drop_unschedulable(unit)
            if unit in self._dirty or self._changed_since(handed_over, hints):  # its plan may be stale
                self._dirty.discard(unit)
                self._active[unit] = self._arrived = self.clock()
                self._count(ACTIVE, "ScheduleAttemptFailure")
                self._cond.notify_all()
                return 0.0
            now = self.clock()
            if hints is None:
                self._waiting[unit] = _Waiting(attempts, now + backoff, reason)
                self._count(BACKOFF, "ScheduleAttemptFailure")
                return backoff
            flush_at = now + self.max_in_unschedulable
            if math.isfinite(flush_at):  # (no flush: infinite)
                flush_at = math.ceil(flush_at / FLUSH_PERIOD) * FLUSH_PERIOD
            entry = _Unschedulable(now, now + backoff, flush_at if retry_by is None else min(flush_at, retry_by),
                                   reason, hints, pending)
            self._unschedulable[unit] = entry
            self._by_hints.setdefault(hints, {})[unit] = None
            heapq.heappush(self._flushes, (entry.flush_at, next(self._serial), unit))
            self._count(UNSCHEDULABLE, "ScheduleAttemptFailure")
            return backoff

    def _changed_since(self, serial: int, hints: frozenset[ClusterEvent] | None) -> bool:
        """Whether an event that may help happened after ``serial`` (without hints: one that may
        help any unit, not a pod placed)."""
        return self._seen.get(WILDCARD, 0) > serial or any(
            self._seen.get(e, 0) > serial for e in (TRANSIENT if hints is None else hints))

    # ------------------------------------------------------------------ the consumer

    def pop_batch(self, window: float, size: int, stop: threading.Event | None = None,
                  timeout: float | None = None, quiet: float | None = None,
                  per_unit: float | None = None, least: float = 0.0) -> list[Unit]:
        """The next batch, oldest first; [] when ``timeout`` passes or ``stop`` is set first.
        ``per_unit`` (and ``least``): the adaptive window (see the module's docstring); None: a
        fixed ``window``."""
        give_up = None if timeout is None else self.clock() + timeout
        with self._cond:
            while True:
                self._flush_due()
                if stop is not None and stop.is_set():
                    return []
                if self._idle(per_unit is not None) and self._pop_from_backoff(size):
                    return self._take(window, size, per_unit is not None)
                if self._active:
                    wake = self._batch_due(window, size, quiet, per_unit, least)
                    if self.clock() >= wake:
                        return self._take(window, size, per_unit is not None)
                else:
                    wake = min(self._next_flush(), self.clock() + 1.0)
                if give_up is not None:
                    if self.clock() >= give_up:
                        return []  # (a batch still open stays queued for the next call)
                    wake = min(wake, give_up)
                self._cond.wait(min(1.0, max(0.001, wake - self.clock())))

    def next_due(self, window: float, size: int, quiet: float | None = None,
                 per_unit: float | None = None, least: float = 0.0) -> float | None:
        """When :meth:`pop_batch` with these arguments would next hand over a batch if nothing
        else arrived (a backoff ending or an unschedulable unit's flush counts); None when the
        queue is empty. ``kubeplace simulate`` jumps its simulated clock there instead of waiting."""
        with self._cond:
            times = [self._next_flush()]
            if self._active:
                times.append(self._batch_due(window, size, quiet, per_unit, least))
            if self._idle(per_unit is not None) and self._backing_off_after_event():
                times.append(self.clock())  # (handed over at once: _pop_from_backoff)
            due = min(times)
            return None if due == float("inf") else due

    def _next_flush(self) -> float:
        """When the next unit backing off or unschedulable comes back by itself (inf: none)."""
        while self._flushes and not self._holds(self._flushes[0]):
            heapq.heappop(self._flushes)  # (gone or moved since)
        unschedulable = self._flushes[0][0] if self._flushes else float("inf")
        return min(min((w.retry_at for w in self._waiting.values()), default=float("inf")), unschedulable)

    def _batch_due(self, window: float, size: int, quiet: float | None, per_unit: float | None,
                   least: float = 0.0) -> float:
        """When the active units make a batch (the lock held, units active). The fixed window (no
        ``per_unit``): now at ``size`` units, else ``window`` after the oldest or ``quiet`` after the
        newest arrival. The adaptive one: now when ``size`` of them are complete, else the adaptive
        window after the oldest complete unit, ``window`` after the oldest incomplete gang, or
        ``quiet`` after the newest arrival when some unit is complete, whichever comes first."""
        if per_unit is None:
            if len(self._active) >= size:
                return self.clock()
            close = min(self._active.values()) + window
            return close if quiet is None else min(close, self._arrived + quiet)
        waiting = self._incomplete.intersection(self._active) if self._incomplete else set()
        complete = len(self._active) - len(waiting)
        if complete >= size:
            return self.clock()
        due = float("inf")
        if complete:
            oldest = min(since for unit, since in self._active.items() if unit not in waiting)
            due = oldest + adaptive_window(window, per_unit, complete, least)
        if waiting:
            due = min(due, min(self._active[unit] for unit in waiting) + window)
        return due if quiet is None or not complete else min(due, self._arrived + quiet)

    def _idle(self, adaptive: bool) -> bool:
        """No unit is active that a batch would take (with the adaptive window, a gang waiting for
        its members is not: the kube-scheduler's PreEnqueue keeps such pods out of its active
        queue); the lock held."""
        if adaptive and self._incomplete:
            return all(unit in self._incomplete for unit in self._active)
        return not self._active

    def _backing_off_after_event(self) -> list[Unit]:
        """The complete units backing off after an event that may help them, the soonest
        backoff's first (the lock held)."""
        units = [u for u, w in self._waiting.items() if w.after_event and u not in self._incomplete]
        return sorted(units, key=lambda u: self._waiting[u].retry_at)

    def _pop_from_backoff(self, size: int) -> bool:
        """The queue idle: up to ``size`` units backing off after an event that may help them
        go to the active queue before their backoff is over, as the kube-scheduler pops its
        backoff queue when its active queue is empty (SchedulerPopFromBackoffQ, on since 1.33):
        an idle scheduler does not let a unit wait for nothing while the room it waits for may
        be free (and taken by the next arrival). Returns whether any did (the lock held)."""
        units = self._backing_off_after_event()[:size]
        now = self.clock()
        for unit in units:
            del self._waiting[unit]
            self._active[unit] = self._arrived = now
            self._count(ACTIVE, "PopFromBackoffQ")
        return bool(units)

    def wake(self) -> None:
        """Wakes a waiting :meth:`pop_batch` (after ``stop`` was set)."""
        with self._cond:
            self._cond.notify_all()

    def _take(self, window: float, size: int, adaptive: bool) -> list[Unit]:
        """Up to ``size`` units, oldest first (the lock held): with the fixed window every one;
        with the adaptive one every complete one, an incomplete gang once it has waited ``window``
        for its members."""
        now = self.clock()
        units = [unit for unit, since in self._active.items()
                 if not adaptive or unit not in self._incomplete or now >= since + window][:size]
        for unit in units:
            del self._active[unit]
            self._in_flight[unit] = self._last_serial
        return units

    def _mark(self, unit: Unit, complete: bool) -> None:
        if complete:
            self._incomplete.discard(unit)
        else:
            self._incomplete.add(unit)

    def _flush_due(self) -> None:
        """Backoffs over to the active queue; unschedulable units past their time back
        (``flushUnschedulablePodsLeftover``, ``UnschedulableTimeout``)."""
        now = self.clock()
        for unit in [u for u, w in self._waiting.items() if w.retry_at <= now]:
            del self._waiting[unit]
            self._arrive(unit, now)
            self._count(ACTIVE, "BackoffComplete")
        while self._flushes and self._flushes[0][0] <= now:
            _, _, unit = heapq.heappop(self._flushes)
            entry = self._unschedulable.get(unit)
            if entry is not None and entry.flush_at <= now:
                self._requeue_after_backoff(unit, now, UNSCHEDULABLE_TIMEOUT.label())

    def _requeue_after_backoff(self, unit: Unit, now: float, event: str, immediately: bool = False) -> None:
        """An unschedulable unit back: to the active queue, or to the backoff queue while its
        backoff lasts (``requeuePodWithQueueingStrategy``, queueAfterBackoff or, ``immediately``,
        queueImmediately; the lock held)."""
        entry = self._unschedulable[unit]
        self._drop_unschedulable(unit)
        if entry.backoff_until > now and not immediately:
            self._waiting[unit] = _Waiting(self._attempts.get(unit, 0), entry.backoff_until, entry.reason, True)
            self._count(BACKOFF, event)
            self._cond.notify_all()  # (an idle queue plans it: _pop_from_backoff)
        else:
            self._arrive(unit, now)
            self._count(ACTIVE, event)
            self._cond.notify_all()

    def _drop_unschedulable(self, unit: Unit) -> None:
        entry = self._unschedulable.pop(unit, None)
        if entry is None:
            return
        group = self._by_hints[entry.hints]
        del group[unit]
        if not group:
            del self._by_hints[entry.hints]
        if len(self._flushes) > 2 * len(self._unschedulable) + 16:  # mostly units gone: rebuilt
            self._flushes = [f for f in self._flushes if self._holds(f)]
            heapq.heapify(self._flushes)

    def _holds(self, flush: tuple[float, int, Unit]) -> bool:
        """Whether a flush of the heap is still the unit's (it is unschedulable, until then)."""
        entry = self._unschedulable.get(flush[2])
        return entry is not None and entry.flush_at == flush[0]

    def _arrive(self, unit: Unit, now: float | None = None) -> None:
        """Into the active queue (keeping its place if it is there already)."""
        if unit not in self._active:
            self._active[unit] = self._arrived = self.clock() if now is None else now

    def _count(self, queue: str, event: str) -> None:
        key = (queue, event)
        self.moved[key] = self.moved.get(key, 0) + 1

    # ------------------------------------------------------------------ introspection

    def counts(self) -> tuple[int, int]:
        """(active, backing off or unschedulable) units."""
        with self._cond:
            return len(self._active), len(self._waiting) + len(self._unschedulable)

    def pending(self) -> dict[str, int]:
        """Units in each queue: active, backoff, unschedulable (not those in flight)."""
        with self._cond:
            return {ACTIVE: len(self._active), BACKOFF: len(self._waiting), UNSCHEDULABLE: len(self._unschedulable)}

    def sizes(self) -> dict[str, int]:
        """The size of each of its tables."""
        with self._cond:
            return {"queue_active": len(self._active), "queue_waiting": len(self._waiting),
                    "queue_unschedulable": len(self._unschedulable), "queue_hint_groups": len(self._by_hints),
                    "queue_flushes": len(self._flushes), "queue_attempts": len(self._attempts),
                    "queue_in_flight": len(self._in_flight), "queue_dirty": len(self._dirty),
                    "queue_events_seen": len(self._seen), "queue_moved": len(self.moved),
                    "queue_incomplete": len(self._incomplete)}

    def backoff_of(self, unit: Unit) -> float | None:
        """Seconds until the unit's backoff is over (an unschedulable unit's too: it comes back
        on an event only then); None when it is neither backing off nor unschedulable."""
        with self._cond:
            waiting = self._waiting.get(unit)
            if waiting is not None:
                return max(0.0, waiting.retry_at - self.clock())
            entry = self._unschedulable.get(unit)
            return None if entry is None else max(0.0, entry.backoff_until - self.clock())

    def is_unschedulable(self, unit: Unit) -> bool:
        """Whether the unit waits for an event (not backing off, not queued)."""
        with self._cond:
            return unit in self._unschedulable
