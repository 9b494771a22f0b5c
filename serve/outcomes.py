"""Per-scheduler outcomes, so that a canary split (``kubeplace webhook``) can be judged.

``kubeplace serve`` watches every pod (all of them count as usage), so it sees the other
scheduler's pods too. For every pod it sees pending it notes when; when the watch shows it bound,
or marked unschedulable by its scheduler (``PodScheduled=False``, reason ``Unschedulable``), it
counts the outcome per scheduler, and the time from first seen pending to bound, measured the same
way for both sides (``kubeplace_canary_pods{scheduler,outcome}``,
``kubeplace_canary_scheduling_seconds{scheduler}``). The other schedulers' outcomes are also
decision lines of the log (``scheduler``, ``outcome``, ``seconds``); kubeplace's own are its
binding decisions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from kubeplace.serve.prometheus import LATENCY_BUCKETS

DEFAULT_SCHEDULER = "default-scheduler"
SCHEDULERS_COUNTED = 16
"""Schedulers with series of their own in the metrics; the pods of any further scheduler name
(any pod may name any scheduler) count under ``OTHER`` (their decision lines keep the name)."""
OTHER = "other"
RawObject = Mapping[str, Any]
Decision = Callable[..., None]


def _unschedulable(raw: RawObject) -> bool:
    conditions = (raw.get("status") or {}).get("conditions") or []
    return any(isinstance(c, Mapping) and c.get("type") == "PodScheduled" and c.get("status") == "False"
               and c.get("reason") == "Unschedulable" for c in conditions)


class SchedulerOutcomes:
    """Pods seen pending, by key: (scheduler, first seen, reported unschedulable yet)."""

    def __init__(self, ours: str, registry: CollectorRegistry, decision: Decision,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ours, self.decision, self.clock = ours, decision, clock
        self.pods = Counter("kubeplace_canary_pods", "Pods seen bound or unschedulable, by their scheduler.",
                            ["scheduler", "outcome"], registry=registry)
        self.latency = Histogram("kubeplace_canary_scheduling_seconds",
                                 "From first seen pending to seen bound, by scheduler.", ["scheduler"],
                                 buckets=LATENCY_BUCKETS, registry=registry)
        self._pending: dict[str, tuple[str, float, bool]] = {}
        self._lock = threading.Lock()
        self._counted: set[str] = {ours, DEFAULT_SCHEDULER}
        """Scheduler names with metric series of their own (at most ``SCHEDULERS_COUNTED``)."""

    def _label(self, scheduler: str) -> str:
        """The scheduler's label value in the metrics (the lock held)."""
        if scheduler not in self._counted and len(self._counted) < SCHEDULERS_COUNTED:
            self._counted.add(scheduler)
        return scheduler if scheduler in self._counted else OTHER

    def seen(self, key: str, event: str, raw: RawObject | None) -> None:
        """One watch event of pod ``key`` (its new state, or the old one when deleted)."""
        if raw is None:
            return
        spec = raw.get("spec") or {}
        scheduler = str(spec.get("schedulerName") or DEFAULT_SCHEDULER)
        with self._lock:
            known = self._pending.get(key)
            label = self._label(scheduler)
            if event == "DELETED":
                self._pending.pop(key, None)
                return
            if not spec.get("nodeName"):
                first = known[1] if known else self.clock()
                report = _unschedulable(raw) and not (known and known[2])
                self._pending[key] = (scheduler, first, bool(known and known[2]) or report)
            else:
                self._pending.pop(key, None)
                report = False
        if spec.get("nodeName") and known is not None:
            seconds = max(0.0, self.clock() - known[1])
            self.pods.labels(label, "bound").inc()
            self.latency.labels(label).observe(seconds)
            if scheduler != self.ours:
                self.decision(pod=key, scheduler=scheduler, node=spec.get("nodeName"), outcome="bound",
                              seconds=round(seconds, 3))
        elif report:
            self.pods.labels(label, "unschedulable").inc()
            if scheduler != self.ours:
                self.decision(pod=key, scheduler=scheduler, outcome="unschedulable")

    def sizes(self) -> dict[str, int]:
        with self._lock:
            return {"outcomes_pending": len(self._pending)}

    def waited(self, key: str) -> float | None:
        """Seconds pod ``key`` has been seen pending (None: not seen pending)."""
        with self._lock:
            known = self._pending.get(key)
        return None if known is None else max(0.0, self.clock() - known[1])
