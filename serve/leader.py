"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it.

Every ``retry_period`` seconds each replica reads the Lease. The holder renews it (``renewTime``);
another replica takes it over only when it is free (no holder: released) or when its record has
not changed for ``leaseDurationSeconds`` by the replica's own clock (never by comparing clocks
across machines). Every write carries the ``resourceVersion`` read, so two replicas can never
both win: the second gets 409 Conflict.

:meth:`LeaderElector.is_leader` is what binding checks before *every* binding: it is true only
while the last successful renewal is less than ``renew_deadline`` old, so a leader that cannot
renew stops binding before anyone else may take the lease (``renew_deadline < lease_duration``),
and one that learns it lost the lease stops at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from kubeplace.kube.errors import ClusterError, Conflict, NotFound

RawObject = dict[str, Any]
log = logging.getLogger("kubeplace.serve.leader")


class LeaseClient(Protocol):
    """What election needs from :class:`kube.client.Cluster` (tests pass a fake)."""

    def read_lease(self, namespace: str, name: str) -> RawObject: ...

    def write_lease(self, namespace: str, lease: RawObject, create: bool) -> RawObject: ...


def micro_time(moment: datetime | None = None) -> str:
    """A Kubernetes MicroTime: RFC 3339 with microseconds, UTC."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, client: LeaseClient, namespace: str, name: str, identity: str, *,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[bool], None] | None = None) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.on_change = on_change
        self.holder = ""
        """The holder named by the lease as last read ("" when free or unknown)."""
        self._lock = threading.Lock()
        self._renewed_at: float | None = None  # our last successful write, while we hold it
        self._observed: tuple[str, str] = ("", "")  # (holder, renewTime) as last read
        self._observed_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._leading = False  # as last reported to on_change

    def is_leader(self) -> bool:
        with self._lock:
            return self._renewed_at is not None and self.clock() - self._renewed_at < self.renew_deadline

    def try_acquire_or_renew(self) -> bool:
        """One election step; True when this replica holds the lease afterwards."""
        was = self._leading
        try:
            held = self._step()
        except ClusterError as error:
            log.warning("lease %s/%s: %s", self.namespace, self.name, error)
            held = self.is_leader()  # keeps leading until the renew deadline passes
        if not held:
            with self._lock:
                self._renewed_at = None
        self._leading = held
        if held != was:
            log.info("lease %s/%s: %s", self.namespace, self.name, "acquired" if held else "lost")
            if self.on_change is not None:
                self.on_change(held)
        return held

    def _step(self) -> bool:
        now = self.clock()
        try:
            lease = self.client.read_lease(self.namespace, self.name)
        except NotFound:
            return self._write(None, transitions=0)
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        self.holder = holder
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now - self._observed_at < duration:
            return False  # someone else holds a lease that is still valid
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        return self._write(lease, transitions)

    def _write(self, lease: RawObject | None, transitions: int) -> bool:
        started = self.clock()
        now = micro_time()
        spec = dict((lease or {}).get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=max(1, round(self.lease_duration)),
                    renewTime=now, leaseTransitions=transitions)
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if lease is not None:
            metadata["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion", "")
        try:
            self.client.write_lease(self.namespace, {"metadata": metadata, "spec": spec}, lease is None)
        except Conflict:
            return False  # another replica wrote it first
        with self._lock:
            self._renewed_at = started
        self.holder = self.identity
        self._observed, self._observed_at = (self.identity, now), started
        return True

    def release(self) -> None:
        """Gives the lease up (holder cleared) so that another replica takes it at once."""
        with self._lock:
            held, self._renewed_at = self._renewed_at is not None, None
        was, self._leading = self._leading, False
        if not held:
            if was and self.on_change is not None:
                self.on_change(False)
            return
        try:
            lease = self.client.read_lease(self.namespace, self.name)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=micro_time())
            meta = {"name": self.name, "namespace": self.namespace,
                    "resourceVersion": (lease.get("metadata") or {}).get("resourceVersion", "")}
            self.client.write_lease(self.namespace, {"metadata": meta, "spec": spec}, False)
            log.info("lease %s/%s: released", self.namespace, self.name)
        except ClusterError as error:
            log.warning("lease %s/%s: release failed: %s", self.namespace, self.name, error)
        if was and self.on_change is not None:
            self.on_change(False)

    def run(self) -> None:
        while not self._stop.is_set():
            self.try_acquire_or_renew()
            self._stop.wait(self.retry_period)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, daemon=True, name="leader-election")
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        """Stops electing; ``release`` gives the lease up (a clean shutdown), otherwise it
        simply expires (as when the process is killed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.renew_deadline)
        if release:
            self.release()
        else:
            with self._lock:
                self._renewed_at = None


class AlwaysLeader:
    """For a single replica run without election (``--lease-name ''``)."""

    def is_leader(self) -> bool:
        return True
