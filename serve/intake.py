"""What the informer's events change for ``kubeplace serve``: the units queued for a cycle, and
since when each pending pod of ours waits.

A pending pod of ours (its scheduler name, no node, not terminating, not gated, not finished,
in the namespaces served) queues its *unit*: its gang, or itself alone. A new gang member, a
PodGroup added or changed, brings its gang back at once; a change of one of its pods that
placement reads (not its status) brings it back after its backoff. Every other change is told
to the queue as the kube-scheduler's cluster event (:mod:`serve.hints`), which brings back the
unschedulable units with a hint for it: a node added, deleted, or changed where placement reads
it (allocatable grown, labels, taints; not a heartbeat), a pod assigned, deleted, finished,
scaled down or relabelled, a namespace's labels, storage and claim objects. A pod seen bound
or deleted is forgotten (its assumed binding, its wait, its last logged decision).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubeplace.kube.dra_parse import RESOURCE_GROUP as DRA_GROUP
from kubeplace.kube.errors import InputError
from kubeplace.kube.gangs import gang_of
from kubeplace.kube.objects import GangKey, Pod
from kubeplace.kube.parse import parse_pod
from kubeplace.kube.quantity import QuantityError, milli_value
from kubeplace.serve import hints
from kubeplace.serve.decisions import DecisionLog
from kubeplace.serve.gang_members import GangMembers
from kubeplace.serve.informer import ADDED, DELETED, MODIFIED, STORAGE_RESOURCES, RawObject, Store, object_key
from kubeplace.serve.outcomes import SchedulerOutcomes
from kubeplace.serve.queue import SchedulingQueue, Unit
from kubeplace.serve.snapshots import Assumed


def unit_of(pod: Pod) -> Unit:
    """The pod's gang, or the pod alone."""
    return gang_of(pod) or pod.key


