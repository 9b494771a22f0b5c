"""What the informer's events change for ``kubeplace serve``: the units queued for a cycle, and
since when each pending pod of ours waits.

A pending pod of ours (its scheduler name, no node, not terminating, not gated, not finished,
in the namespaces served) queues its *unit*: its gang, or itself alone. A new gang member, a
PodGroup added or changed, brings its gang back at once; a node added or changed where
placement reads it (not a heartbeat), a namespace's labels, storage objects, or a bound pod
deleted (capacity freed) bring every backing-off unit back. A pod seen bound or deleted is
forgotten (its assumed binding, its wait, its last logged decision).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubeplace.kube.errors import InputError
from kubeplace.kube.gangs import gang_of
from kubeplace.kube.objects import GangKey, Pod
from kubeplace.kube.parse import parse_pod
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
        self.members = GangMembers(store)
        """Which gangs have their minMember pods (the queue plans a complete gang at once)."""

    def on_change(self, resource: str, event: str, old: RawObject | None, new: RawObject | None) -> None:
        if resource == "pods":
            raw = new if new is not None else old
            if raw is not None:
                self.outcomes.seen(object_key(raw), event, raw)
            self.pod_changed(event, old, new)
        elif resource == "nodes":
            if event == ADDED or (event == MODIFIED and _node_view(old) != _node_view(new)):
                self.queue.cluster_changed()
        elif resource == "namespaces":
            if event == MODIFIED and _labels(old) != _labels(new):
                self.queue.cluster_changed()
        elif resource in STORAGE_RESOURCES:
            self.queue.cluster_changed()  # a claim bound, a volume or class added: pods waiting may go
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
        if event == DELETED or (raw.get("spec") or {}).get("nodeName"):
            self.assumed.forget(key)
            self.forget(key)
            self.decide.forget(key)
            if event == DELETED:
                if (raw.get("spec") or {}).get("nodeName"):
                    self.queue.cluster_changed()  # capacity freed
                elif self.is_ours(raw):
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
            first_seen = len(self._first_seen)
        return {"intake_first_seen": first_seen, "intake_gangs": len(self.members)}

    def forget(self, key: str) -> float | None:
        """Forgets a pod's wait (bound, deleted); when it was first seen pending, if it was."""
        with self._lock:
            return self._first_seen.pop(key, None)


def _node_view(node: RawObject | None) -> tuple[Any, ...]:
    """The part of a Node placement reads (not its heartbeats)."""
    node = node or {}
    spec, status = node.get("spec") or {}, node.get("status") or {}
    return (_labels(node), str(spec.get("taints")), bool(spec.get("unschedulable")), str(status.get("allocatable")))


def _labels(obj: RawObject | None) -> Mapping[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})
