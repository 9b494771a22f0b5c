"""Coscheduling's independent verifier check, over the whole plan: a gang with a topology key
runs within one value of that node label (its running members' first); a pod naming a PodGroup
that the snapshot lacks, or that kubeplace cannot read, is not placed; a pending leader whose
followers do not exist yet is placed only with room held for all of them, and their room only
with the leader. Gang identity is ``kube.gangs.gang_of``'s. Imports only ``kubeplace.kube``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from kubeplace.kube.gangs import gang_of, named_pod_group
from kubeplace.kube.objects import GangKey, Snapshot
from kubeplace.kube.plan_view import Finding, Placed, PlanView


def check_plan(view: PlanView, _args: None) -> Iterator[Finding]:
    """Over the plan's accepted placements (their pods are the snapshot's pending ones, their
    nodes its nodes)."""
    snapshot = view.snapshot
    yield from _gang_topology(snapshot, view.placements)
    yield from _unreadable_gangs(snapshot, view.placements)
    yield from _followers_reserved(snapshot, view.placements)


def _gang_topology(snapshot: Snapshot, placements: Sequence[Placed]) -> Iterator[Finding]:
    """A gang with a topology key runs on nodes with one value of that label: running
    members (first) and placed ones share the value; a placed member on a node without the
    label, or with another value than the first member's, is a violation."""
    keys = {g.key: g.topology_key for g in snapshot.pod_groups if g.topology_key}
    if not keys:
        return
    nodes = snapshot.node_by_name
    first: dict[GangKey, str] = {}
    for pod in snapshot.bound:
        gang = gang_of(pod)
        if gang is not None and gang in keys and pod.node_name in nodes:
            first.setdefault(gang, nodes[pod.node_name].labels.get(keys[gang], ""))
    for member, node in ((p.pod, p.node) for p in placements):
        if (placed := gang_of(member)) not in keys:
            continue
        key = keys[placed]
        value = node.labels.get(key)
        want = first.setdefault(placed, value or "")
        if value is None:
            yield member.namespace, member.name, node.name, f"gang {placed.name}: node has no label {key}"
        elif value != want:
            yield (member.namespace, member.name, node.name,
                   f"gang {placed.name}: {key}={value}, other members in {key}={want or '(no label)'}")


def _unreadable_gangs(snapshot: Snapshot, placements: Sequence[Placed]) -> Iterator[Finding]:
    """A pod naming a PodGroup that the snapshot lacks, or that kubeplace cannot read, runs with
    no gang rule checked: it must not be placed; nor a leader whose job no domain could hold."""
    groups = {g.key: g for g in snapshot.pod_groups}
    for pod, node_name in ((p.pod, p.node.name) for p in placements):
        gang = gang_of(pod)
        if gang is None:
            continue
        named = named_pod_group(pod)[1]
        group = groups.get(gang)
        if (group is None and named) or (group is not None and group.unreadable):
            why = (group.unreadable if group is not None
                   else f"its PodGroup {pod.namespace}/{named} is not in the snapshot")
            yield pod.namespace, pod.name, node_name, why


def _followers_reserved(snapshot: Snapshot, accepted: Sequence[Placed]) -> Iterator[Finding]:
    """A pending leader whose followers do not exist yet is placed only with room held for all of
    them (their stand-in placed in the same plan, every one of its copies), and a stand-in only
    with its leader."""
    if not any(pod.reserved_for for pod in snapshot.pending):
        return  # no stand-in: no leader waits for its followers
    copies: dict[tuple[str, str], int] = {}
    for p in accepted:
        copies[(p.pod.namespace, p.pod.name)] = copies.get((p.pod.namespace, p.pod.name), 0) + p.count
    placements = [(p.pod.namespace, p.pod.name, p.node.name) for p in accepted]
    placed = {f"{namespace}/{name}" for namespace, name, _ in placements}
    nodes = {(namespace, name): node for namespace, name, node in placements}
    pending = {pod.key for pod in snapshot.pending}
    for pod in snapshot.pending:
        if pod.reserved_for not in pending:
            continue  # no stand-in, or one for a pod Kueue still gates (its room, not a follower's)
        leader, here = pod.reserved_for in placed, pod.key in placed
        if leader != here:
            ns, name = pod.reserved_for.split("/", 1)
            missing = pod.key if leader else pod.reserved_for
            yield ns, name, nodes.get((ns, name), ""), (f"leader and its follower's reservation go together: "
                                                        f"{missing} is not placed")
        elif here and copies.get((pod.namespace, pod.name), 0) != pod.copies:
            ns, name = pod.reserved_for.split("/", 1)
            yield ns, name, nodes.get((ns, name), ""), (
                f"room held for {copies.get((pod.namespace, pod.name), 0)} of its {pod.copies} "
                f"followers ({pod.key}), not all of them")
