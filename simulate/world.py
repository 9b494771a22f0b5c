"""The simulated cluster's state: an informer store that the simulation writes as the API server
and the watch would, a simulated clock, and the client the scheduler under test writes through.

A binding sets the pod's ``nodeName`` in the store at once (the watch shows it at the same
simulated instant) and schedules its departure ``duration`` later. A preempted pod is deleted,
as the API server does, and comes back at once as a new pending pod (its controller recreates
it: the same spec under the name ``<name>-r<N>``, N counting the restarts) that runs its whole
duration again once placed; the trace pod's record follows it.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeplace.kube.errors import DNS1123_SUBDOMAIN_MAX, Conflict, InputError, NotFound
from kubeplace.kube.gangs import PLAIN_LABEL
from kubeplace.kube.objects import CPU, MEMORY, Node, Pod
from kubeplace.kube.parse import parse_pod
from kubeplace.models.gpu import WHOLE, GpuNeed, GpuRequestError, devices_of, gpu_need
from kubeplace.serve.informer import ADDED, DELETED, MODIFIED, Store, object_key, with_node_name
from kubeplace.simulate.cluster import Cluster
from kubeplace.simulate.fragmentation_series import Fragmentation, workload_shapes
from kubeplace.simulate.names import API_LATENCY
from kubeplace.simulate.trace import RawObject, Trace, timestamp

Listener = Callable[[str, str, RawObject | None, RawObject | None], None]
NODE, ARRIVE, LEAVE, GIVE_UP = 0, 1, 2, 3
"""Event kinds, in their order at one instant: nodes going or coming back, the arrivals, the
departures last (see :meth:`World.happen`), then the pods whose owner gave up waiting."""


@dataclass(frozen=True)
class NodeEvent:
    """At ``at`` the node ``name`` of the cluster goes away (``present`` False: deleted, and its
    pods with it, as the pod garbage collector deletes the pods of a node that is gone; their
    controllers make them again, pending) or comes back."""

    at: float
    name: str
    present: bool


class SimClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class PodRecord:
    """One pod of the trace over the simulation."""

    key: str
    arrival: float
    duration: float | None
    priority: int
    gpu_milli: int
    gang: str = ""
    start: float | None = None
    end: float | None = None
    node: str = ""
    preempted: int = 0
    incarnation: int = 0
    gave_up: bool = False
    """Deleted by its owner after waiting its patience (``World``'s ``patience``) without starting."""


@dataclass(frozen=True)
class Usage:
    cpu: int = 0
    memory: int = 0
    gpu: int = 0
    """milli-GPUs."""


@dataclass
class Totals:
    capacity: Usage = field(default_factory=Usage)
    used: Usage = field(default_factory=Usage)
    pending_pods: int = 0
    pending_gpu: int = 0
    fragmented_gpu: float = 0.0
    """milli-GPUs the workload could not use (FGD's measure, ``simulate.fragmentation``)."""
    free_gpu: int = 0
    """milli-GPUs free on the nodes' devices."""


def usage_of(pod: Pod) -> Usage:
    try:
        need = gpu_need(pod.requests)
    except GpuRequestError:  # (a pod the scheduler refuses as bad input: it never runs)
        need = GpuNeed()
    return Usage(pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0), need.count * need.milli)


def _add(a: Usage, b: Usage, sign: int = 1) -> Usage:
    return Usage(a.cpu + sign * b.cpu, a.memory + sign * b.memory, a.gpu + sign * b.gpu)


