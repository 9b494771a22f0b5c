"""What ``kubeplace serve`` tells the cluster besides bindings: Events and PodGroup status.

- a ``core/v1`` Event per pod and decision, as kube-scheduler writes them: ``Scheduled``
  (Normal, "Successfully assigned ns/pod to node") or ``FailedScheduling`` (Warning, the reasons),
  plus the gang events ``GangTimedOut`` and ``GangBelowMinMember``. The same event for the same
  pod is not repeated within ``repeat_after`` seconds (a pod retried every few seconds would
  flood the namespace);
- the status of a PodGroup object (those whose source names a ``status_version``:
  scheduler-plugins, Volcano; ``kube.gang_sources``) through its ``status``
  subresource: ``phase`` and ``scheduled``; a timed-out gang also gets an ``Unschedulable``
  condition (Volcano's shape; a schema that does not know it drops it). A PodGroup or CRD that is
  not there (404) and CRD-free gangs are skipped.

Nothing here raises: a failed write is logged and counted, never a reason to stop scheduling.

With ``asynchronous=True`` (what ``serve`` runs) Events are written by a thread of their own, so
a binding never waits for one: at most ``qps`` a second (bursts of ``burst``), as client-go's
event broadcaster limits its writes, from a queue of at most ``queue_size`` in which Warnings
(FailedScheduling...) go before Normal ones (Scheduled), so a burst of bindings does not hold
back why pods wait; an Event that finds the queue full is dropped and counted (one warning a
minute says how many).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from kubeplace.kube.errors import ClusterError, NotFound
from kubeplace.kube.gang_sources import STATUS_APIS
from kubeplace.kube.objects import Pod, PodGroup

log = logging.getLogger("kubeplace.serve.events")

NORMAL, WARNING = "Normal", "Warning"
SCHEDULED, FAILED_SCHEDULING = "Scheduled", "FailedScheduling"
GANG_TIMED_OUT, GANG_BELOW_MIN = "GangTimedOut", "GangBelowMinMember"
MAX_MESSAGE = 1024
REMEMBERED = 50_000
"""Events remembered (to hold back repeats) at most; past it the oldest are forgotten."""
WARNINGS_FIRST, NORMAL_NEXT, LAST = 0, 1, 2
"""Order of the queued Events: Warnings, then Normal ones, then the sender's stop."""

PHASE_SCHEDULED, PHASE_SCHEDULING, PHASE_PENDING = "Scheduled", "Scheduling", "Pending"
_VERSIONS = {group: version for group, version, _ in STATUS_APIS}


class EventClient(Protocol):
    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None: ...

    def patch_object_status(self, group: str, version: str, plural: str, namespace: str, name: str,
                            status: Mapping[str, Any]) -> None: ...


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def unparsed_pod(raw: Mapping[str, Any]) -> Pod:
    """A pod that does not parse, as much of it as an Event about it names (namespace, name, uid)."""
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return Pod(str(meta.get("namespace") or "default"), str(meta.get("name") or ""), str(meta.get("uid") or ""))


