"""The snapshot each ``serve`` cycle plans on.

Built from the informer's store, whose nodes and pods are already typed (parsed once when they
changed, see :class:`serve.informer.Store`), plus:

- *assumed* bindings: pods this scheduler decided to bind that the watch has not shown bound
  yet (in flight, or bound and not seen) count as bound where they go, so the next cycle holds
  their capacity and never plans them again; a binding that fails forgets its pod at once, and
  an assumption expires after ``assume_seconds``;
- the rebalance targets (``rebalance/targets.py``), re-read every ``targets_refresh`` seconds:
  a replacement pod of a moved workload is pinned to its target node;
- the measured usage (NodeMetrics and PodMetrics), re-read every ``usage_refresh`` seconds,
  none older than ``metrics_max_age``.

An object that does not parse (or that a gang rule refuses) is left out and reported, never a
reason to stop scheduling.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from kubeplace.kube.errors import ClusterError, InputError
from kubeplace.kube.gangs import gang_of
from kubeplace.kube.metrics import DEFAULT_MAX_AGE, fresh_metrics
from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.kube.parse import build_snapshot, parse_pod
from kubeplace.kube.raw_objects import object_label
from kubeplace.rebalance.targets import TARGETS_CONFIGMAP, Target, parse_targets, steer
from kubeplace.serve.informer import CLUSTER, RawObject, Store, parse_watched, with_node_name

log = logging.getLogger("kubeplace.serve")
UsageSource = Callable[[], tuple[list[tuple[Mapping[str, Any], str]], str]]
"""Reads NodeMetrics and PodMetrics: (objects, "" or why the metrics API is unavailable)."""


class ConfigMapReader(Protocol):
    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None: ...


class Assumed:
    """Pod key -> (uid, node, annotations) of bindings not confirmed by the watch yet; thread-safe.
    The annotations are those the Binding gives the pod (the GPU devices it takes): until the
    watch shows them, the next cycles must see the devices taken, not guess them first-fit."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self._lock = threading.Lock()
        self._pods: dict[str, tuple[str, str, Mapping[str, str], float]] = {}

    def assume(self, key: str, uid: str, node: str, annotations: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self._pods[key] = (uid, node, dict(annotations or {}), self.clock() + self.seconds)

    def forget(self, key: str) -> None:
        with self._lock:
            self._pods.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)

    def current(self) -> dict[str, tuple[str, str, Mapping[str, str]]]:
        """The assumptions in force (the expired ones are dropped)."""
        now = self.clock()
        with self._lock:
            for key in [k for k, (*_, until) in self._pods.items() if until < now]:
                del self._pods[key]
            return {key: (uid, node, notes) for key, (uid, node, notes, _) in self._pods.items()}


