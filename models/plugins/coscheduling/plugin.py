"""Coscheduling: a gang's pods are placed together or not at all.

A gang (PodGroup, or pods labelled with a group name) is placed only if at least
min-member of its pods are placed in the same plan (members already running count). A gang
with fewer pods than min-member in existence waits: none of its pods is placed, nor are the
pods of a gang whose PodGroup is missing or unreadable, or whose ``minResources`` its scheduler
would not admit now (``kube.gang_admission``: a check against the whole cluster's free room,
never a sum its placed members must reach), nor those of a Kueue workload pinned to a node that
failed, which wait for Kueue to replace the node or requeue them (``kube.kueue.lost_host_holds``)
(``Gang.blocked``). A gang with a
topology key runs within one domain (value of that node label); once members run, the
domain they run in. The gang topology score is GangTopologyPreference's.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from kubeplace.kube.gang_admission import admission_holds
from kubeplace.kube.gangs import blocked_reason, gang_of
from kubeplace.kube.kueue import lost_host_holds
from kubeplace.kube.objects import GangKey, Node, Pod, PodGroup
from kubeplace.models.bound_usage import counted
from kubeplace.models.domains import label_domains
from kubeplace.models.framework import ClassView, RunContext
from kubeplace.models.problem import Gang, IntArray, Rule

NAME = "Coscheduling"


@dataclass(frozen=True)
class Running:
    """A gang's members already running: how many, and their nodes."""

    count: int = 0
    nodes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Coscheduling:
    groups: Mapping[GangKey, PodGroup] = field(default_factory=dict)
    running: Mapping[GangKey, Running] = field(default_factory=dict)
    held: Mapping[GangKey, str] = field(default_factory=dict)
    """Gangs their scheduler would not admit now (``kube.gang_admission``), with why."""
    name: str = NAME

    def pod_key(self, pod: Pod) -> Hashable:
        return gang_of(pod)

    def node_key(self, node: Node) -> Hashable:
        return None

    def constraints(self, view: ClassView) -> Sequence[Rule]:
        by_gang: dict[GangKey, list[int]] = {}
        for c, pod in enumerate(view.class_pods):
            key = gang_of(pod)
            if key is not None:
                by_gang.setdefault(key, []).append(c)
        gangs: list[Rule] = []
        for key, classes in sorted(by_gang.items()):
            group = self.groups.get(key)
            running = self.running.get(key, Running())
            topology = group.topology_key if group else ""
            domain = self._domain(key, topology, view.nodes) if topology else None
            soft = group.preferred_topology_key if group else ""
            preferred = label_domains(soft, view.nodes, unlabelled_apart=True) if soft else None
            gangs.append(Gang(key, tuple(classes), min_member=group.min_member if group else 1,
                              running=running.count, topology_key=topology, domain=domain, preferred=preferred,
                              blocked=blocked_reason(view.class_pods[classes[0]], self.groups)
                              or (group.unreadable if group else "") or self.held.get(key, "")))
        return gangs

    def _domain(self, key: GangKey, topology: str, nodes: Sequence[Node]) -> IntArray:
        """Each node's domain index for the label ``topology`` (-1: unlabelled); only the
        running members' domain when some run (none if they span several or run on a
        node without the label, which no placement can mend; members on nodes outside the
        snapshot are not counted, as in the verifier)."""
        domain = label_domains(topology, nodes)
        running_on = self.running.get(key, Running()).nodes
        held = {int(domain[i]) for i, n in enumerate(nodes) if n.name in running_on}
        if held:
            keep = held.pop() if len(held) == 1 else -1
            domain[domain != keep] = -1
        return domain


def _gang_and_node(pod: Pod) -> tuple[GangKey, str] | None:
    key = gang_of(pod)
    return None if key is None else (key, pod.node_name)


def build(_args: None, ctx: RunContext) -> Coscheduling:
    """The running members of the gangs with pending pods (the only gangs a plan places), and the
    gangs whose scheduler would not admit them now."""
    count: dict[GangKey, int] = {}
    nodes: dict[GangKey, set[str]] = {}
    waiting = {gang_of(pod) for pod in ctx.snapshot.pending}
    members_by_gang = (counted(ctx.snapshot.bound, _gang_and_node, "Coscheduling", ordered=False)
                       if waiting - {None} else {})  # (no gang pending: its running members are not counted)
    for gang_node, members in members_by_gang.items():
        key, node = cast(tuple[GangKey, str], gang_node)
        if key in waiting:  # (the counts by gang and node are kept from the last cycle: models.bound_usage)
            count[key] = count.get(key, 0) + members
            nodes.setdefault(key, set()).add(node)
    running = {key: Running(count[key], frozenset(nodes[key])) for key in count}
    held = {**lost_host_holds(ctx.snapshot.pending, ctx.snapshot.nodes, gang_of),
            **admission_holds(ctx.snapshot.pod_groups, {k for k in waiting if k is not None}, ctx.snapshot.nodes,
                              ctx.snapshot.bound, gang_of)}
    return Coscheduling({g.key: g for g in ctx.snapshot.pod_groups}, running, held)