class World:
    def __init__(self, cluster: Cluster, trace: Trace, scheduler_name: str, latency: float = API_LATENCY,
                 nodes: Sequence[NodeEvent] = (), patience: Mapping[str, float] | None = None,
                 history: bool = True) -> None:
        self.clock = SimClock()
        self.latency = latency
        """Seconds from a binding decided to the pod's run counted as started (the binding lands,
        and the watch tells it); its run ends ``duration`` after that."""
        self.trace = trace
        self.store = Store()
        self.scheduler_name = scheduler_name
        self.listeners: list[Listener] = []
        self.records: dict[str, PodRecord] = {}
        self.preemptions = 0
        self.bindings = 0
        self.bound: list[tuple[str, str]] = []
        """Every binding of the replay: (store key of the pod, node), in the order made (none
        kept without ``history``)."""
        self.history = history
        """False (a soak): a pod's record is dropped once it is gone, and no binding is listed,
        so that what the simulator keeps does not grow with simulated time."""
        self.evictions = 0
        """Pods deleted with their node (``nodes``)."""
        self.gave_up = 0
        self._patience = dict(patience or {})
        """Trace pod key -> seconds after its arrival its owner deletes it if it has not started."""
        self._nodes = {str((n.get("metadata") or {}).get("name", "")): copy.deepcopy(n) for n in cluster.nodes}
        self._arrivals = {a.key: a for a in trace.arrivals}
        self._origin: dict[str, str] = {}
        """Store key of a pod -> its trace pod's key (they differ for a recreated victim)."""
        self._lock = threading.RLock()
        self._events: list[tuple[float, int, int, str, int]] = []
        self._serial = itertools.count()
        self.store.replace("nodes", [copy.deepcopy(n) for n in cluster.nodes])
        self.store.replace("pods", [copy.deepcopy(p) for p in cluster.running])
        capacity = Usage()
        for _, node in self.store.typed_items("nodes"):
            if isinstance(node, Node):
                capacity = _add(capacity, Usage(node.allocatable.get(CPU, 0), node.allocatable.get(MEMORY, 0),
                                                devices_of(node) * WHOLE))
        used = Usage()
        for _, pod in self.store.typed_items("pods"):
            if isinstance(pod, Pod):
                used = _add(used, usage_of(pod))
        self.totals = Totals(capacity, used)
        self.arriving = arriving_pods(trace)
        """The trace's pods as parsed (those the store refuses left out), in trace order: parsed once
        for every reader of the whole workload (FGD's typical pods, the fragmentation's shapes)."""
        self.fragmentation = _fragmentation(self.store, self.arriving)
        self._measure_fragmentation()
        for a in trace.arrivals:
            self._push(a.at, ARRIVE, a.key, 0)
        for n in nodes:
            if n.name not in self._nodes:
                raise InputError(f"node {n.name!r} is not in the cluster", file=cluster.source, field="nodes")
            self._push(n.at, NODE, n.name, int(n.present))

    def _measure_fragmentation(self) -> None:
        self.totals.fragmented_gpu = self.fragmentation.fragmented()
        self.totals.free_gpu = self.fragmentation.free_gpu()

    # ------------------------------------------------------------------ events

    def _push(self, at: float, kind: int, key: str, incarnation: int) -> None:
        heapq.heappush(self._events, (at, kind, next(self._serial), key, incarnation))

    def next_event(self) -> float | None:
        with self._lock:
            while self._events and self._events[0][1] in (LEAVE, GIVE_UP) and self._cancelled(*self._events[0][3:]):
                heapq.heappop(self._events)
            return self._events[0][0] if self._events else None

    def _cancelled(self, key: str, incarnation: int) -> bool:
        record = self.records.get(self._origin.get(key, ""))
        return record is None or record.incarnation != incarnation or record.end is not None

    def happen(self, until: float, departures: bool = True) -> int:
        """Applies every event up to ``until`` (the clock is there already), but the departures at
        ``until`` itself without ``departures``; returns how many.

        A pod's run ends ``duration`` after its binding, and a binding lands on the API server
        after the instant it was decided (the cycle's plan, the binding call, the watch), so live
        a pod whose run ends at an instant where something else happens (an arrival, a batch
        closing, a backoff ending) is still there for it: the engine applies the departures of
        an instant after the arrivals and after the scheduler ran what was due."""
        done = 0
        while True:
            with self._lock:
                if not self._events or self._events[0][0] > until or (
                        self._events[0][0] == until and self._events[0][1] >= LEAVE and not departures):
                    return done
                _, kind, _, key, incarnation = heapq.heappop(self._events)
            done += 1
            if kind == NODE:
                self._node(key, bool(incarnation))
            elif kind == ARRIVE:
                self._arrive(key)
            elif kind == LEAVE:
                self._leave(key, incarnation)
            else:
                self._give_up(key, incarnation)

    def _notify(self, event: str, old: RawObject | None, new: RawObject | None, resource: str = "pods") -> None:
        for listener in self.listeners:
            listener(resource, event, old, new)

    def _arrive(self, key: str) -> None:
        arrival = self._arrivals[key]
        manifest = arrival.pod
        with self._lock:
            record = self.records.get(key)
            if record is None:
                record = self.records[key] = PodRecord(key, self.clock.now, arrival.duration,
                                                       int((manifest.get("spec") or {}).get("priority") or 0), 0,
                                                       ((manifest.get("metadata") or {}).get("labels") or {})
                                                       .get(PLAIN_LABEL, ""))
            else:
                record.incarnation += 1
            raw = copy.deepcopy(manifest)
            if record.incarnation:
                raw["metadata"]["name"] = self._recreated_name(key, record.incarnation)
            self._origin[object_key(raw)] = key
            raw["spec"] = {**raw.get("spec", {}), "schedulerName": self.scheduler_name}
            raw["metadata"]["creationTimestamp"] = timestamp(self.clock.now)
            raw["metadata"]["uid"] = f"sim-{key.replace('/', '-')}-{record.incarnation}"
            raw["metadata"]["resourceVersion"] = str(next(self._serial))
            self.store.apply("pods", ADDED, raw)
            if key in self._patience and record.start is None:
                self._push(max(self.clock.now, record.arrival + self._patience[key]), GIVE_UP, object_key(raw),
                           record.incarnation)
            pod = self.store.typed("pods", object_key(raw))
            if isinstance(pod, Pod):
                record.gpu_milli = usage_of(pod).gpu
                self.totals.pending_pods += 1
                self.totals.pending_gpu += record.gpu_milli
        self._notify(ADDED, None, raw)

    def _recreated_name(self, key: str, incarnation: int) -> str:
        namespace, name = key.split("/", 1)

        def taken(other: str) -> bool:
            return f"{namespace}/{other}" in self._arrivals or f"{namespace}/{other}" in self._origin

        return recreated_name(name, incarnation, taken)

    def _leave(self, key: str, incarnation: int) -> None:
        with self._lock:
            if self._cancelled(key, incarnation):
                return  # preempted since: that departure was cancelled
            self.records[self._origin[key]].end = self.clock.now
            old = self._remove(key, running=True)
            self._drop_history(key)
        if old is not None:
            self._notify(DELETED, old, None)

    def _give_up(self, key: str, incarnation: int) -> None:
        """The pod's owner deletes it: it waited its patience and never started."""
        with self._lock:
            if self._cancelled(key, incarnation) or self.records[self._origin[key]].start is not None:
                return
            record = self.records[self._origin[key]]
            record.end, record.gave_up = self.clock.now, True
            self.gave_up += 1
            old = self._remove(key, running=False)
            self._drop_history(key)
        if old is not None:
            self._notify(DELETED, old, None)

    def _drop_history(self, key: str) -> None:
        """Without ``history``, forgets a pod that is gone for good (the lock held)."""
        if not self.history:
            origin = self._origin.pop(key, None)
            if origin is not None:
                self.records.pop(origin, None)

    def _node(self, name: str, present: bool) -> None:
        """The node goes away with its pods (their controllers make them again), or comes back."""
        raw = self._nodes[name]
        with self._lock:
            there = self.store.get("nodes", name) is not None
            if there == present:
                return
            if present:
                self.store.apply("nodes", ADDED, raw)
                self.fragmentation.restore_node(name)
            node = self.store.typed("nodes", name)
            if isinstance(node, Node):
                sign = 1 if present else -1
                self.totals.capacity = _add(self.totals.capacity, Usage(
                    node.allocatable.get(CPU, 0), node.allocatable.get(MEMORY, 0), devices_of(node) * WHOLE), sign)
            victims = [] if present else [k for r, p in self.store.typed_items("pods")
                                          if isinstance(p, Pod) and p.node_name == name for k in [object_key(r)]]
            if not present:
                self.store.apply("nodes", DELETED, raw)
        if present:
            self._notify(ADDED, None, raw, "nodes")
            return
        self._notify(DELETED, raw, None, "nodes")
        for key in victims:
            self._delete_and_recreate(key)
            self.evictions += 1
        with self._lock:
            self.fragmentation.remove_node(name)
            self._measure_fragmentation()

    def _remove(self, key: str, running: bool) -> RawObject | None:
        pod = self.store.typed("pods", key)
        old = self.store.apply("pods", DELETED, {"metadata": _meta(key)})
        if isinstance(pod, Pod):
            if running:
                self.totals.used = _add(self.totals.used, usage_of(pod), -1)
                self.fragmentation.release(key)
                self._measure_fragmentation()
            else:
                self.totals.pending_pods -= 1
                self.totals.pending_gpu -= self.records[self._origin[key]].gpu_milli
        return old

    # ------------------------------------------------------------------ what schedulers write

    def bind(self, key: str, node: str, annotations: Mapping[str, str] | None = None) -> None:
        with self._lock:
            old = self.store.get("pods", key)
            if old is None:
                raise NotFound(f"pods {key!r} not found", status=404)
            if (old.get("spec") or {}).get("nodeName"):
                raise Conflict(f"pod {key} is already assigned to node {old['spec']['nodeName']}", status=409)
            new = with_node_name(old, node)
            new["metadata"] = {**old["metadata"], "annotations": {**(old["metadata"].get("annotations") or {}),
                                                                  **(annotations or {})},
                               "resourceVersion": str(next(self._serial))}
            new["status"] = {**(old.get("status") or {}), "phase": "Running"}
            self.store.apply("pods", MODIFIED, new)
            record = self.records[self._origin[key]]
            record.start = self.clock.now + self.latency if record.start is None else record.start
            record.node = node
            self.bindings += 1
            if self.history:
                self.bound.append((key, node))
            pod = self.store.typed("pods", key)
            if isinstance(pod, Pod):
                self.totals.used = _add(self.totals.used, usage_of(pod))
                self.fragmentation.take(key, pod, node)
                self._measure_fragmentation()
                self.totals.pending_pods -= 1
                self.totals.pending_gpu -= record.gpu_milli
            if record.duration is not None:
                self._push(self.clock.now + self.latency + record.duration, LEAVE, key, record.incarnation)
        self._notify(MODIFIED, old, new)

    def preempt(self, key: str) -> None:
        """The victim is deleted and its controller makes it again, pending."""
        origin = self._delete_and_recreate(key)
        with self._lock:
            self.preemptions += 1
            if origin is not None:
                self.records[origin].preempted += 1

    def _delete_and_recreate(self, key: str) -> str | None:
        """Deletes the pod; its controller makes it again, pending. Returns its trace pod's key
        (None for a pod of the cluster, not of the trace: it is not made again)."""
        with self._lock:
            raw = self.store.get("pods", key)
            if raw is None:
                raise NotFound(f"pods {key!r} not found", status=404)
            running = bool((raw.get("spec") or {}).get("nodeName"))
            old = self._remove(key, running)
            origin = self._origin.get(key)
            if not self.history:
                self._origin.pop(key, None)  # (its next incarnation has a name of its own)
        self._notify(DELETED, old, None)
        if origin is not None:
            self._arrive(origin)
        return origin

    def nominate(self, key: str, status: Mapping[str, Any]) -> None:
        with self._lock:
            old = self.store.get("pods", key)
            if old is None:
                raise NotFound(f"pods {key!r} not found", status=404)
            new = {**old, "status": {**(old.get("status") or {}), **status},
                   "metadata": {**old["metadata"], "resourceVersion": str(next(self._serial))}}
            self.store.apply("pods", MODIFIED, new)
        self._notify(MODIFIED, old, new)