class Snapshots:
    def __init__(self, store: Store, client: ConfigMapReader, scheduler_name: str, namespaces: frozenset[str] | None,
                 *, assume_seconds: float = 30.0, targets_namespace: str = "kubeplace-system",
                 targets_refresh: float = 10.0, usage_source: UsageSource | None = None, usage_refresh: float = 15.0,
                 metrics_max_age: float = DEFAULT_MAX_AGE, clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.client, self.clock = store, client, clock
        self.scheduler_name, self.namespaces = scheduler_name, namespaces
        self.targets_namespace, self.targets_refresh = targets_namespace, targets_refresh
        self.usage_source, self.usage_refresh, self.metrics_max_age = usage_source, usage_refresh, metrics_max_age
        self.assumed = Assumed(assume_seconds, clock)
        self._targets: tuple[float, list[Target]] = (float("-inf"), [])
        self._usage: tuple[float, list[RawObject], str] = (float("-inf"), [], "")
        self._typed_last: dict[str, tuple[list[tuple[RawObject, Any]], list[tuple[RawObject, Any]],
                                          list[tuple[RawObject, str]]]] = {}
        """Per resource, the store's last list and what :meth:`_typed` made of it (the nodes: the
        same list cycle after cycle until one changes)."""
        self._nodes: tuple[list[tuple[RawObject, Any]] | None, list[Node]] = (None, [])

    def take(self, adjust: Callable[[list[Pod]], list[Pod]] | None = None,
             keep: Callable[[Pod], bool] | None = None) -> tuple[Snapshot, list[tuple[RawObject, str]]]:
        """The snapshot of the whole store (every pending pod of ours), and the objects left out
        with why. ``adjust`` may change the pods (one for one) before the snapshot is built
        (preemption: the room of nominated pods, ``serve.preempt``). With ``keep``, a pending pod
        of ours that nothing else reads (:func:`_read_alone`: no gang, not nominated) is in the
        snapshot only when ``keep`` says so: a cycle plans some units of a backlog of thousands,
        and the snapshot is built over the pods it holds."""
        assumed = self.assumed.current()
        broken: list[tuple[RawObject, str]] = []
        typed_nodes = self._typed("nodes", broken)
        if self._nodes[0] is not typed_nodes:  # (the same list: the same nodes)
            self._nodes = (typed_nodes, [n for _, n in typed_nodes if isinstance(n, Node)])
        nodes = list(self._nodes[1])
        raws, pods = [], []
        for raw, pod in self.store.typed_items("pods"):  # (every pod of the cluster: one pass)
            if not isinstance(pod, Pod):
                pod = _parsed(raw, pod, broken)
                if pod is None:
                    continue
            mine = assumed.get(pod.key) if assumed and not pod.node_name else None
            if mine is not None and pod.uid == mine[0]:
                pod = replace(pod, node_name=mine[1], annotations={**pod.annotations, **mine[2]})
                raw = with_node_name(raw, mine[1])
            raws.append(raw)
            pods.append(pod)
        self._steer(raws, pods)
        if adjust is not None:
            pods = adjust(pods)
        if keep is not None:
            kept = [i for i, pod in enumerate(pods)  # (a bound pod is never read alone: no call for it)
                    if pod.node_name or not _read_alone(pod, self.scheduler_name) or keep(pod)]
            raws, pods = [raws[i] for i in kept], [pods[i] for i in kept]
        others = [obj for resource in self.store.resources() if resource not in ("nodes", "pods")
                  for obj in self.store.items(resource)] + self._usage_objects()
        namespaces = set(self.namespaces) if self.namespaces is not None else None
        while True:
            try:
                snapshot = build_snapshot([(o, CLUSTER) for o in others], namespaces=namespaces,
                                          scheduler_name=self.scheduler_name, source=CLUSTER, nodes=nodes, pods=pods)
                return fresh_metrics(snapshot, self.metrics_max_age, time.time()), broken
            except InputError as error:  # one bad object (or pod a gang rule refuses) must not stop scheduling
                for objects, typed in ((others, None), (raws, pods)):
                    culprit = next((i for i, o in enumerate(objects)
                                    if error.obj in (object_label(o), _namespaced(o))), None)
                    if culprit is not None:
                        broken.append((objects.pop(culprit), str(error)))
                        if typed is not None:
                            typed.pop(culprit)
                        break
                else:
                    raise

    def _typed(self, resource: str, broken: list[tuple[RawObject, str]]) -> list[tuple[RawObject, Any]]:
        """(raw, typed) of a resource; one that does not parse goes to ``broken``. Shared, not
        copied: read-only (the same list while the store's is the same)."""
        items = self.store.typed_items(resource)
        last = self._typed_last.get(resource)
        if last is not None and last[0] is items:
            broken += last[2]
            return last[1]
        out, left_out = [], []
        for raw, typed in items:
            if typed is None:  # a store without a parser
                try:
                    typed = parse_watched(resource, raw)
                except InputError as error:
                    typed = error
            if isinstance(typed, InputError):
                left_out.append((raw, str(typed)))
            else:
                out.append((raw, typed))
        self._typed_last[resource] = (items, out, left_out)
        broken += left_out
        return out

    def _steer(self, raws: list[RawObject], pods: list[Pod]) -> None:
        """Pins the pods that rebalance targets name to their target node (in place)."""
        targets = self.rebalance_targets()
        if not targets:
            return
        for i, pinned in enumerate(steer(raws, targets, self.scheduler_name)):
            if pinned is not raws[i]:
                pods[i] = parse_pod(pinned, CLUSTER)

    def _usage_objects(self) -> list[RawObject]:
        """NodeMetrics and PodMetrics, re-read every ``usage_refresh`` seconds; none (and one
        warning when that changes) while the metrics API is unavailable."""
        if self.usage_source is None:
            return []
        read_at, objects, why = self._usage
        if self.clock() - read_at < self.usage_refresh:
            return objects
        try:
            sourced, unavailable = self.usage_source()
        except ClusterError as error:
            sourced, unavailable = [], str(error)
        if unavailable and unavailable != why:
            log.warning("metrics API not available; load-aware rules use requests only",
                        extra={"fields": {"why": unavailable}})
        objects = [dict(obj) for obj, _ in sourced]
        self._usage = (self.clock(), objects, unavailable)
        return objects

    def rebalance_targets(self) -> list[Target]:
        """The rebalance targets in force, re-read every few seconds; none when they cannot be
        read (the pods then go wherever the plan says)."""
        read_at, targets = self._targets
        if self.clock() - read_at < self.targets_refresh:
            return targets
        try:
            data = self.client.read_config_map(self.targets_namespace, TARGETS_CONFIGMAP)
        except ClusterError as error:
            log.warning("rebalance targets unreadable", extra={"fields": {"why": str(error)}})
            data = None
        targets = parse_targets(data, datetime.datetime.now(datetime.UTC))
        self._targets = (self.clock(), targets)
        return targets


def _parsed(raw: RawObject, typed: Any, broken: list[tuple[RawObject, str]]) -> Pod | None:
    """A pod the store did not keep typed (a store without a parser): parsed now; None, and the
    pod in ``broken`` with why, when it does not parse."""
    if typed is None:
        try:
            typed = parse_watched("pods", raw)
        except InputError as error:
            typed = error
    if isinstance(typed, InputError):
        broken.append((raw, str(typed)))
        return None
    return typed if isinstance(typed, Pod) else None


def _read_alone(pod: Pod, scheduler_name: str) -> bool:
    """A pending pod of ours that only its own plan reads: no node (not using capacity), not
    nominated (not holding room), not gated, not going, in no gang of any kind (no gang, Job,
    LeaderWorkerSet or Kueue Workload counts it): leaving it out changes nothing of the rest."""
    return (pod.scheduler_name == scheduler_name and not pod.node_name and not pod.nominated_node
            and not pod.deleting and not pod.finished and not pod.scheduling_gates and gang_of(pod) is None)


def _namespaced(obj: RawObject) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind', '')} {meta.get('namespace') or 'default'}/{meta.get('name', '')}"
