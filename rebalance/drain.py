"""Carrying out a consolidation (``rebalance --consolidate --apply``): take the
``kubeplace-rebalance`` Lease before anything is written (a second run, the CronJob's or a
person's, stops there and says who holds it); with ``--replace``, create the answer's new nodes
as NodeClaims and wait until each is initialized (``plan.new_nodes``, as ``plan --provision
--apply`` does; replace before delete; the Lease renewed while waiting); cordon the nodes to
remove, evict their pods in waves exactly as a rebalance does (``rebalance.apply``: the re-check
before each wave, PodDisruptionBudgets answered with 429 never retried), then remove each node
whose pods were all evicted through its owner (``rebalance.ownership``): its NodeClaim deleted
(Karpenter then drains and terminates it); its Cluster API Machine annotated
``cluster.x-k8s.io/delete-machine`` and its MachineDeployment scaled down by the nodes it loses
(its MachineSet deletes that Machine); the node of another opted-in group left drained and
cordoned, with the command that removes its machine from the group. A Node object is never
deleted: its machine would keep running. A node that keeps a pod is uncordoned and kept. Every
step is reported node by node and pod by pod; a failure half-way stops the run and says where.

When a new node is not initialized within the timeout (or its claim is refused or deleted by
Karpenter, or the Lease is lost while waiting), nothing is cordoned or evicted, and every
NodeClaim the run created is deleted: no new node is left paid for and unused. Once the drain is
done (or stopped), the new nodes lose their ``karpenter.sh/do-not-disrupt`` annotation and
Karpenter may consolidate them as any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubeplace.kube.errors import ClusterError, NotFound
from kubeplace.kube.objects import Snapshot
from kubeplace.plan.new_nodes import (
    Arrival,
    Say,
    allow_disruption,
    create_claim,
    live_pools,
    to_stderr,
    wait_for_nodes,
    withdrawn,
)
from kubeplace.plan.plan import NewNode
from kubeplace.rebalance.apply import EVICTED, GONE, LEASE_NAME, ApplyReport, Lease, apply_moves, default_holder
from kubeplace.rebalance.consolidate import Drain
from kubeplace.rebalance.ownership import CAPI_DELETE_ANNOTATION
from kubeplace.rebalance.solve_moves import Move

CORDONED = "cordoned"
DELETED_CLAIM = "NodeClaim deleted"
MACHINE_DELETED = "Machine marked for deletion, MachineDeployment scaled down"
DRAINED = "drained (cordoned): remove it through its node group"
KEPT = "kept (uncordoned)"
FAILED = "failed"
NOT_RUN = "not run"


@dataclass
class NodeOutcome:
    drain: Drain
    outcome: str = NOT_RUN
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.drain.node, "nodeClaim": self.drain.node_claim, "outcome": self.outcome,
                "message": self.message}


@dataclass(frozen=True)
class Replacement:
    """With ``--replace``: the answer's new nodes, launched and initialized before any drain."""

    nodes: tuple[NewNode, ...]
    snapshot: Snapshot
    """The input consolidated: the pods that move."""
    timeout: float
    """Seconds to wait for every new node to be initialized."""


@dataclass
class DrainReport:
    nodes: list[NodeOutcome] = field(default_factory=list)
    evictions: ApplyReport = field(default_factory=ApplyReport)
    stopped: str = ""
    added: list[Arrival] = field(default_factory=list)
    """With ``--replace``: what became of each new node."""

    @property
    def removed(self) -> int:
        """Nodes handed to their owner's removal (NodeClaim deleted, Machine marked)."""
        return sum(n.outcome in (DELETED_CLAIM, MACHINE_DELETED) for n in self.nodes)

    @property
    def drained(self) -> int:
        """Nodes of another group drained and left cordoned, for the user to remove from the group."""
        return sum(n.outcome == DRAINED for n in self.nodes)

    @property
    def complete(self) -> bool:
        return self.removed + self.drained == len(self.nodes) and not self.stopped

    def to_dict(self) -> dict[str, Any]:
        added = [{"node": a.planned.name, "nodeClaim": a.claim, "registeredAs": a.node,
                  "seconds": round(a.seconds, 1), "note": a.note} for a in self.added]
        return {**self.evictions.to_dict(), "dry_run": False, "nodes_removed": self.removed,
                "nodes_drained": self.drained, "stopped": self.stopped or self.evictions.stopped,
                "nodes": [n.to_dict() for n in self.nodes], "added": added}


