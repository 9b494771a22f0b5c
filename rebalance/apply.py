"""Carrying out moves: evictions through the Eviction API, in small waves, one run at a time.

- A Lease (coordination.k8s.io/v1, ``kubeplace-rebalance`` in the lease namespace) is taken
  first, so two runs never evict at once; it is renewed between waves and released at the end.
- Before each wave the wave's pods are read again: each must still exist with the planned uid,
  on the planned node, not being deleted, and its target node must still exist; at the first
  sign that the cluster no longer matches the plan the run stops and says why.
- 429 (a PodDisruptionBudget forbids it now) is reported and never retried in the run; 404: the
  pod is gone; 409: it was replaced (uid precondition). Any other error stops the run.
- Every outcome is written to ``report_path`` as it happens, so an interrupted run (Ctrl-C,
  SIGTERM) leaves a report of what was moved.
- Evicted pods are recreated by their controllers and placed by their scheduler; kubeplace cannot
  write to pods, so the targets of pods scheduled by kubeplace are written to the ConfigMap
  ``kubeplace-rebalance-targets`` (with an expiry) for ``kubeplace serve`` to honour later.
- A dry run touches nothing at all: no lease, no eviction, no ConfigMap.
"""

from __future__ import annotations

import datetime
import json
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubeplace.kube.errors import ClusterError, Conflict, DisruptionBudget, NotFound
from kubeplace.rebalance.cluster_state import ClusterState
from kubeplace.rebalance.solve_moves import Move
from kubeplace.rebalance.targets import TARGETS_CONFIGMAP

LEASE_NAME = "kubeplace-rebalance"
LEASE_SECONDS = 300
LEASE_RENEW_SECONDS = LEASE_SECONDS // 5
"""How often a held Lease is renewed during a long wait: a write a minute, well inside its 300 s."""
TARGETS_TTL_SECONDS = 3600

EVICTED = "evicted"
SKIPPED_PDB = "skipped (PodDisruptionBudget)"
GONE = "gone"
REPLACED = "replaced"
FAILED = "failed"
NOT_RUN = "not run"
PLANNED = "planned (dry run)"


class LeaseHeld(ClusterError):
    """Another rebalance holds the lease."""

    kind = "lease_held"


@dataclass
class Outcome:
    move: Move
    outcome: str
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**self.move.to_dict(), "outcome": self.outcome, "message": self.message}


@dataclass
class ApplyReport:
    outcomes: list[Outcome] = field(default_factory=list)
    dry_run: bool = True
    stopped: str = ""
    interrupted: bool = False
    targets_configmap: str = ""

    @property
    def evicted(self) -> int:
        return sum(o.outcome == EVICTED for o in self.outcomes)

    @property
    def complete(self) -> bool:
        return all(o.outcome in (EVICTED, PLANNED) for o in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "evicted": self.evicted, "stopped": self.stopped,
                "interrupted": self.interrupted, "targets_configmap": self.targets_configmap,
                "results": [o.to_dict() for o in self.outcomes]}


def with_owners(moves: Sequence[Move], state: ClusterState) -> list[Move]:
    """Moves with ``owner`` as KIND/NAME (what a replacement pod shares with the evicted one)."""
    out = []
    for m in moves:
        f = state.facts.get(f"{m.namespace}/{m.name}")
        out.append(replace(m, owner=f"{f.owner_kind}/{f.owner_name}" if f else m.owner))
    return out


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _stamp(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    text = text.rstrip("Z").split("+")[0]
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.UTC)
        except ValueError:
            continue
    return None


def _until(held: dict[str, Any]) -> datetime.datetime | None:
    """When a Lease's spec expires (renewTime + leaseDurationSeconds), None without a renewTime."""
    renewed = _parse(held.get("renewTime"))
    return renewed + datetime.timedelta(seconds=int(held.get("leaseDurationSeconds") or 0)) if renewed else None


def default_holder() -> str:
    """This run's identity in the Lease: host and start time."""
    return f"{socket.gethostname()}-{int(time.time())}"


