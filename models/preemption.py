"""Who may preempt and who may be preempted: the kube-scheduler's rules, gang-aware.

**Preemptors.** A pending pod preempts pods of lower priority than its own (its *power* is its
priority) unless its ``preemptionPolicy`` (from the pod, else its PriorityClass) is ``Never``
(``PodEligibleToPreemptOthers``). As in the kube-scheduler's workload-aware preemption, a gang
preempts as one: a single ``Never`` member makes the whole gang non-preempting. A pod nominated
to a node where pods of lower priority are still terminating waits for them instead of
preempting again (the kube-scheduler's check on ``status.nominatedNodeName``). kubeplace also
keeps out of preemption the pods that share a GPU device (device-level preemption is not
modelled): they are placed only where there is room without evicting anybody.

**Victims.** A running pod of strictly lower priority than a preemptor's power
(``isPreemptionAllowed``), except: mirror and static pods (the kubelet owns them) and DaemonSet
pods (their controller would put them straight back), which the kube-scheduler never removes
either in practice; system-critical pods (priority >= 2,000,000,000), unless the preemptor is more
critical; pods already terminating (they free their room by themselves); pods sharing a GPU
device; pods whose required anti-affinity is not modelled against the preemptor (they stay and
their rule holds); and every pod of a node that its pods already overcommit (the kubelet's
admission rule could not be honoured by evicting some of them). A running gang member is a victim
only with its whole gang: its running members form one *unit*, all evicted or none, whose
priority is its members' highest, and only when every member may be a victim. Running members of
a gang that has members waiting in this batch are never victims.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from kubeplace.kube.gangs import gang_of
from kubeplace.kube.gpu_conventions import GpuConventions
from kubeplace.kube.objects import (
    MIRROR_ANNOTATION,
    SOURCE_ANNOTATION,
    SYSTEM_CRITICAL_PRIORITY,
    GangKey,
    Node,
    Pod,
    Snapshot,
)
from kubeplace.kube.parse import PREEMPT_NEVER

NO_POWER = -(1 << 40)
"""The power of a pod that may not preempt: below every priority (an int32)."""

MIRROR = "mirror pod"
STATIC = "static pod"
DAEMONSET = "DaemonSet pod"
TERMINATING = "already terminating"
GPU_SHARE = "shares a GPU device (device-level preemption not modelled)"
ANTI_AFFINITY = "has required pod anti-affinity (not modelled against the preemptor)"
OVERCOMMITTED = "its node is overcommitted already"
GANG_WAITING = "member of a gang with members waiting in this batch"
GANG_MEMBER_KEPT = "its gang has a member that may not be preempted"
GPU_BESIDE_SHARES = "holds GPU devices while pods sharing a GPU wait (device-level preemption not modelled)"


def is_mirror_or_static(pod: Pod) -> str:
    """``mirror pod``, ``static pod`` or ""."""
    if MIRROR_ANNOTATION in pod.annotations:
        return MIRROR
    if pod.annotations.get(SOURCE_ANNOTATION, "") not in ("", "api") or pod.owner_kind == "Node":
        return STATIC
    return ""


def is_critical(pod: Pod) -> bool:
    """The kubelet's ``IsCriticalPod``: static, mirror, or of system-critical priority."""
    return pod.priority >= SYSTEM_CRITICAL_PRIORITY or bool(is_mirror_or_static(pod))


def may_evict(power: int, victim_priority: int) -> bool:
    """A preemptor of this power may evict a unit of this priority: strictly lower priority,
    and a system-critical one only for a more critical preemptor."""
    if victim_priority >= SYSTEM_CRITICAL_PRIORITY and power <= SYSTEM_CRITICAL_PRIORITY:
        return False
    return victim_priority < power


def shares_gpu(pod: Pod, gpu: GpuConventions) -> bool:
    return any(pod.requests.get(r, 0) for r in gpu.share_resources)


NEVER_REASON = "not eligible due to preemptionPolicy=Never."
GANG_NEVER_REASON = "not eligible: a member of its gang has preemptionPolicy=Never."
WAITING_REASON = "not eligible due to a terminating pod on the nominated node."
SHARE_REASON = "not eligible: it shares a GPU device (device-level preemption is not modelled)."
LEADER_REASON = ("not eligible: room for its followers, which do not exist yet, is not modelled with preemption "
                 "(it would run without them).")