def recreated_name(name: str, incarnation: int, taken: Callable[[str], bool]) -> str:
    """``<name>-r<N>``, the name a victim's controller recreates it under, as a name the API
    server takes: cut to fit its 253 characters, and suffixed again while ``taken`` (another pod
    of the replay has that name: a trace pod named so)."""
    again = 0
    while True:
        suffix = f"-r{incarnation}" + (f"-{again}" if again else "")
        candidate = name[:DNS1123_SUBDOMAIN_MAX - len(suffix)].rstrip("-.") + suffix
        if not taken(candidate):
            return candidate
        again += 1


def arriving_pods(trace: Trace) -> list[Pod]:
    """The trace's pods, parsed; a pod that does not parse is left out (refused by the store as
    well: it never runs)."""
    arriving = []
    for a in trace.arrivals:
        try:
            arriving.append(parse_pod(a.pod, trace.source))
        except InputError:
            continue
    return arriving


def _fragmentation(store: Store, arriving: Sequence[Pod]) -> Fragmentation:
    """The tracker of FGD's measure on the store's nodes, holding the running pods, for the
    workload of the ``arriving`` pods and those pods."""
    nodes = [n for _, n in store.typed_items("nodes") if isinstance(n, Node)]
    running = [(object_key(raw), p) for raw, p in store.typed_items("pods") if isinstance(p, Pod)]
    tracker = Fragmentation(nodes, workload_shapes([*arriving, *(p for _, p in running)], len(nodes)))
    for key, pod in running:
        tracker.take(key, pod, pod.node_name)
    return tracker