class Lease:
    def __init__(self, cluster: Any, namespace: str, holder: str) -> None:
        self.cluster, self.namespace, self.holder = cluster, namespace, holder
        self.obj: dict[str, Any] | None = None
        self.renewed = 0.0
        """When it was last written (``time.monotonic``)."""

    def acquire(self) -> None:
        now = _now()
        spec = {"holderIdentity": self.holder, "leaseDurationSeconds": LEASE_SECONDS,
                "acquireTime": _stamp(now), "renewTime": _stamp(now)}
        try:
            current = self.cluster.read_lease(self.namespace, LEASE_NAME)
        except NotFound:
            try:
                self.obj = self.cluster.write_lease(self.namespace, {"metadata": {"name": LEASE_NAME}, "spec": spec},
                                                    create=True)
            except Conflict:  # created meanwhile by another run
                raise self._held(None, now) from None
            self.renewed = time.monotonic()
            return
        held = current.get("spec") or {}
        if self._holds(held, now):
            raise self._held(current, now)
        try:
            self.obj = self.cluster.write_lease(self.namespace, {**current, "spec": spec}, create=False)
        except Conflict:
            raise self._held(None, now) from None
        self.renewed = time.monotonic()

    def _holds(self, held: dict[str, Any], now: datetime.datetime) -> bool:
        """Another holder's lease that has not expired."""
        until = _until(held)
        holder = held.get("holderIdentity")
        return bool(holder) and holder != self.holder and until is not None and until > now

    def _held(self, current: dict[str, Any] | None, now: datetime.datetime) -> LeaseHeld:
        """LeaseHeld naming the holder, in one line; ``current`` None: read again (it was taken meanwhile)."""
        if current is None:
            try:
                current = self.cluster.read_lease(self.namespace, LEASE_NAME)
            except ClusterError:
                current = {}
        held = (current or {}).get("spec") or {}
        until = _until(held)
        holder = str(held.get("holderIdentity") or "another run")
        return LeaseHeld(f"another rebalance is running: lease {self.namespace}/{LEASE_NAME} is held by {holder}"
                         + (f" until {_stamp(until)}" if until else "") + "; nothing was written")

    def renew(self) -> None:
        """ClusterError (Conflict) when another run took it meanwhile."""
        if self.obj is not None:
            self.obj["spec"]["renewTime"] = _stamp(_now())
            self.obj = self.cluster.write_lease(self.namespace, self.obj, create=False)
            self.renewed = time.monotonic()

    def renew_due(self) -> None:
        """Renews it once a fifth of its duration has passed since it was last written: held
        through a long wait (new nodes launching) at a write a minute, not one a poll."""
        if time.monotonic() - self.renewed >= LEASE_RENEW_SECONDS:
            self.renew()

    def release(self) -> None:
        if self.obj is not None:
            self.obj["spec"] = {**self.obj["spec"], "holderIdentity": None, "leaseDurationSeconds": 1}
            self.cluster.write_lease(self.namespace, self.obj, create=False)
            self.obj = None


def _mismatch(cluster: Any, wave: Sequence[Move], nodes: set[str]) -> str:
    """Why the cluster no longer matches the plan for this wave, or ""."""
    for m in wave:
        if m.target not in nodes:
            return f"target node {m.target} of {m.namespace}/{m.name} is gone"
        try:
            pod = cluster.read_pod(m.namespace, m.name)
        except NotFound:
            return f"pod {m.namespace}/{m.name} is gone"
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if m.uid and meta.get("uid") != m.uid:
            return f"pod {m.namespace}/{m.name} was replaced (uid {meta.get('uid')}, planned {m.uid})"
        if spec.get("nodeName") != m.source:
            return f"pod {m.namespace}/{m.name} is on {spec.get('nodeName') or 'no node'}, planned {m.source}"
        if meta.get("deletionTimestamp"):
            return f"pod {m.namespace}/{m.name} is being deleted"
    return ""


