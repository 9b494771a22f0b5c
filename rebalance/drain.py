"""Carrying out a consolidation (``rebalance --consolidate --apply``): with ``--replace``, first
create the answer's new nodes as NodeClaims and wait until each is initialized (``plan.new_nodes``,
as ``plan --provision --apply`` does; replace before delete); then cordon the nodes to remove,
evict their pods in waves exactly as a rebalance does (``rebalance.apply``: the lease, the
re-check before each wave, PodDisruptionBudgets answered with 429 never retried), then delete
each node whose pods were all evicted: its NodeClaim when it has one (Karpenter then drains
and terminates it), else the Node. A node that keeps a pod is uncordoned and kept. Every step is
reported node by node and pod by pod; a failure half-way stops the run and says where.

When a new node is not initialized within the timeout (or its claim is refused or deleted by
Karpenter), nothing is cordoned or evicted, and every NodeClaim the run created is deleted: no
new node is left paid for and unused. Once the drain is done (or stopped), the new nodes lose
their ``karpenter.sh/do-not-disrupt`` annotation and Karpenter may consolidate them as any other.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubeplace.kube.catalogue import InstanceType
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
from kubeplace.rebalance.apply import EVICTED, GONE, ApplyReport, apply_moves
from kubeplace.rebalance.consolidate import Drain
from kubeplace.rebalance.solve_moves import Move

CORDONED = "cordoned"
DELETED_CLAIM = "NodeClaim deleted"
DELETED_NODE = "Node deleted"
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
    """The input consolidated: the NodePools, the DaemonSet pods and the pods that move."""
    catalogue: tuple[InstanceType, ...]
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
        return sum(n.outcome in (DELETED_CLAIM, DELETED_NODE) for n in self.nodes)

    @property
    def complete(self) -> bool:
        return self.removed == len(self.nodes) and not self.stopped

    def to_dict(self) -> dict[str, Any]:
        added = [{"node": a.planned.name, "nodeClaim": a.claim, "registeredAs": a.node,
                  "seconds": round(a.seconds, 1), "note": a.note} for a in self.added]
        return {**self.evictions.to_dict(), "dry_run": False, "nodes_removed": self.removed,
                "stopped": self.stopped or self.evictions.stopped, "nodes": [n.to_dict() for n in self.nodes],
                "added": added}


def drain_nodes(cluster: Any, drains: Sequence[Drain], moves: Sequence[Move], *, wave_size: int = 1,
                lease_namespace: str = "kubeplace-system", report_path: Path | None = None,
                replacement: Replacement | None = None, say: Say = to_stderr) -> DrainReport:
    """With ``replacement``, its new nodes first (nothing drained unless each is initialized);
    the moves towards them then name the registered nodes."""
    report = DrainReport([NodeOutcome(d) for d in drains])
    if replacement is not None and replacement.nodes:
        report.added, report.stopped = launch(cluster, replacement, say)
        if report.stopped:
            return report
        registered = {a.planned.name: a.node for a in report.added}
        moves = [replace(m, target=registered.get(m.target, m.target)) for m in moves]
    try:
        _drain(cluster, report, moves, wave_size, lease_namespace, report_path)
    finally:
        allow_disruption(cluster, report.added, say)
    return report


def launch(cluster: Any, replacement: Replacement, say: Say) -> tuple[list[Arrival], str]:
    """Creates a NodeClaim per new node and waits until each is initialized. Returns what became
    of each and "", or, when one did not come (or the wait was interrupted), why, every claim
    created deleted again."""
    started = time.monotonic()
    pools = live_pools(cluster)
    pods = {p.key: p for p in replacement.snapshot.bound}
    created: dict[str, tuple[str, str]] = {}
    try:
        for new in replacement.nodes:
            created[new.name] = create_claim(cluster, replacement.snapshot, replacement.catalogue, new, pools, pods,
                                             say)
        arrivals = wait_for_nodes(cluster, replacement.nodes, created, replacement.timeout, started, say)
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


def _drain(cluster: Any, report: DrainReport, moves: Sequence[Move], wave_size: int, lease_namespace: str,
           report_path: Path | None) -> None:
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
                                   lease_namespace=lease_namespace, report_path=report_path)
    if report.evictions.interrupted:  # Ctrl-C or SIGTERM: nothing more is deleted
        _uncordon(cluster, report)
        return
    left = _not_evicted(report.evictions)
    for outcome in report.nodes:
        if left.get(outcome.drain.node):
            outcome.outcome = KEPT
            outcome.message = f"{left[outcome.drain.node]} pod(s) not evicted"
            continue
        try:
            if outcome.drain.node_claim:
                cluster.delete_node_claim(outcome.drain.node_claim)
                outcome.outcome = DELETED_CLAIM
            else:
                cluster.delete_node(outcome.drain.node)
                outcome.outcome = DELETED_NODE
        except NotFound:
            outcome.outcome, outcome.message = DELETED_NODE, "gone already"
        except ClusterError as e:
            outcome.outcome, outcome.message = FAILED, str(e)
            report.stopped = f"delete failed: {e}"
            break
    _uncordon(cluster, report)


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
