"""Coscheduling: a gang's pods are placed together or not at all.

A gang (PodGroup, or pods labelled with a group name) is placed only if at least
min-member of its pods are placed in the same plan (members already running count),
and the placed members together request at least its minResources. A gang with fewer
pods than min-member in existence waits: none of its pods is placed.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from kube.gangs import PodGroup, group_of
from kube.objects import Node, Pod
from models.framework import ClassView, RunContext
from models.problem import Gang, GroupCap

NAME = "Coscheduling"


@dataclass(frozen=True)
class Coscheduling:
    groups: dict[str, PodGroup] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=dict)
    name: str = NAME

    def gang_key(self, pod: Pod) -> str:
        group = group_of(pod)
        return f"{pod.namespace}/{group}" if group else ""

    def pod_key(self, pod: Pod) -> Hashable:
        return self.gang_key(pod)

    def node_key(self, node: Node) -> Hashable:
        return None

    def constraints(self, view: ClassView) -> Sequence[GroupCap | Gang]:
        by_gang: dict[str, list[int]] = {}
        for c, pod in enumerate(view.class_pods):
            key = self.gang_key(pod)
            if key:
                by_gang.setdefault(key, []).append(c)
        gangs: list[GroupCap | Gang] = []
        for key, classes in sorted(by_gang.items()):
            group = self.groups.get(key)
            needed = (group.min_member if group else 1) - self.running.get(key, 0)
            resources = tuple(sorted(group.min_resources.items())) if group else ()
            gangs.append(Gang(key, tuple(classes), max(needed, 0), resources))
        return gangs


def build(_args: None, ctx: RunContext) -> Coscheduling:
    groups = {g.key: g for g in ctx.snapshot.pod_groups}
    running: dict[str, int] = {}
    for pod in ctx.snapshot.bound:
        group = group_of(pod)
        if group:
            key = f"{pod.namespace}/{group}"
            running[key] = running.get(key, 0) + 1
    return Coscheduling(groups, running)
