"""Which cluster events may make an unschedulable unit placeable: the kube-scheduler's
QueueingHints, at the grain of a unit.

The kube-scheduler keeps a pod that could not be placed in its *unschedulable* pool and moves it
back to the active or backoff queue only on a :class:`ClusterEvent` one of the plugins that
rejected it registered a hint for (``MoveAllToActiveOrBackoffQueue``), or when it has been there
``podMaxInUnschedulablePodsDuration`` (``UnschedulableTimeout``, 5 minutes). kubeplace plans a
unit (a pod, or a gang) against every rule at once, so a unit's hints are the events that may
help any of its pods (:func:`pod_hints`): every unit waits for capacity (a pod deleted or scaled
down, a node added or made more usable), a pod with required inter-pod affinity or a hard
topology spread constraint also for pods placed or relabelled, a pod with claims for its claims'
objects. A unit whose failure is not understood (an error, a plan that left room unused) is not
given hints: it backs off and comes back by itself, so nothing is lost.

The event names are the kube-scheduler's (``framework.ClusterEvent``: Resource and ActionType,
its label their concatenation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kubeplace.kube.objects import Pod
from kubeplace.plan.explain import LEFT_OUT
from kubeplace.plan.plan import Unplaced


@dataclass(frozen=True)
class ClusterEvent:
    """A kind of change of the cluster (not one object): ``resource`` and ``action`` as the
    kube-scheduler's ``fwk.ClusterEvent`` names them."""

    resource: str
    action: str

    def label(self) -> str:
        return f"{self.resource}{self.action}"


NODE_ADD = ClusterEvent("Node", "Add")
NODE_DELETE = ClusterEvent("Node", "Delete")
NODE_ALLOCATABLE = ClusterEvent("Node", "UpdateNodeAllocatable")
"""A node's allocatable grew (a shrink helps no pod)."""
NODE_LABEL = ClusterEvent("Node", "UpdateNodeLabel")
NODE_TAINT = ClusterEvent("Node", "UpdateNodeTaint")
"""Its taints changed, or ``spec.unschedulable`` (the kube-scheduler reads it as a taint)."""
ASSIGNED_POD_ADD = ClusterEvent("AssignedPod", "Add")
"""A pod became assigned to a node (bound, by this scheduler or another)."""
ASSIGNED_POD_DELETE = ClusterEvent("AssignedPod", "Delete")
"""An assigned pod was deleted or finished, or lost its node: its room is free."""
ASSIGNED_POD_SCALE_DOWN = ClusterEvent("AssignedPod", "UpdatePodScaleDown")
"""An assigned pod's requests shrank (an in-place resize included)."""
ASSIGNED_POD_LABEL = ClusterEvent("AssignedPod", "UpdatePodLabel")
NAMESPACE_LABEL = ClusterEvent("Namespace", "UpdateNamespaceLabel")
VOLUME_CHANGE = ClusterEvent("PersistentVolumeClaim", "All")
"""A claim, volume, storage class or CSI object added, changed or deleted."""
CLAIM_CHANGE = ClusterEvent("ResourceClaim", "All")
"""A resource claim, slice or device class added, changed or deleted."""
NODE_METRICS = ClusterEvent("NodeMetrics", "Update")
"""The measured usage was read again (LoadAware filters by it; it has no watch)."""
UNSCHEDULABLE_TIMEOUT = ClusterEvent("WildCard", "UnschedulableTimeout")
WILDCARD = ClusterEvent("WildCard", "All")
"""Moves every unschedulable unit (``framework.EventUnschedulableTimeout`` and the like)."""

CAPACITY = frozenset({NODE_ADD, NODE_ALLOCATABLE, NODE_LABEL, NODE_TAINT, ASSIGNED_POD_DELETE,
                      ASSIGNED_POD_SCALE_DOWN, NODE_METRICS})
"""What may help any pod: room freed or added, a node it could not use made usable."""
INTER_POD = frozenset({ASSIGNED_POD_ADD, ASSIGNED_POD_LABEL, NAMESPACE_LABEL, NODE_DELETE})
"""What may help a pod with required pod affinity or a hard topology spread constraint: a pod
placed (its match), relabelled, a namespace relabelled (namespaceSelector), a node gone (one
domain fewer)."""
ANTI_AFFINITY = frozenset({ASSIGNED_POD_LABEL, NAMESPACE_LABEL})
"""A pod with required anti-affinity: a pod it avoids may stop matching (deletion: CAPACITY)."""

PREBIND = frozenset({VOLUME_CHANGE, CLAIM_CHANGE})
"""What a unit placed but waiting for its claims to be bound (PreBind) waits for."""
TRANSIENT = CAPACITY | {NAMESPACE_LABEL, VOLUME_CHANGE, CLAIM_CHANGE}
"""What retries at once a unit that failed for no reason the cycle understood, when it happened
while the unit was planned (not a pod placed: that happens at every binding)."""


def pod_hints(pod: Pod) -> frozenset[ClusterEvent]:
    """The events that may make ``pod`` placeable."""
    hints = CAPACITY
    if pod.affinity or any(c.hard for c in pod.spread):
        hints |= INTER_POD
    if pod.anti_affinity:
        hints |= ANTI_AFFINITY
    if pod.volumes:
        hints |= {VOLUME_CHANGE}
    if pod.resource_claims:
        hints |= {CLAIM_CHANGE}
    return hints


def unit_hints(pods: Iterable[Pod]) -> frozenset[ClusterEvent]:
    """The events that may help any of ``pods`` (a unit's): what may help one member may
    complete the gang."""
    hints: frozenset[ClusterEvent] = CAPACITY
    for pod in pods:
        hints |= pod_hints(pod)
    return hints


def unplaced_hints(entries: Sequence[Unplaced], pods: Mapping[tuple[str, str], Pod],
                   proven: bool) -> frozenset[ClusterEvent] | None:
    """The events that may let the pods a plan left out be placed; None when the plan was not
    proven to place all it could (``proven``: its placed weight is its bound) and left one out
    of a node with room for it (the time limit ran out, say): that unit backs off and comes
    back by itself (it may fit as it is)."""
    if not proven and any(LEFT_OUT in reason for entry in entries for reason in entry.reasons):
        return None
    return unit_hints(pods[(e.namespace, e.name)] for e in entries)