class Intake:
    def __init__(self, queue: SchedulingQueue, store: Store, scheduler_name: str, namespaces: frozenset[str] | None,
                 assumed: Assumed, decide: DecisionLog, outcomes: SchedulerOutcomes,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.queue, self.store, self.assumed, self.decide, self.outcomes = queue, store, assumed, decide, outcomes
        self.scheduler_name, self.namespaces, self.clock = scheduler_name, namespaces, clock
        self._lock = threading.Lock()
        self._first_seen: dict[str, float] = {}
        self._attempts: dict[str, int] = {}
        """Cycles that planned each pod seen pending (its keys are among ``_first_seen``'s)."""
        self.members = GangMembers(store)
        """Which gangs have their minMember pods (the queue plans a complete gang at once)."""

    def on_change(self, resource: str, event: str, old: RawObject | None, new: RawObject | None) -> None:
        if resource == "pods":
            raw = new if new is not None else old
            if raw is not None:
                self.outcomes.seen(object_key(raw), event, raw)
            self.pod_changed(event, old, new)
        elif resource == "nodes":
            for change in node_events(event, old, new):
                self.queue.move(change)
        elif resource == "namespaces":
            if event == MODIFIED and _labels(old) != _labels(new):
                self.queue.move(hints.NAMESPACE_LABEL)
        elif resource in STORAGE_RESOURCES:  # a claim bound, a volume or class added: pods waiting may go
            self.queue.move(hints.CLAIM_CHANGE if resource.startswith(DRA_GROUP) else hints.VOLUME_CHANGE)
        elif resource.endswith("/podgroups") and new is not None and event in (ADDED, MODIFIED):
            meta = new.get("metadata") or {}
            gang = GangKey(str(meta.get("namespace") or "default"), str(meta.get("name", "")))
            self.queue.activate(gang, self.complete(gang))

    def pod_changed(self, event: str, old: RawObject | None, new: RawObject | None) -> None:
        raw = new if new is not None else old
        if raw is None:
            return
        key = object_key(raw)
        self._count_member(event, raw, key)
        for change in assigned_pod_events(event, old, new):
            self.queue.move(change)
        if event == DELETED or (raw.get("spec") or {}).get("nodeName"):
            self.assumed.forget(key)
            self.forget(key)
            self.decide.forget(key)
            if event == DELETED and not (raw.get("spec") or {}).get("nodeName") and self.is_ours(raw):
                unit = self.unit_of_raw(raw)
                if isinstance(unit, GangKey):
                    self.queue.activate(unit, self.complete(unit))
                else:
                    self.queue.forget(unit)
            return
        if not self.is_ours(raw):
            return
        with self._lock:
            self._first_seen.setdefault(key, self.clock())
        unit = self.unit_of_raw(raw)
        if event == ADDED and isinstance(unit, GangKey):
            self.queue.activate(unit, self.complete(unit))  # a new member: its gang may be complete now
        elif event == MODIFIED and old is not None and pod_updated(old, raw):
            self.queue.updated(unit, self.complete(unit))
        else:
            self.queue.add(unit, self.complete(unit))

    def resync(self) -> None:
        """Queues every pending pod of the store (at start and on becoming the leader)."""
        for raw in self.store.items("pods"):
            self.pod_changed(MODIFIED, None, raw)

    def is_ours(self, raw: RawObject) -> bool:
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        return (spec.get("schedulerName") == self.scheduler_name and not spec.get("nodeName")
                and not meta.get("deletionTimestamp") and not spec.get("schedulingGates")
                and (raw.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and (self.namespaces is None or meta.get("namespace", "default") in self.namespaces))

    def complete(self, unit: Unit) -> bool:
        """A pod alone is complete; a gang once its minMember pods exist."""
        return not isinstance(unit, GangKey) or self.members.complete(unit)

    def _count_member(self, event: str, raw: RawObject, key: str) -> None:
        """Counts the pod as a member of its gang (any scheduler's, pending or bound) while it exists."""
        if event == DELETED:
            self.members.deleted(key)
            return
        typed = self.store.typed("pods", key) if self.store.get("pods", key) is raw else None
        try:
            pod = typed if isinstance(typed, Pod) else parse_pod(raw)
        except InputError:
            self.members.deleted(key)
            return
        self.members.changed(key, pod, gang_of(pod))

    def unit_of_raw(self, raw: RawObject) -> Unit:
        key = object_key(raw)
        typed = self.store.typed("pods", key) if self.store.get("pods", key) is raw else None
        if isinstance(typed, Pod):
            return unit_of(typed)  # parsed once by the store
        try:
            return unit_of(parse_pod(raw))
        except InputError:
            return key

    # ------------------------------------------------------------------ since when pods wait

    def first_seen(self, keys: list[str], default: float) -> list[float]:
        """When each pod was first seen pending (``default`` for those not seen)."""
        with self._lock:
            return [self._first_seen.get(key, default) for key in keys]

    def sizes(self) -> dict[str, int]:
        with self._lock:
            first_seen, attempts = len(self._first_seen), len(self._attempts)
        return {"intake_first_seen": first_seen, "intake_attempts": attempts, "intake_gangs": len(self.members)}

    def attempted(self, keys: list[str]) -> None:
        """A cycle plans these pods: one more attempt each (of those seen pending)."""
        with self._lock:
            for key in keys:
                if key in self._first_seen:
                    self._attempts[key] = self._attempts.get(key, 0) + 1

    def attempts(self, key: str) -> int:
        """The cycles that planned pod ``key`` since it was first seen pending."""
        with self._lock:
            return self._attempts.get(key, 0)

    def forget(self, key: str) -> float | None:
        """Forgets a pod's wait (bound, deleted); when it was first seen pending, if it was."""
        with self._lock:
            self._attempts.pop(key, None)
            return self._first_seen.pop(key, None)


def node_events(event: str, old: RawObject | None, new: RawObject | None) -> list[hints.ClusterEvent]:
    """The cluster events of a Node's watch event (the kube-scheduler's
    ``nodeSchedulingPropertiesChange``, of what placement reads; a heartbeat is none)."""
    if event == ADDED:
        return [hints.NODE_ADD]
    if event == DELETED:
        return [hints.NODE_DELETE]
    old, new = old or {}, new or {}
    changes = []
    if _labels(old) != _labels(new):
        changes.append(hints.NODE_LABEL)
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if (str(old_spec.get("taints")) != str(new_spec.get("taints"))
            or bool(old_spec.get("unschedulable")) != bool(new_spec.get("unschedulable"))):
        changes.append(hints.NODE_TAINT)
    if _grew((old.get("status") or {}).get("allocatable"), (new.get("status") or {}).get("allocatable")):
        changes.append(hints.NODE_ALLOCATABLE)
    return changes


def assigned_pod_events(event: str, old: RawObject | None, new: RawObject | None) -> list[hints.ClusterEvent]:
    """The cluster events of a pod's watch event for the units waiting (a pending pod's own
    changes are its unit's, not these): a pod assigned to a node, its room freed (deleted,
    finished, its node taken away), its requests shrunk, its labels changed."""
    was = _assigned(old)
    if event == DELETED:  # (a pending pod nominated to a node held room there: NodeResourcesFit's hint)
        gone = old if old is not None else new
        held = was or _assigned(new) or bool(((gone or {}).get("status") or {}).get("nominatedNodeName"))
        return [hints.ASSIGNED_POD_DELETE] if held else []
    now = _assigned(new)
    if not was:
        return [hints.ASSIGNED_POD_ADD] if now else []
    if not now:
        return [hints.ASSIGNED_POD_DELETE]
    assert old is not None and new is not None
    changes = []
    if _labels(old) != _labels(new):
        changes.append(hints.ASSIGNED_POD_LABEL)
    if _scaled_down(old, new):
        changes.append(hints.ASSIGNED_POD_SCALE_DOWN)
    return changes


def pod_updated(old: RawObject, new: RawObject) -> bool:
    """Whether a pending pod changed beyond its status and bookkeeping (the kube-scheduler's
    ``isPodUpdated``: resourceVersion, generation, managedFields, finalizers and the status but
    its resourceClaimStatuses left out)."""
    def strip(raw: RawObject) -> RawObject:
        meta = {k: v for k, v in (raw.get("metadata") or {}).items()
                if k not in ("resourceVersion", "generation", "managedFields", "finalizers")}
        claims = (raw.get("status") or {}).get("resourceClaimStatuses")
        return {**{k: v for k, v in raw.items() if k not in ("metadata", "status")}, "metadata": meta,
                "claims": claims}
    return strip(old) != strip(new)


def _assigned(pod: RawObject | None) -> bool:
    """A pod on a node, holding its room there (not finished)."""
    return (pod is not None and bool((pod.get("spec") or {}).get("nodeName"))
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def _scaled_down(old: RawObject, new: RawObject) -> bool:
    """Whether a resource request of the pod shrank or went (``extractPodScaleDown``; the
    requests the status reports after an in-place resize count)."""
    if _requests_view(old) == _requests_view(new):
        return False
    try:
        before, after = parse_pod(old).requests, parse_pod(new).requests
    except InputError:
        return True  # (unsure: a unit waiting is retried)
    return any(after.get(name, 0) < amount for name, amount in before.items())


def _requests_view(pod: RawObject) -> str:
    """What a pod's requests are read from (``kube.requests``: the spec's, and its status's
    during an in-place resize)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return str(([c.get("resources") for c in spec.get("containers") or []],
                [c.get("resources") for c in spec.get("initContainers") or []], spec.get("overhead"),
                spec.get("resources"), status.get("containerStatuses"), status.get("initContainerStatuses"),
                status.get("resources"), status.get("allocatedResources"), status.get("conditions")))


def _grew(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Whether some resource of ``new`` is above ``old``'s (a quantity that does not parse counts)."""
    if old == new:
        return False
    old, new = old or {}, new or {}
    for name, value in new.items():
        try:
            if name not in old or milli_value(value) > milli_value(old[name]):
                return True
        except QuantityError:
            return True  # (unsure: units waiting are retried)
    return False


def _labels(obj: RawObject | None) -> Mapping[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})
