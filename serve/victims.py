"""Preemption in ``kubeplace serve``: carrying out the victims a plan lists, gracefully.

For each preemptor of a plan (``plan.preempt``), in the kube-scheduler's manner:

1. each victim gets the ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``) and is
   deleted with its own grace period, its uid as precondition (or, with ``eviction_api``, evicted
   through the Eviction API, which also honours PodDisruptionBudgets: 429 is a refusal);
2. the preemptor gets ``status.nominatedNodeName`` (PATCH pods/status) and is not bound yet: it
   waits in the queue while its victims terminate; their deletion wakes it and the next cycle
   binds it (it may preempt nobody else meanwhile: a pod nominated where pods of lower priority
   still terminate waits, ``models.preemption``);
3. Events: ``Preempted`` on each victim ("Preempted by ns/name on node n", the kube-scheduler's
   words) and ``Preempting`` on the preemptor.

While a nominated pod waits, its room stays reserved: every pending pod nominated to a node and
not in the batch counts as if bound there (:func:`reserve_nominated`), whichever scheduler
nominated it. What this scheduler removed or nominated counts as such at once, before the watch
shows it (a victim is never chosen twice). When only some of a preemptor's victims could be
removed, those count as *wasted evictions* (the metric must stay 0: the plan never asks for one,
only a refusal by the API server makes one); it is nominated all the same and planned again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kubeplace.kube.errors import ClusterError, Conflict, DisruptionBudget, NotFound
from kubeplace.kube.objects import Pod
from kubeplace.plan.plan import Placement, Plan, Preemption
from kubeplace.serve import events as ev
from kubeplace.serve.decisions import decision
from kubeplace.serve.events import EventRecorder
from kubeplace.serve.prometheus import Metrics

log = logging.getLogger("kubeplace.serve")

PREEMPTED, PREEMPTING = "Preempted", "Preempting"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


class PreemptClient(Protocol):
    """What preemption writes through :class:`kube.client.Cluster` (tests pass a fake)."""

    def delete_pod(self, namespace: str, name: str, uid: str) -> None: ...

    def evict(self, namespace: str, name: str, uid: str, dry_run: bool = False) -> None: ...

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True)
class Nominated:
    """A preemptor held back until its victims are gone."""

    pod: str
    node: str
    victims: tuple[str, ...]


def reserve_nominated(pods: Sequence[Pod], in_batch: Callable[[Pod], bool]) -> list[Pod]:
    """``pods`` with every pending pod that is nominated to a node and not in the batch counted as
    bound there: the room its preemption freed stays its own while its victims terminate."""
    return [replace(pod, node_name=pod.nominated_node)
            if pod.nominated_node and not pod.node_name and not pod.deleting and not pod.finished
            and not in_batch(pod) else pod for pod in pods]


class Preemptions:
    def __init__(self, client: PreemptClient, recorder: EventRecorder, metrics: Metrics, scheduler_name: str,
                 eviction_api: bool = False, clock: Callable[[], float] = time.monotonic,
                 remember_seconds: float = 30.0, decide: Callable[..., None] = decision) -> None:
        self.client = client
        self.decide = decide
        self.recorder = recorder
        self.metrics = metrics
        self.scheduler_name = scheduler_name
        self.eviction_api = eviction_api
        self.clock = clock
        self.remember_seconds = remember_seconds
        self._lock = threading.Lock()  # adjust (planning) and the writes below may run in two threads
        self._removed: dict[str, float] = {}  # victim key -> until when it counts as terminating
        self._nominated: dict[str, tuple[str, float]] = {}  # preemptor key -> (node, until)

    def sizes(self) -> dict[str, int]:
        with self._lock:
            return {"victims_removed": len(self._removed), "victims_nominated": len(self._nominated)}

    def adjust(self, pods: list[Pod], in_batch: Callable[[Pod], bool]) -> list[Pod]:
        """The pods a cycle's snapshot is built from (one for one), as this scheduler's own writes
        leave them even before the watch shows them: the victims it removed are terminating (never
        chosen twice), the pods it nominated keep their room (:func:`reserve_nominated`)."""
        now = self.clock()
        with self._lock:
            self._removed = {k: t for k, t in self._removed.items() if t > now}
            self._nominated = {k: v for k, v in self._nominated.items() if v[1] > now}
            removed, nominated = set(self._removed), {k: node for k, (node, _) in self._nominated.items()}
        if not removed and not nominated:  # (the usual case: no pod's key is made)
            return reserve_nominated(pods, in_batch)
        out = []
        for pod in pods:
            if pod.key in removed and not pod.deleting:
                pod = replace(pod, deleting=True)
            elif pod.key in nominated and not pod.nominated_node and not pod.node_name:
                pod = replace(pod, nominated_node=nominated[pod.key])
            out.append(pod)
        return reserve_nominated(out, in_batch)

    def carry_out(self, plan: Plan, pods: Mapping[tuple[str, str], Pod],
                  running: Mapping[str, Pod]) -> dict[str, Nominated]:
        """Removes the plan's victims and nominates their preemptors; returns the preemptors
        (``namespace/name``) that must not be bound in this cycle."""
        summary = plan.summary.preemption
        if summary is not None and summary.attempts:
            self.metrics.preemption_attempts.inc(summary.attempts)
        if not plan.preemptions:
            return {}
        where = {f"{p.namespace}/{p.name}": p for p in plan.placements}
        victims_of: dict[str, list[Preemption]] = {}
        for victim in plan.preemptions:
            for preemptor in victim.for_pods:
                victims_of.setdefault(preemptor, []).append(victim)
        removed: dict[str, bool] = {}
        for victim in plan.preemptions:
            removed[victim.key] = self._remove(victim, running.get(victim.key))
        held = {}
        for key, victims in sorted(victims_of.items()):
            placement = where[key]
            gone = [removed[v.key] for v in victims]
            if not all(gone):
                wasted = sum(gone)
                self.metrics.preemption_wasted.inc(wasted)
                log.warning("preemption incomplete", extra={"fields": {
                    "pod": key, "node": placement.node, "removed": wasted, "refused": len(gone) - wasted}})
            held[key] = Nominated(key, placement.node, tuple(v.key for v in victims))
            self._nominate(pods[(placement.namespace, placement.name)], placement, victims, all(gone))
        return held

    def _remove(self, victim: Preemption, pod: Pod | None) -> bool:
        """Deletes (or evicts) one victim; True when it is gone or going."""
        preemptors = ", ".join(victim.for_pods)
        message = f"Preempted by {preemptors} on node {victim.node}"
        try:
            if self.eviction_api:
                self.client.evict(victim.namespace, victim.name, victim.uid)
            else:
                self.client.patch_pod_status(victim.namespace, victim.name, {"conditions": [{
                    "type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
                    "message": f"{self.scheduler_name}: preempting to accommodate a higher priority pod"}]})
                self.client.delete_pod(victim.namespace, victim.name, victim.uid)
        except NotFound:
            return True  # gone already: its room is free
        except (Conflict, DisruptionBudget, ClusterError) as error:
            log.warning("victim not removed", extra={"fields": {"pod": victim.key, "node": victim.node,
                                                                "why": str(error)}})
            return False
        self.metrics.preemption_victims.inc()
        with self._lock:
            self._removed[victim.key] = self.clock() + self.remember_seconds
        self.decide(pod=victim.key, node=victim.node, outcome="preempted", why=message)
        if pod is not None:
            self.recorder.pod_event(pod, PREEMPTED, message)
        return True

    def _nominate(self, pod: Pod, placement: Placement, victims: Sequence[Preemption], complete: bool) -> None:
        names = ", ".join(v.key for v in victims)
        with self._lock:
            self._nominated[pod.key] = (placement.node, self.clock() + self.remember_seconds)
        try:
            self.client.patch_pod_status(pod.namespace, pod.name, {"nominatedNodeName": placement.node})
        except ClusterError as error:
            log.warning("nomination not written", extra={"fields": {"pod": pod.key, "why": str(error)}})
        state = "" if complete else " (some could not be removed)"
        self.recorder.pod_event(pod, PREEMPTING, f"Preempting {names} on node {placement.node}{state}", ev.NORMAL)
        self.decide(pod=pod.key, node=placement.node, outcome="nominated", why=f"waiting for {names} to terminate")
