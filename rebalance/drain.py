"""Carrying out a consolidation (``rebalance --consolidate --apply``): cordon the nodes to remove,
evict their pods in waves exactly as a rebalance does (``rebalance.apply``: the lease, the
re-check before each wave, PodDisruptionBudgets answered with 429 never retried), then delete
each node whose pods were all evicted: its NodeClaim when it has one (Karpenter then drains
and terminates it), else the Node. A node that keeps a pod is uncordoned and kept. Every step is
reported node by node and pod by pod; a failure half-way stops the run and says where.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubeplace.kube.errors import ClusterError, NotFound
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


@dataclass
class DrainReport:
    nodes: list[NodeOutcome] = field(default_factory=list)
    evictions: ApplyReport = field(default_factory=ApplyReport)
    stopped: str = ""

    @property
    def removed(self) -> int:
        return sum(n.outcome in (DELETED_CLAIM, DELETED_NODE) for n in self.nodes)

    @property
    def complete(self) -> bool:
        return self.removed == len(self.nodes) and not self.stopped

    def to_dict(self) -> dict[str, Any]:
        return {**self.evictions.to_dict(), "dry_run": False, "nodes_removed": self.removed,
                "stopped": self.stopped or self.evictions.stopped, "nodes": [n.to_dict() for n in self.nodes]}


def drain_nodes(cluster: Any, drains: Sequence[Drain], moves: Sequence[Move], *, wave_size: int = 1,
                lease_namespace: str = "kubeplace-system", report_path: Path | None = None,
                new_nodes: frozenset[str] = frozenset()) -> DrainReport:
    """``new_nodes``: the names of the nodes a ``--replace`` answer adds; kubeplace does not create
    them: the evicted pods that fit nowhere else are pending, and Karpenter launches nodes for them."""
    report = DrainReport([NodeOutcome(d) for d in drains])
    for outcome in report.nodes:
        try:
            cluster.cordon_node(outcome.drain.node)
            outcome.outcome = CORDONED
        except ClusterError as e:
            outcome.outcome, outcome.message = FAILED, str(e)
            report.stopped = f"cordon failed: {e}"
            _uncordon(cluster, report)
            return report
    report.evictions = apply_moves(cluster, moves, dry_run=False, wave_size=wave_size,
                                   lease_namespace=lease_namespace, report_path=report_path,
                                   unregistered=new_nodes)
    if report.evictions.interrupted:  # Ctrl-C or SIGTERM: nothing more is deleted
        _uncordon(cluster, report)
        return report
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
    return report


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