def apply_moves(cluster: Any, moves: Sequence[Move], *, dry_run: bool = True, wave_size: int = 1,
                lease_namespace: str = "kubeplace-system", holder: str = "",
                report_path: Path | None = None, pause: float = 0.0,
                on_outcome: Callable[[Outcome], None] | None = None, lease: Lease | None = None) -> ApplyReport:
    """``lease``: one the caller holds already (a consolidation takes it before its first write),
    renewed here and left to the caller to release; without it the Lease is taken here, before the
    first eviction, and released."""
    report = ApplyReport([Outcome(m, PLANNED if dry_run else NOT_RUN) for m in moves], dry_run)
    if dry_run or not moves:
        return report
    if lease is not None:
        _apply_held(cluster, report, max(1, wave_size), lease, report_path, pause, on_outcome, lease_namespace)
        return report
    lease = Lease(cluster, lease_namespace, holder or default_holder())
    lease.acquire()
    try:
        _apply_held(cluster, report, max(1, wave_size), lease, report_path, pause, on_outcome, lease_namespace)
    finally:
        lease.release()
    return report


def _apply_held(cluster: Any, report: ApplyReport, wave_size: int, lease: Lease, report_path: Path | None,
                pause: float, on_outcome: Callable[[Outcome], None] | None, lease_namespace: str) -> None:
    """The waves under a Lease held; the targets ConfigMap and the report written whatever happens."""
    try:
        _run_waves(cluster, report, wave_size, lease, report_path, pause, on_outcome)
    except KeyboardInterrupt:
        report.interrupted = True
        report.stopped = "interrupted"
    finally:
        try:
            report.targets_configmap = _write_targets(cluster, report, lease_namespace)
        finally:
            _save(report, report_path)


def _run_waves(cluster: Any, report: ApplyReport, wave_size: int, lease: Lease, report_path: Path | None,
               pause: float, on_outcome: Callable[[Outcome], None] | None) -> None:
    outcomes = report.outcomes
    for start in range(0, len(outcomes), wave_size):
        wave = outcomes[start:start + wave_size]
        if start:
            lease.renew()
            if pause:
                time.sleep(pause)
        nodes = {n["metadata"]["name"] for n in cluster.list_nodes()}
        why = _mismatch(cluster, [o.move for o in wave], nodes)
        if why:
            report.stopped = f"the cluster no longer matches the plan: {why}"
            return
        for o in wave:
            m = o.move
            try:
                cluster.evict(m.namespace, m.name, m.uid)
                o.outcome = EVICTED
            except DisruptionBudget as e:
                o.outcome, o.message = SKIPPED_PDB, str(e)
            except NotFound as e:
                o.outcome, o.message = GONE, str(e)
            except Conflict as e:
                o.outcome, o.message = REPLACED, str(e)
            except ClusterError as e:
                o.outcome, o.message = FAILED, str(e)
                report.stopped = f"eviction failed: {e}"
            _save(report, report_path)
            if on_outcome is not None:
                on_outcome(o)
            if report.stopped:
                return


def _write_targets(cluster: Any, report: ApplyReport, namespace: str) -> str:
    """The targets of evicted pods that kubeplace schedules, for ``kubeplace serve``."""
    ours = [o.move for o in report.outcomes if o.outcome == EVICTED and o.move.scheduler_name == "kubeplace"]
    if not ours:
        return ""
    expires = _stamp(_now() + datetime.timedelta(seconds=TARGETS_TTL_SECONDS))
    entries = [{"namespace": m.namespace, "evicted": m.name, "owner": m.owner, "from": m.source, "to": m.target}
               for m in ours]
    cluster.write_config_map(namespace, TARGETS_CONFIGMAP, {"targets.json": json.dumps(entries, indent=1),
                                                            "expires": expires})
    return f"{namespace}/{TARGETS_CONFIGMAP}"


def _save(report: ApplyReport, path: Path | None) -> None:
    if path is not None:
        path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