def _meta(key: str) -> RawObject:
    namespace, name = key.split("/", 1)
    return {"namespace": namespace, "name": name}


class SimClient:
    """The API the ``serve`` cycle writes through (:class:`serve.loop.ServeClient`), answered by
    the :class:`World`: bindings, deletions and evictions, pod status; Events are dropped, and
    there is no PodGroup CRD, volume or claim API (the traces have none)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.events = 0

    def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
             annotations: Mapping[str, str] | None = None) -> None:
        if not dry_run:
            self.world.bind(f"{namespace}/{name}", node, annotations)

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        self.world.preempt(f"{namespace}/{name}")

    def evict(self, namespace: str, name: str, uid: str, dry_run: bool = False) -> None:
        if not dry_run:
            self.world.preempt(f"{namespace}/{name}")

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any], dry_run: bool = False) -> None:
        if not dry_run:
            self.world.nominate(f"{namespace}/{name}", status)

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        self.events += 1

    def patch_object_status(self, group: str, version: str, plural: str, namespace: str, name: str,
                            status: Mapping[str, Any]) -> None:
        raise NotFound("404 page not found", status=404)

    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        return None

    def read_persistent_volume(self, name: str) -> RawObject:
        raise NotFound(f"persistentvolumes {name!r} not found", status=404)

    def read_persistent_volume_claim(self, namespace: str, name: str) -> RawObject:
        raise NotFound(f"persistentvolumeclaims {name!r} not found", status=404)

    def update_persistent_volume(self, volume: Mapping[str, Any], dry_run: bool = False) -> RawObject:
        raise NotFound("persistentvolumes not simulated", status=404)

    def update_persistent_volume_claim(self, claim: Mapping[str, Any], dry_run: bool = False) -> RawObject:
        raise NotFound("persistentvolumeclaims not simulated", status=404)

    def read_resource_claim(self, namespace: str, name: str) -> RawObject:
        raise NotFound(f"resourceclaims {name!r} not found", status=404)

    def update_resource_claim(self, claim: Mapping[str, Any], dry_run: bool = False,
                              status: bool = False) -> RawObject:
        raise NotFound("resourceclaims not simulated", status=404)

    def create_resource_claim(self, claim: Mapping[str, Any], dry_run: bool = False) -> RawObject:
        raise NotFound("resourceclaims not simulated", status=404)

    def delete_resource_claim(self, namespace: str, name: str) -> None:
        raise NotFound(f"resourceclaims {name!r} not found", status=404)
