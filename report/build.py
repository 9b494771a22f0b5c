"""A report's content, from a plan or from a rebalance: the cluster's load before and after, the
pods not placed, the moves and the solver's progress events."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kubeplace.kube.catalogue import PRICE_UNIT
from kubeplace.kube.gpu_conventions import GpuConventions
from kubeplace.kube.objects import Pod, Snapshot
from kubeplace.models.gpu import DEVICE_ALLOCATED, device_notes
from kubeplace.plan.plan import Plan, Unplaced
from kubeplace.rebalance.solve_moves import Move
from kubeplace.report.load import ClusterLoad, cluster_load
from kubeplace.solver.run import Event

MAX_REASONS = 15
NODES_AVAILABLE = re.compile(r"^\d+/\d+ nodes are available: (.*?)\.?$")
"""The kube-scheduler's message: its reasons follow, each with the number of nodes it rejected."""


@dataclass(frozen=True)
class Report:
    command: str
    """``plan`` or ``rebalance``."""
    source: str
    summary: tuple[str, ...]
    load: ClusterLoad
    unplaced: tuple[Unplaced, ...] = ()
    moves: tuple[Move, ...] = ()
    events: tuple[Event, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Placed:
    """A pending pod the plan puts on ``node`` (with these GPU devices)."""

    pod: Pod
    node: str
    devices: tuple[int, ...] = ()


def pods_after(snapshot: Snapshot, moves: Sequence[Move], placed: Sequence[Placed],
               conv: GpuConventions) -> list[Pod]:
    """The bound pods once ``moves`` are made (a moved pod's devices are chosen anew, first fit)
    and the ``placed`` pending pods bound."""
    target = {(m.namespace, m.name): m.target for m in moves}
    out = []
    for pod in snapshot.bound:
        node = target.get((pod.namespace, pod.name))
        if node is None:
            out.append(pod)
        else:
            notes = {k: v for k, v in pod.annotations.items() if k != DEVICE_ALLOCATED}
            out.append(replace(pod, node_name=node, annotations=notes))
    for p in placed:
        notes = {**p.pod.annotations, **device_notes(p.devices, p.pod.requests, conv)}
        out.append(replace(p.pod, node_name=p.node, annotations=notes))
    return out


def plan_report(snapshot: Snapshot, plan: Plan, summary: Sequence[str], events: Sequence[Event],
                conv: GpuConventions) -> Report:
    pending = {(p.namespace, p.name): p for p in snapshot.pending}
    placed = [Placed(pending[(p.namespace, p.name)], p.node, p.gpus) for p in plan.placements]
    added = () if plan.provision is None else plan.provision.registered
    notes = () if plan.provision is None else tuple(
        f"new node {n.name}: NodePool {n.template.node_pool.name}, {n.template.instance_type.name} in "
        f"{n.template.offering.zone} ({n.template.offering.capacity_type}), {n.template.price / PRICE_UNIT:.4f}/h, "
        f"{len(n.pods)} pod(s)" for n in plan.provision.nodes)
    load = cluster_load((*snapshot.nodes, *added), snapshot.bound, pods_after(snapshot, (), placed, conv), conv)
    return Report("plan", plan.source or snapshot.source, tuple(summary), load, plan.unplaced, (), tuple(events),
                  notes)


def rebalance_report(snapshot: Snapshot, moves: Sequence[Move], placements: Sequence[tuple[str, str]],
                     summary: Sequence[str], events: Sequence[Event], notes: Sequence[str],
                     conv: GpuConventions) -> Report:
    """``placements``: (pod key, node) of the pending pods a make-room answer places."""
    pending = {p.key: p for p in snapshot.pending}
    placed = [Placed(pending[key], node) for key, node in placements if key in pending]
    load = cluster_load(snapshot.nodes, snapshot.bound, pods_after(snapshot, moves, placed, conv), conv)
    return Report("rebalance", snapshot.source, tuple(summary), load, (), tuple(moves), tuple(events), tuple(notes))


def reason_phrases(reasons: Sequence[str]) -> set[str]:
    """The reasons of one pod's messages: each of the kube-scheduler's ``N node(s) ...`` phrases
    without its count, other messages with their numbers as N (gang waits differ only by those)."""
    phrases: set[str] = set()
    for reason in reasons:
        found = NODES_AVAILABLE.match(reason)
        if found:
            phrases |= {re.sub(r"^\d+ ", "", part.strip()) for part in found.group(1).split(", ")}
        else:
            phrases.add(re.sub(r"\d+", "N", reason))
    return phrases


def reason_counts(unplaced: Sequence[Unplaced]) -> list[tuple[str, int]]:
    """The most frequent reasons and how many pods' messages give each."""
    counts: Counter[str] = Counter()
    for u in unplaced:
        counts.update(reason_phrases(u.reasons))
    return counts.most_common(MAX_REASONS)


def message_counts(unplaced: Sequence[Unplaced]) -> list[tuple[str, int, str]]:
    """Each distinct message with the number of pods it was given for and one of them."""
    counts: Counter[str] = Counter()
    example: dict[str, str] = {}
    for u in unplaced:
        message = "; ".join(u.reasons)
        counts[message] += 1
        example.setdefault(message, f"{u.namespace}/{u.name}")
    return [(m, n, example[m]) for m, n in counts.most_common()]
