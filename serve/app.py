"""One ``kubeplace serve`` replica wired together: informer -> scheduler <- leader election.

``cli/serve.py`` runs one in the foreground; the e2e tests run two in threads of one process.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from kubeplace.kube.client import Cluster
from kubeplace.kube.live import live_metrics
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.events import EventRecorder
from kubeplace.serve.informer import RESOURCES, Informer, Watched
from kubeplace.serve.leader import AlwaysLeader, LeaderElector
from kubeplace.serve.loop import LeaderCheck, Scheduler
from kubeplace.serve.prometheus import Metrics
from kubeplace.serve.settings import ServeSettings

log = logging.getLogger("kubeplace.serve")
DISRUPTION_BUDGETS = Watched("policy/v1/poddisruptionbudgets")
"""Watched only when preempting: preemption weighs the budgets a victim would break."""


@dataclass(frozen=True)
class LeaseSettings:
    name: str = "kubeplace"
    """The Lease's name; "" runs without leader election (one replica only!)."""
    namespace: str = "kubeplace-system"
    duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def default_identity() -> str:
    """``hostname_<random>``, as client-go's examples build it; unique per process."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class Service:
    def __init__(self, cluster: Cluster, config: Configuration, profile: Profile, solver: SolverSettings,
                 settings: ServeSettings, lease: LeaseSettings = LeaseSettings(), identity: str = "",
                 metrics: Metrics | None = None, watch_seconds: int = 60, measured: bool = True) -> None:
        self.identity = identity or default_identity()
        self.metrics = metrics or Metrics()
        self.elector: LeaderElector | None = None
        leader: LeaderCheck = AlwaysLeader()
        if lease.name:
            self.elector = LeaderElector(cluster, lease.namespace, lease.name, self.identity,
                                         lease_duration=lease.duration, renew_deadline=lease.renew_deadline,
                                         retry_period=lease.retry_period, on_change=self._leadership)
            leader = self.elector
        recorder = EventRecorder(cluster, "kubeplace", self.identity, asynchronous=True)
        resources = (*RESOURCES, DISRUPTION_BUDGETS) if settings.preempt else RESOURCES
        self.informer = Informer(cluster, resources=resources, watch_seconds=watch_seconds)
        self.scheduler = Scheduler(cluster, self.informer.store, config, profile, solver, settings,
                                   leader=leader, recorder=recorder, metrics=self.metrics,
                                   usage_source=(lambda: live_metrics(cluster)) if measured else None)
        self.informer.on_change = self.scheduler.on_change
        self.stop_event = self.scheduler.stop_event
        self._thread: threading.Thread | None = None

    def _leadership(self, leading: bool) -> None:
        log.info("leadership", extra={"fields": {"identity": self.identity, "leader": leading}})
        self.metrics.leader.set(1 if leading else 0)
        self.scheduler.queue.wake()

    def start_watching(self, sync_timeout: float = 60.0) -> bool:
        """Starts the informer and election; True when every resource was listed in time. While
        the informer lists, one tiny plan is made so that the first real cycle does not pay for
        loading the solver (1-2 s)."""
        self.informer.start()
        self.scheduler.warm_up()
        synced = self.informer.wait_synced(sync_timeout)
        if self.elector is not None:
            self.elector.start()
        return synced

    def run(self) -> None:
        """Schedules until :meth:`stop`; blocks."""
        self.scheduler.run(self.stop_event)

    def start(self, sync_timeout: float = 60.0) -> None:
        """Everything in background threads (tests)."""
        self.start_watching(sync_timeout)
        self._thread = threading.Thread(target=self.run, daemon=True, name=f"scheduler-{self.identity}")
        self._thread.start()

    def stop(self, release: bool = True, timeout: float = 30.0) -> None:
        """Stops binding at the next binding boundary, then election (``release``: give the
        lease up; otherwise it expires, as after a crash) and the informer."""
        self.stop_event.set()
        self.scheduler.queue.wake()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.elector is not None:
            self.elector.stop(release=release)
        self.informer.stop()
        self.scheduler.close()

    def status(self) -> dict[str, Any]:
        return {"identity": self.identity, "leader": self.scheduler.leader.is_leader(),
                "queue": self.scheduler.queue.pending()}
