"""Pods nominated to a node (``status.nominatedNodeName``) and the room they hold there.

A preemptor waits, nominated, while its victims terminate. The kube-scheduler keeps that room
for it: when it filters a node for a pod it first adds the pods nominated to that node whose
priority is at least the pod's (``addNominatedPods`` in pkg/scheduler/framework/runtime), so a
pod of lower or equal priority does not take the room, and one of higher priority may. Pods of
the batch being planned are placed by the plan itself and hold nothing here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from kubeplace.kube.objects import Pod

Held = Mapping[str, Mapping[str, int]]
"""node name -> resource -> the requests held there."""


def nominated_elsewhere(pods: Iterable[Pod], batch: Collection[Pod], node_names: Collection[str]) -> list[Pod]:
    """The pods waiting for a node of the snapshot they are nominated to, outside ``batch``."""
    keys = {pod.key for pod in batch}
    return [pod for pod in pods if pod.nominated_node in node_names and not pod.node_name and not pod.deleting
            and not pod.finished and pod.key not in keys]


def held_room(nominated: Iterable[Pod], priority: int) -> Held:
    """What the nominated pods of priority at least ``priority`` request, by node: the room a pod
    of that priority must leave them."""
    held: dict[str, dict[str, int]] = {}
    for pod in nominated:
        if pod.priority >= priority:
            here = held.setdefault(pod.nominated_node, {})
            for resource, amount in pod.requests.items():
                here[resource] = here.get(resource, 0) + amount
    return held
