"""Independent verification of a plan's preemptions.

The placements themselves are checked by :func:`plan.verify.verify` against the cluster with
the victims removed; this module checks the victims, rule by rule, written out plainly and
sharing no code with ``models/`` (only ``kube`` is imported: ``kube.objects``,
``kube.gangs.gang_of``, the one answer to which gang a pod is in, whatever its source, and
``kube.gpu_conventions``, the configured GPU resource names):

- a victim is a running pod on the node the plan says, not terminating, not a mirror or static
  pod, not a DaemonSet pod, and every running member of its gang is a victim too;
- it is evicted for at least one placed pod, each of which may preempt (``preemptionPolicy`` not
  ``Never``, nor any member of its gang; not sharing a GPU; not nominated to a node where pods of
  lower priority are still terminating), has a strictly higher priority than the victim (than
  its gang's highest), is more critical when the victim is system-critical, and is placed on the
  victim's node or, for a gang, on a node where one of its members runs;
- on every node with victims, each placed pod fits together with the placed pods that may
  preempt at least as much as it and with every pod it may not evict, victims included: no pod
  counts on room freed by a victim it could not preempt itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from kubeplace.kube.gangs import gang_of
from kubeplace.kube.gpu_conventions import DEFAULT_CONVENTIONS, GpuConventions
from kubeplace.kube.objects import PODS, GangKey, Pod, Snapshot
from kubeplace.plan.verify import Violation

NEVER = "Never"
CRITICAL = 2_000_000_000
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SOURCE_ANNOTATION = "kubernetes.io/config.source"
NO_POWER = float("-inf")

Placed = tuple[str, str, str]
"""(namespace, name, node) of a placement."""
Evicted = tuple[str, str, str, tuple[str, ...]]
"""(namespace, name, node, the ``namespace/name`` of the pods it is evicted for)."""


def verify_preemptions(snapshot: Snapshot, placements: Sequence[Placed], victims: Sequence[Evicted],
                       gpu: GpuConventions = DEFAULT_CONVENTIONS) -> list[Violation]:
    """``gpu``: the configured GPU conventions (a pod with a GPU share request may not preempt)."""
    checker = _Preemptions(snapshot, placements, victims, gpu.share_resources)
    return [*checker.victims(), *checker.levels()]


class _Preemptions:
    def __init__(self, snapshot: Snapshot, placements: Sequence[Placed], victims: Sequence[Evicted],
                 share_resources: tuple[str, ...]) -> None:
        self.snapshot = snapshot
        self.running = {p.key: p for p in snapshot.bound if not p.finished}
        self.pending = {p.key: p for p in snapshot.pending}
        self.placed = {f"{ns}/{name}": node for ns, name, node in placements}
        self.victims_list = list(victims)
        self.evicted = {f"{ns}/{name}" for ns, name, _, _ in victims}
        self.share_resources = share_resources
        never = {gang_of(p) for p in snapshot.pending if p.preemption_policy == NEVER}
        self.never_gangs = never - {None}
        self.gang_members: dict[GangKey, list[Pod]] = {}
        for pod in self.running.values():
            gang = gang_of(pod)
            if gang is not None:
                self.gang_members.setdefault(gang, []).append(pod)

    def power(self, pod: Pod) -> float:
        """The priority below which ``pod`` may evict; -inf when it may not preempt."""
        if pod.preemption_policy == NEVER or gang_of(pod) in self.never_gangs:
            return NO_POWER
        if any(pod.requests.get(r, 0) for r in self.share_resources):
            return NO_POWER
        if pod.nominated_node and any(o.node_name == pod.nominated_node and o.deleting and o.priority < pod.priority
                                      for o in self.running.values()):
            return NO_POWER
        return pod.priority

    def unit_priority(self, pod: Pod) -> int:
        gang = gang_of(pod)
        if gang is None:
            return pod.priority
        return max(p.priority for p in self.gang_members.get(gang, [pod]))

    def victims(self) -> Iterator[Violation]:
        for namespace, name, node, for_pods in self.victims_list:
            key = f"{namespace}/{name}"

            def bad(detail: str, ns: str = namespace, n: str = name, where: str = node) -> Violation:
                return Violation(ns, n, where, "Preemption", detail)

            pod = self.running.get(key)
            if pod is None or pod.node_name != node:
                yield bad("the victim is not a running pod on this node")
                continue
            if pod.deleting:
                yield bad("the victim is already terminating")
            if MIRROR_ANNOTATION in pod.annotations or pod.annotations.get(SOURCE_ANNOTATION, "") not in ("", "api") \
                    or pod.owner_kind == "Node":
                yield bad("the victim is a mirror or static pod")
            if pod.owner_kind == "DaemonSet":
                yield bad("the victim is a DaemonSet pod")
            gang = gang_of(pod)
            nodes = {node}
            if gang is not None:
                members = self.gang_members.get(gang, [])
                nodes = {m.node_name for m in members}
                spared = [m.key for m in members if m.key not in self.evicted]
                if spared:
                    yield bad(f"gang {gang}: member(s) {', '.join(spared)} kept, the gang is evicted whole or not")
            if not for_pods:
                yield bad("evicted for no placed pod")
            priority = self.unit_priority(pod)
            for preemptor_key in for_pods:
                yield from self._preemptor(pod, priority, preemptor_key, nodes, bad)

    def _preemptor(self, victim: Pod, priority: int, key: str, nodes: set[str],
                   bad: Callable[[str], Violation]) -> Iterator[Violation]:
        preemptor = self.pending.get(key)
        if preemptor is None or key not in self.placed:
            yield bad(f"preemptor {key} is not a placed pending pod")
            return
        if self.placed[key] not in nodes:
            yield bad(f"preemptor {key} is placed on {self.placed[key]}, where the victim frees no room")
        power = self.power(preemptor)
        if power == NO_POWER:
            yield bad(f"preemptor {key} may not preempt (preemptionPolicy Never, a Never gang member, a GPU share, "
                      f"or its victims still terminating)")
        elif not priority < power:
            yield bad(f"preemptor {key} (priority {preemptor.priority}) is not above the victim's priority {priority}")
        elif priority >= CRITICAL and power <= CRITICAL:
            yield bad(f"the victim is system-critical and preemptor {key} is not more critical")

    def levels(self) -> Iterator[Violation]:
        nodes = {n.name: n for n in self.snapshot.nodes}
        by_node: dict[str, list[Pod]] = {}
        for key, node in self.placed.items():
            if key in self.pending:
                by_node.setdefault(node, []).append(self.pending[key])
        victim_nodes = {self.running[k].node_name for k in self.evicted if k in self.running}
        for node_name in sorted(victim_nodes & set(by_node)):
            found = nodes.get(node_name)
            if found is None:
                continue
            here = by_node[node_name]
            running = [p for p in self.running.values() if p.node_name == node_name]
            for pod in here:
                power = self.power(pod)
                placed = [q for q in here if self.power(q) >= power]
                staying = [r for r in running if not (r.key in self.evicted and self.unit_priority(r) < power)]
                over = _over(found.allocatable, placed, staying, self.snapshot)
                if over:
                    yield Violation(pod.namespace, pod.name, node_name, "Preemption",
                                    f"counts on room freed by victims it may not preempt: {over}")


def _requests(pod: Pod) -> dict[str, int]:
    return {**pod.requests, PODS: max(pod.requests.get(PODS, 0), 1)}  # every pod takes a pod slot


def _over(allocatable: Mapping[str, int], placed: Sequence[Pod], staying: Sequence[Pod], snapshot: Snapshot) -> str:
    """The first resource the placed pods request that ``staying`` leaves too little of ("" if none);
    an extended resource a DeviceClass serves where no device plugin gives it is DRA's (its devices
    are checked by DynamicResources' verifier check)."""
    need: dict[str, int] = {}
    for pod in placed:
        for resource, amount in _requests(pod).items():
            need[resource] = need.get(resource, 0) + amount
    for resource in sorted(need):
        if snapshot.devices.serves(resource, allocatable):
            continue
        used = sum(_requests(p).get(resource, 0) for p in staying)
        if need[resource] > 0 and used + need[resource] > allocatable.get(resource, 0):
            return f"Insufficient {resource}"
    return ""