def drain_nodes(cluster: Any, drains: Sequence[Drain], moves: Sequence[Move], *, wave_size: int = 1,
                lease_namespace: str = "kubeplace-system", report_path: Path | None = None,
                replacement: Replacement | None = None, say: Say = to_stderr) -> DrainReport:
    """With ``replacement``, its new nodes first (nothing drained unless each is initialized);
    the moves towards them then name the registered nodes. Raises LeaseHeld, having written
    nothing (not even a NodeClaim), when another run holds the Lease."""
    lease = Lease(cluster, lease_namespace, default_holder())
    lease.acquire()
    try:
        return _drain_held(cluster, drains, moves, wave_size, lease, lease_namespace, report_path, replacement, say)
    finally:
        lease.release()


def _drain_held(cluster: Any, drains: Sequence[Drain], moves: Sequence[Move], wave_size: int, lease: Lease,
                lease_namespace: str, report_path: Path | None, replacement: Replacement | None,
                say: Say) -> DrainReport:
    report = DrainReport([NodeOutcome(d) for d in drains])
    if replacement is not None and replacement.nodes:
        report.added, report.stopped = launch(cluster, replacement, say, _keeping(lease, lease_namespace))
        if report.stopped:
            return report
        registered = {a.planned.name: a.node for a in report.added}
        moves = [replace(m, target=registered.get(m.target, m.target)) for m in moves]
    try:
        _drain(cluster, report, moves, wave_size, lease, lease_namespace, report_path)
    finally:
        allow_disruption(cluster, report.added, say)
    return report


def _keeping(lease: Lease, lease_namespace: str) -> Callable[[], None]:
    """Renews the Lease when due while the new nodes launch; ClusterError saying it was lost."""
    def keep() -> None:
        try:
            lease.renew_due()
        except ClusterError as e:
            raise ClusterError(f"lost the lease {lease_namespace}/{LEASE_NAME}: {e}") from e
    return keep


def launch(cluster: Any, replacement: Replacement, say: Say,
           on_poll: Callable[[], None] = lambda: None) -> tuple[list[Arrival], str]:
    """Creates a NodeClaim per new node and waits until each is initialized, ``on_poll`` called
    at each read of the claims (the caller's Lease renewed). Returns what became of each and "",
    or, when one did not come (or the wait was interrupted or failed, ``on_poll`` included), why,
    every claim created deleted again."""
    started = time.monotonic()
    pools = live_pools(cluster)
    pods = {p.key: p for p in replacement.snapshot.bound}
    created: dict[str, tuple[str, str]] = {}
    try:
        for new in replacement.nodes:
            created[new.name] = create_claim(cluster, new, pools, pods, say)
        arrivals = wait_for_nodes(cluster, replacement.nodes, created, replacement.timeout, started, say, on_poll)
    except (KeyboardInterrupt, ClusterError) as error:  # Ctrl-C or SIGTERM, or the claims could not be read
        what = "interrupted" if isinstance(error, KeyboardInterrupt) else str(error)
        arrivals = [Arrival(n, created.get(n.name, ("", ""))[0], "", what, time.monotonic() - started)
                    for n in replacement.nodes]
        why = f"{what} while waiting for the new nodes; nothing drained"
        return [withdrawn(cluster, a, always=True) for a in arrivals], why
    missing = next((a for a in arrivals if not a.node), None)
    if missing is None:
        return arrivals, ""
    why = f"new node {missing.planned.name} did not come: {missing.note}; nothing drained"
    return [withdrawn(cluster, a, always=True) for a in arrivals], why