def not_preempting(snapshot: Snapshot, gpu: GpuConventions) -> dict[str, str]:
    """Pending pod key -> why it may not preempt (the kube-scheduler's words where it has them),
    for the pods that may not."""
    never_gangs = {gang_of(p) for p in snapshot.pending if p.preemption_policy == PREEMPT_NEVER} - {None}
    leaders = {p.reserved_for for p in snapshot.reserved}
    out = {}
    for pod in snapshot.pending:
        if pod.key in leaders:
            out[pod.key] = LEADER_REASON
        elif pod.preemption_policy == PREEMPT_NEVER:
            out[pod.key] = NEVER_REASON
        elif gang_of(pod) in never_gangs:
            out[pod.key] = GANG_NEVER_REASON
        elif _waits_for_victims(pod, snapshot.bound):
            out[pod.key] = WAITING_REASON
        elif shares_gpu(pod, gpu):
            out[pod.key] = SHARE_REASON
    return out


def powers(snapshot: Snapshot, gpu: GpuConventions) -> dict[str, int]:
    """Pending pod key -> its preemption power (its priority, or NO_POWER)."""
    blocked = not_preempting(snapshot, gpu)
    return {pod.key: NO_POWER if pod.key in blocked else pod.priority for pod in snapshot.pending}


def _waits_for_victims(pod: Pod, bound: Sequence[Pod]) -> bool:
    """Nominated to a node where pods of lower priority are still terminating."""
    if not pod.nominated_node:
        return False
    return any(o.node_name == pod.nominated_node and o.deleting and o.priority < pod.priority for o in bound)


def exclusion(pod: Pod, gpu: GpuConventions) -> str:
    """Why ``pod`` (running) may never be a victim; "" when it may be one."""
    role = is_mirror_or_static(pod)
    if role:
        return role
    if pod.owner_kind == "DaemonSet":
        return DAEMONSET
    if pod.deleting:
        return TERMINATING
    if shares_gpu(pod, gpu):
        return GPU_SHARE
    if pod.anti_affinity:
        return ANTI_AFFINITY
    return ""


@dataclass(frozen=True)
class Unit:
    """What is evicted as one: a pod, or all running members of a gang."""

    pods: tuple[Pod, ...]
    gang: GangKey | None
    priority: int
    """The highest priority among its pods: a preemptor must be above it."""


@dataclass(frozen=True)
class Candidates:
    units: tuple[Unit, ...]
    excluded: tuple[tuple[Pod, str], ...]
    """Running pods of priority below some preemptor's power that may not be victims, and why."""

    @cached_property
    def pods(self) -> tuple[Pod, ...]:
        return tuple(p for u in self.units for p in u.pods)


def candidates(snapshot: Snapshot, power: Mapping[str, int], gpu: GpuConventions) -> Candidates:
    """The units that some pending pod's power could evict (the model decides which are)."""
    top = max(power.values(), default=NO_POWER)
    if not any(may_evict(top, p.priority) for p in snapshot.bound):
        return Candidates((), ())  # a unit's priority is its highest member's: none is low enough
    nodes = {n.name: n for n in snapshot.nodes}
    overcommitted = _overcommitted(snapshot.nodes, snapshot.bound)
    waiting = {g for p in snapshot.pending if (g := gang_of(p)) is not None}
    sharing = any(shares_gpu(p, gpu) for p in snapshot.pending)
    by_unit: dict[GangKey | str, list[Pod]] = {}
    why: dict[str, str] = {}
    for pod in snapshot.bound:
        if pod.finished or pod.node_name not in nodes:
            continue
        gang = gang_of(pod)
        if gang is None and pod.priority >= top:
            continue
        reason = exclusion(pod, gpu) or (OVERCOMMITTED if pod.node_name in overcommitted else "")
        reason = reason or (GANG_WAITING if gang in waiting else "")
        reason = reason or (GPU_BESIDE_SHARES if sharing and pod.requests.get(gpu.device_resource, 0) > 0 else "")
        if reason:
            why[pod.key] = reason
        by_unit.setdefault(gang if gang is not None else pod.key, []).append(pod)
    units, excluded = [], []
    for key, pods in by_unit.items():
        priority = max(p.priority for p in pods)
        if any(p.key in why for p in pods) or not may_evict(top, priority):
            excluded += [(p, why.get(p.key, GANG_MEMBER_KEPT)) for p in pods if may_evict(top, p.priority)]
            continue
        units.append(Unit(tuple(pods), key if isinstance(key, GangKey) else None, priority))
    return Candidates(tuple(units), tuple(excluded))


def _overcommitted(nodes: Sequence[Node], bound: Sequence[Pod]) -> set[str]:
    """Nodes whose running pods together request more of some resource than it allocates."""
    sums: dict[str, dict[str, int]] = {}
    for pod in bound:
        if not pod.finished:
            here = sums.setdefault(pod.node_name, {})
            for resource, amount in pod.requests.items():
                here[resource] = here.get(resource, 0) + max(amount, 0)
    return {n.name for n in nodes
            if any(amount > n.allocatable.get(r, 0) for r, amount in sums.get(n.name, {}).items() if amount > 0)}
