"""The scheduling queue: which units (a pod, or a whole gang) the next cycle plans.

A unit enters the *active* queue when its first pod is seen pending. :meth:`SchedulingQueue.pop_batch`
waits for the first active unit, then for ``window`` seconds more, until ``size`` units are
active, or until no unit arrived for ``quiet`` seconds (a backlog is handed over at once, a lone
arrival after ``quiet``), and hands them over together, oldest first. A unit that could not be placed goes to the
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

    # ------------------------------------------------------------------ producers (informer events)

    def add(self, unit: Unit) -> None:
        """A pending pod of ``unit`` was seen; a unit already queued, backing off or being
        planned keeps its place."""
        with self._cond:
            if unit in self._in_flight:
                self._dirty.add(unit)
            elif unit not in self._active and unit not in self._waiting:
                self._active[unit] = self._arrived = self.clock()
                self._cond.notify_all()

    def activate(self, unit: Unit) -> None:
        """Something changed for this unit (a gang member arrived): retry it now."""
        with self._cond:
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
                  timeout: float | None = None, quiet: float | None = None) -> list[Unit]:
        """The next batch, oldest first; [] when ``timeout`` passes or ``stop`` is set first."""
        give_up = None if timeout is None else self.clock() + timeout
        with self._cond:
            while True:
                self._flush_due()
                if stop is not None and stop.is_set():
                    return []
                if self._active:
                    wake = self._batch_due(window, size, quiet)
                    if self.clock() >= wake:
                        return self._take(size)
                else:
                    wake = min((w.retry_at for w in self._waiting.values()), default=self.clock() + 1.0)
                if give_up is not None:
                    if self.clock() >= give_up:
                        return []  # (a batch still open stays queued for the next call)
                    wake = min(wake, give_up)
                self._cond.wait(min(1.0, max(0.001, wake - self.clock())))

    def next_due(self, window: float, size: int, quiet: float | None = None) -> float | None:
        """When :meth:`pop_batch` with these arguments would next hand over a batch if nothing
        else arrived (a backoff ending counts); None when the queue is empty. ``kubeplace
        simulate`` jumps its simulated clock there instead of waiting."""
        with self._cond:
            times = [w.retry_at for w in self._waiting.values()]
            if self._active:
                times.append(self._batch_due(window, size, quiet))
            return min(times, default=None)

    def _batch_due(self, window: float, size: int, quiet: float | None) -> float:
        """When the active units make a batch: now when there are ``size``, else ``window`` after
        the oldest, or ``quiet`` after the newest if that is sooner (the lock held, units active)."""
        if len(self._active) >= size:
            return self.clock()
        close = min(self._active.values()) + window
        return close if quiet is None else min(close, self._arrived + quiet)

    def wake(self) -> None:
        """Wakes a waiting :meth:`pop_batch` (after ``stop`` was set)."""
        with self._cond:
            self._cond.notify_all()

    def _take(self, size: int) -> list[Unit]:
        units = list(self._active)[:size]
        for unit in units:
            del self._active[unit]
        self._in_flight.update(units)
        return units

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
                    "queue_dirty": len(self._dirty), "queue_stale": len(self._stale)}

    def backoff_of(self, unit: Unit) -> float | None:
        """Seconds until the unit is retried; None when it is not backing off."""
        with self._cond:
            waiting = self._waiting.get(unit)
            return None if waiting is None else max(0.0, waiting.retry_at - self.clock())