def _drain(cluster: Any, report: DrainReport, moves: Sequence[Move], wave_size: int, lease: Lease,
           lease_namespace: str, report_path: Path | None) -> None:
    """Cordon, evict, delete (see the module's text), into ``report``."""
    for outcome in report.nodes:
        try:
            cluster.cordon_node(outcome.drain.node)
            outcome.outcome = CORDONED
        except ClusterError as e:
            outcome.outcome, outcome.message = FAILED, str(e)
            report.stopped = f"cordon failed: {e}"
            _uncordon(cluster, report)
            return
    report.evictions = apply_moves(cluster, moves, dry_run=False, wave_size=wave_size,
                                   lease_namespace=lease_namespace, report_path=report_path, lease=lease)
    if report.evictions.interrupted:  # Ctrl-C or SIGTERM: nothing more is deleted
        _uncordon(cluster, report)
        return
    left = _not_evicted(report.evictions)
    try:
        lease.renew()
    except ClusterError as e:  # taken by another run meanwhile: remove nothing
        report.stopped = f"lost the lease {lease_namespace}/{LEASE_NAME}: {e}"
        _uncordon(cluster, report)
        return
    machines: dict[str, list[NodeOutcome]] = {}
    for outcome in report.nodes:
        drain = outcome.drain
        if left.get(drain.node):
            outcome.outcome = KEPT
            outcome.message = f"{left[drain.node]} pod(s) not evicted"
        elif drain.machine:
            machines.setdefault(_deployment(drain), []).append(outcome)
        elif drain.node_claim:
            if not _delete_claim(cluster, outcome, report):
                break
        elif drain.node_group:
            outcome.outcome, outcome.message = DRAINED, drain.remove
        else:  # no owner to act through: consolidation never proposes such a node
            outcome.outcome = FAILED
            outcome.message = "no NodeClaim or node group owns it; kubeplace never deletes a Node"
    for deployment, outcomes in sorted(machines.items()):
        if report.stopped or not _scale_down(cluster, deployment, outcomes, report):
            break
    _uncordon(cluster, report)


def _deployment(drain: Drain) -> str:
    """A Cluster API node's MachineDeployment, ``NAMESPACE/NAME`` (its Machine's namespace)."""
    return f"{drain.machine.split('/', 1)[0]}/{drain.node_group.split('/', 1)[1]}"


def _delete_claim(cluster: Any, outcome: NodeOutcome, report: DrainReport) -> bool:
    """Deletes the node's NodeClaim (Karpenter drains and terminates it); False when that failed."""
    try:
        cluster.delete_node_claim(outcome.drain.node_claim)
        outcome.outcome = DELETED_CLAIM
    except NotFound:
        outcome.outcome, outcome.message = DELETED_CLAIM, "gone already"
    except ClusterError as e:
        outcome.outcome, outcome.message = FAILED, str(e)
        report.stopped = f"delete failed: {e}"
        return False
    return True


def _scale_down(cluster: Any, deployment: str, outcomes: Sequence[NodeOutcome], report: DrainReport) -> bool:
    """Cluster API: each drained node's Machine annotated ``cluster.x-k8s.io/delete-machine``, then
    the MachineDeployment (``NAMESPACE/NAME``) scaled down by that many, so that its MachineSet
    deletes those Machines first (and their infrastructure, and their Nodes). False when a step failed."""
    namespace, name = deployment.split("/", 1)
    step = "annotate Machine"
    try:
        for outcome in outcomes:
            machine = outcome.drain.machine.split("/", 1)[1]
            cluster.annotate_machine(namespace, machine, {CAPI_DELETE_ANNOTATION: "true"})
        step = "scale MachineDeployment"
        replicas = cluster.scale_machine_deployment(namespace, name, -len(outcomes))
    except ClusterError as e:
        for outcome in outcomes:
            outcome.outcome, outcome.message = FAILED, f"{step}: {e}"
        report.stopped = f"{step} failed: {e}"
        return False
    for outcome in outcomes:
        outcome.outcome, outcome.message = MACHINE_DELETED, f"MachineDeployment {deployment} to {replicas} replicas"
    return True


def _not_evicted(evictions: ApplyReport) -> dict[str, int]:
    out: dict[str, int] = {}
    for o in evictions.outcomes:
        if o.outcome not in (EVICTED, GONE):
            out[o.move.source] = out.get(o.move.source, 0) + 1
    return out


def _uncordon(cluster: Any, report: DrainReport) -> None:
    """Nodes cordoned and not deleted are given back to the scheduler."""
    for outcome in report.nodes:
        if outcome.outcome in (CORDONED, KEPT):
            try:
                cluster.cordon_node(outcome.drain.node, unschedulable=False)
                outcome.outcome = KEPT
            except ClusterError as e:
                outcome.message = f"{outcome.message}; uncordon failed: {e}".lstrip("; ")
