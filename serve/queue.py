"""The scheduling queue: which units (a pod, or a whole gang) the next cycle plans.

A unit enters the *active* queue when its first pod is seen pending. A gang is *complete* once
its minMember pods exist (the intake says, :class:`serve.gang_members.GangMembers`); until then it
waits for its members. :meth:`SchedulingQueue.pop_batch` hands over the active units together,
oldest first, when

- ``size`` complete units are active;
- the oldest complete unit has waited the *adaptive window*: ``per_unit`` seconds for each
  other complete unit waiting with it, at most ``window`` (latency that follows the load: a lone
  unit in an idle queue, a gang as soon as its last member arrived, is handed over at once; a
  backlog waits a little for more to join its joint plan, never more than ``window``);
- a gang still incomplete has waited ``window`` (it is planned, and reported waiting);
- or no unit arrived for ``quiet`` seconds (arrivals paused: what is there is all there is), for
  the complete units.

An incomplete gang rides along only when it is due itself: a gang whose members are still being
created (a slow API server, a busy controller) is not planned half there. Without ``per_unit``
the window is fixed, as it was (``kubeplace simulate``'s): a batch closes ``window`` after its
oldest unit, ``quiet`` after the newest arrival or at ``size`` units, and takes every unit,
complete or not. A unit that could not be placed goes to the
*unschedulable* queue with an exponential backoff (``initial``, doubled per failed attempt, at most
``maximum`` seconds, however many attempts: :func:`serve.backoff.doubling`) and comes back by
itself when it is over; a change in the cluster that may
make it placeable (a node added or updated, a pod deleted, a member of its gang added) brings it
back at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubeplace.kube.objects import GangKey
from kubeplace.serve.backoff import doubling

Unit = GangKey | str
"""What one cycle plans and binds together: a whole gang, or one pod by its key ``namespace/name``."""


@dataclass
class _Waiting:
    attempts: int
    retry_at: float
    reason: str


def adaptive_window(window: float, per_unit: float | None, units: int) -> float:
    """How long the oldest of ``units`` complete units waits for others to join its batch:
    ``per_unit`` for each other unit waiting (none for a lone unit), at most ``window``; always
    ``window`` without ``per_unit``."""
    if per_unit is None:
        return window
    return min(window, per_unit * max(0, units - 1))


class SchedulingQueue:
    def __init__(self, *, initial: float = 1.0, maximum: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.initial = initial
        self.maximum = maximum
        self.clock = clock
        self._cond = threading.Condition()
        self._active: dict[Unit, float] = {}  # unit -> since when (insertion order = arrival order)
        self._waiting: dict[Unit, _Waiting] = {}
        self._attempts: dict[Unit, int] = {}
        self._in_flight: set[Unit] = set()
        self._dirty: set[Unit] = set()  # in flight when something changed for them: no backoff
        self._stale: set[Unit] = set()
        """In flight when the cluster changed: retried at once if not placed (its plan may be
        stale), but not planned again once bound (nothing of it is left to place)."""
        self._arrived = float("-inf")  # when the newest unit entered the active queue
        self._incomplete: set[Unit] = set()
        """Gangs whose minMember pods do not all exist yet, wherever they are (active, backing
        off, planned): they wait for their members, not for the batch."""

    # ------------------------------------------------------------------ producers (informer events)

    def add(self, unit: Unit, complete: bool = True) -> None:
        """A pending pod of ``unit`` was seen; a unit already queued, backing off or being
        planned keeps its place. ``complete``: False for a gang whose members do not all exist yet."""
        with self._cond:
            self._mark(unit, complete)
            if unit in self._in_flight:
                self._dirty.add(unit)
            elif unit not in self._active and unit not in self._waiting:
                self._active[unit] = self._arrived = self.clock()
                self._cond.notify_all()

    def activate(self, unit: Unit, complete: bool = True) -> None:
        """Something changed for this unit (a gang member arrived): retry it now."""
        with self._cond:
            self._mark(unit, complete)
            if unit in self._in_flight:
                self._dirty.add(unit)
                return
            self._waiting.pop(unit, None)
            self._arrive(unit)
            self._cond.notify_all()

    def cluster_changed(self) -> int:
        """Moves every unschedulable unit to the active queue; returns how many moved."""
        with self._cond:
            now = self.clock()
            moved = len(self._waiting)
            self._stale.update(self._in_flight)
            for unit in self._waiting:
                self._arrive(unit, now)
            self._waiting.clear()
            if moved:
                self._cond.notify_all()
            return moved

    def forget(self, unit: Unit) -> None:
        """The unit has no pending pod any more (bound, deleted)."""
        with self._cond:
            self._incomplete.discard(unit)
            self._active.pop(unit, None)
            self._waiting.pop(unit, None)
            self._attempts.pop(unit, None)
            self._in_flight.discard(unit)
            self._dirty.discard(unit)
            self._stale.discard(unit)

    # ------------------------------------------------------------------ the cycle's answers

    def done(self, unit: Unit) -> None:
        """Planned and bound: out of the queue, its attempts forgotten."""
        with self._cond:
            self._in_flight.discard(unit)
            self._attempts.pop(unit, None)
            self._stale.discard(unit)
            if unit not in self._dirty:
                self._incomplete.discard(unit)
            if unit in self._dirty:  # e.g. a gang member that arrived while its gang was bound
                self._dirty.discard(unit)
                self._arrive(unit)
                self._cond.notify_all()

    def requeue(self, unit: Unit) -> None:
        """Not finished (binding interrupted, a gang member failed): plan it again next cycle."""
        with self._cond:
            self._in_flight.discard(unit)
            self._dirty.discard(unit)
            self._stale.discard(unit)
            self._waiting.pop(unit, None)
            self._arrive(unit)
            self._cond.notify_all()

    def unschedulable(self, unit: Unit, reason: str = "") -> float:
        """Could not be placed: backs off; returns the backoff in seconds."""
        with self._cond:
            self._in_flight.discard(unit)
            attempts = self._attempts.get(unit, 0) + 1
            self._attempts[unit] = attempts
            backoff = doubling(attempts, self.initial, self.maximum)
            self._active.pop(unit, None)
            if unit in self._dirty or unit in self._stale:  # it changed while planned: retry at once
                self._dirty.discard(unit)
                self._stale.discard(unit)
                self._active[unit] = self._arrived = self.clock()
                self._cond.notify_all()
                return 0.0
            self._waiting[unit] = _Waiting(attempts, self.clock() + backoff, reason)
            return backoff

    # ------------------------------------------------------------------ the consumer

    def pop_batch(self, window: float, size: int, stop: threading.Event | None = None,
                  timeout: float | None = None, quiet: float | None = None,
                  per_unit: float | None = None) -> list[Unit]:
        """The next batch, oldest first; [] when ``timeout`` passes or ``stop`` is set first.
        ``per_unit``: the adaptive window (see the module's docstring); None: a fixed ``window``."""
        give_up = None if timeout is None else self.clock() + timeout
        with self._cond:
            while True:
                self._flush_due()
                if stop is not None and stop.is_set():
                    return []
                if self._active:
                    wake = self._batch_due(window, size, quiet, per_unit)
                    if self.clock() >= wake:
                        return self._take(window, size, per_unit is not None)
                else:
                    wake = min((w.retry_at for w in self._waiting.values()), default=self.clock() + 1.0)
                if give_up is not None:
                    if self.clock() >= give_up:
                        return []  # (a batch still open stays queued for the next call)
                    wake = min(wake, give_up)
                self._cond.wait(min(1.0, max(0.001, wake - self.clock())))

    def next_due(self, window: float, size: int, quiet: float | None = None,
                 per_unit: float | None = None) -> float | None:
        """When :meth:`pop_batch` with these arguments would next hand over a batch if nothing
        else arrived (a backoff ending counts); None when the queue is empty. ``kubeplace
        simulate`` jumps its simulated clock there instead of waiting."""
        with self._cond:
            times = [w.retry_at for w in self._waiting.values()]
            if self._active:
                times.append(self._batch_due(window, size, quiet, per_unit))
            return min(times, default=None)

    def _batch_due(self, window: float, size: int, quiet: float | None, per_unit: float | None) -> float:
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
            due = oldest + adaptive_window(window, per_unit, complete)
        if waiting:
            due = min(due, min(self._active[unit] for unit in waiting) + window)
        return due if quiet is None or not complete else min(due, self._arrived + quiet)

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
        self._in_flight.update(units)
        return units

    def _mark(self, unit: Unit, complete: bool) -> None:
        if complete:
            self._incomplete.discard(unit)
        else:
            self._incomplete.add(unit)

    def _flush_due(self) -> None:
        now = self.clock()
        for unit in [u for u, w in self._waiting.items() if w.retry_at <= now]:
            del self._waiting[unit]
            self._arrive(unit, now)

    def _arrive(self, unit: Unit, now: float | None = None) -> None:
        """Into the active queue (keeping its place if it is there already)."""
        if unit not in self._active:
            self._active[unit] = self._arrived = self.clock() if now is None else now

    # ------------------------------------------------------------------ introspection

    def counts(self) -> tuple[int, int]:
        """(active, unschedulable) units."""
        with self._cond:
            return len(self._active), len(self._waiting)

    def sizes(self) -> dict[str, int]:
        """The size of each of its tables."""
        with self._cond:
            return {"queue_active": len(self._active), "queue_waiting": len(self._waiting),
                    "queue_attempts": len(self._attempts), "queue_in_flight": len(self._in_flight),
                    "queue_dirty": len(self._dirty), "queue_stale": len(self._stale),
                    "queue_incomplete": len(self._incomplete)}

    def backoff_of(self, unit: Unit) -> float | None:
        """Seconds until the unit is retried; None when it is not backing off."""
        with self._cond:
            waiting = self._waiting.get(unit)
            return None if waiting is None else max(0.0, waiting.retry_at - self.clock())