class EventRecorder:
    def __init__(self, client: EventClient, component: str = "kubeplace", instance: str = "", *,
                 repeat_after: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 asynchronous: bool = False, qps: float = 100.0, burst: int = 500, queue_size: int = 10_000) -> None:
        self.client = client
        self.component = component
        self.instance = instance
        self.repeat_after = repeat_after
        self.clock = clock
        self.failures = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str, str], float] = {}
        self._outbox: queue.PriorityQueue[tuple[int, int, tuple[str, dict[str, Any], str] | None]] | None = None
        self._serial = itertools.count()
        self._sender: threading.Thread | None = None
        self._bucket = TokenBucket(qps, burst)
        self._dropped_told = (time.monotonic(), 0)
        if asynchronous:
            self._outbox = queue.PriorityQueue(queue_size)
            self._sender = threading.Thread(target=self._send_all, daemon=True, name="events")
            self._sender.start()

    def close(self, timeout: float = 5.0) -> None:
        """Sends what is queued (for at most ``timeout`` seconds) and stops the sender."""
        if self._outbox is None or self._sender is None:
            return
        with contextlib.suppress(queue.Full):
            self._outbox.put((LAST, next(self._serial), None), timeout=timeout)
        self._sender.join(timeout)

    def pod_event(self, pod: Pod, reason: str, message: str, kind: str = NORMAL) -> bool:
        """Records one event about ``pod``; False when it was a recent repeat or failed."""
        message = message[:MAX_MESSAGE]
        key = (pod.uid or pod.key, reason, message)
        now = self.clock()
        with self._lock:
            last = self._last.pop(key, None)
            if last is not None and now - last < self.repeat_after:
                self._last[key] = last
                return False
            self._forget_older(now - self.repeat_after)
            self._last[key] = now  # (re-inserted: the dict stays in time order)
        stamp = _now()
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace,
                               "name": pod.name, **({"uid": pod.uid} if pod.uid else {})},
            "reason": reason, "message": message, "type": kind,
            "source": {"component": self.component},
            "reportingComponent": self.component, "reportingInstance": self.instance or self.component,
            "action": "Binding" if reason == SCHEDULED else "Scheduling",
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        if self._outbox is None:
            return self._create(pod.namespace, event, pod.key)
        try:
            urgency = WARNINGS_FIRST if kind == WARNING else NORMAL_NEXT
            self._outbox.put_nowait((urgency, next(self._serial), (pod.namespace, event, pod.key)))
        except queue.Full:
            self._drop()
            return False
        return True

    def _forget_older(self, before: float) -> None:
        """Forgets the Events sent before ``before`` (they no longer hold back a repeat), and the
        oldest beyond ``REMEMBERED``: what a long-running scheduler keeps grows with its rate of
        Events, not with its age."""
        while self._last:
            oldest = next(iter(self._last))
            if self._last[oldest] >= before and len(self._last) < REMEMBERED:
                return
            del self._last[oldest]

    def _create(self, namespace: str, event: dict[str, Any], about: str) -> bool:
        try:
            self.client.create_event(namespace, event)
        except ClusterError as error:
            self.failures += 1
            log.warning("event %s for %s not recorded: %s", event["reason"], about, error)
            return False
        return True

    def _send_all(self) -> None:
        assert self._outbox is not None
        while (item := self._outbox.get()[2]) is not None:
            self._bucket.take()
            self._create(*item)

    def _drop(self) -> None:
        with self._lock:
            self.dropped += 1
            told_at, told = self._dropped_told
            if time.monotonic() - told_at >= 60.0:
                log.warning("events dropped: the queue is full", extra={"fields": {"dropped": self.dropped - told}})
                self._dropped_told = (time.monotonic(), self.dropped)

    def remembered(self) -> int:
        """Events remembered to hold back their repeats."""
        with self._lock:
            return len(self._last)

    def queued(self) -> int:
        """Events waiting to be sent."""
        return 0 if self._outbox is None else self._outbox.qsize()

    def pod_group_status(self, group: PodGroup, phase: str, scheduled: int, timed_out: str = "") -> bool:
        """Patches the PodGroup's status; False when skipped (CRD-free, 404) or failed."""
        version = _VERSIONS.get(group.origin)
        if version is None:
            return False
        status: dict[str, Any] = {"phase": phase, "scheduled": scheduled}
        if phase != PHASE_PENDING:
            status["scheduleStartTime"] = _now()
        if timed_out:
            status["conditions"] = [{"type": "Unschedulable", "status": "True", "reason": GANG_TIMED_OUT,
                                     "message": timed_out[:MAX_MESSAGE], "lastTransitionTime": _now(),
                                     "transitionID": self.instance or self.component}]
        try:
            self.client.patch_object_status(group.origin, version, "podgroups", group.namespace, group.name, status)
        except NotFound:
            return False
        except ClusterError as error:
            self.failures += 1
            log.warning("PodGroup %s status not written: %s", group.key, error)
            return False
        return True


class TokenBucket:
    """``take()`` waits until a token is there: ``rate`` a second, at most ``burst`` saved up."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate, self.burst, self.clock, self.sleep = rate, burst, clock, sleep
        self.tokens = float(burst)
        self.at = clock()

    def take(self) -> None:
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1.0:
            self.sleep((1.0 - self.tokens) / self.rate)
            self.tokens, self.at = 1.0, self.clock()
        self.tokens -= 1.0
