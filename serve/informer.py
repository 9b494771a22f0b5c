"""List + watch: an in-memory copy of the objects placement reads, kept current.

One thread per resource lists it (remembering the list's resourceVersion), then watches from that
version, applying every change to the :class:`Store` and telling ``on_change`` about it. A watch
that the server ends is started again from the last version seen; a failed one is retried after
a growing pause (0.5 s to 10 s) from the same version; a version the server no longer has
(410 Gone) relists, and the differences between the store and the new list are reported as changes,
so nothing missed while disconnected goes unnoticed. As client-go's reflectors, it does not relist
on a timer by default (watch bookmarks keep the version fresh): a periodic relist re-reads and
re-parses every object of the cluster for nothing, and holds two copies of the pods while it
does. ``resync_seconds`` turns a periodic relist on. A CRD that
is not installed (404) is an empty resource, listed again every ``absent_poll`` seconds.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubeplace.kube.dra_parse import DRA_APIS
from kubeplace.kube.errors import ClusterError, Gone, InputError, NotFound
from kubeplace.kube.gangs import GANG_APIS
from kubeplace.kube.live import STORAGE_APIS
from kubeplace.kube.objects import Node, Pod
from kubeplace.kube.parse import parse_node, parse_pod
from kubeplace.serve.backoff import doubling

RawObject = dict[str, Any]
log = logging.getLogger("kubeplace.serve.informer")

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
CLUSTER = "cluster"
"""The source a snapshot names for objects read from the API."""
UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True)
class Watched:
    resource: str
    """``pods``, ``nodes``, ``namespaces``, ``persistentvolumeclaims``, ``persistentvolumes``,
    ``services``, ``replicationcontrollers`` or ``group/version/plural``."""
    field_selector: str | None = None
    optional: bool = False
    """A CRD that may not be installed: 404 is an empty list, not an error."""


CONTROLLER_RESOURCES = (Watched("services"), Watched("replicationcontrollers"), Watched("apps/v1/replicasets"),
                        Watched("apps/v1/statefulsets"))
"""What the default topology spread constraints select pods by (``kube.workloads``)."""
RESOURCES = (
    Watched("nodes"),
    Watched("pods", UNFINISHED),  # finished pods leave the selection: a DELETED event
    Watched("namespaces"),
    Watched("persistentvolumeclaims"),
    Watched("persistentvolumes"),
    *CONTROLLER_RESOURCES,
    *(Watched(f"{group}/{version}/{plural}", optional=True)
      for group, version, plural in (*STORAGE_APIS, *DRA_APIS, *GANG_APIS)),
)
STORAGE_RESOURCES = frozenset({"persistentvolumeclaims", "persistentvolumes",
                               *(f"{group}/{version}/{plural}" for group, version, plural in (*STORAGE_APIS,
                                                                                              *DRA_APIS))})
"""The resources the volume and device rules read: a change may let a pod waiting for its claims go."""
RESOURCE_CLAIMS = "resource.k8s.io/v1/resourceclaims"


class WatchClient(Protocol):
    """What the informer needs from :class:`kube.client.Cluster` (tests pass a fake)."""

    def list_resource(self, resource: str, field_selector: str | None = None) -> tuple[list[RawObject], str]: ...

    def watch_resource(self, resource: str, resource_version: str, timeout_seconds: int,
                       field_selector: str | None = None) -> Iterator[tuple[str, RawObject]]: ...


ChangeHandler = Callable[[str, str, RawObject | None, RawObject | None], None]
"""(resource, ADDED|MODIFIED|DELETED, old object or None, new object or None)."""


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


Parser = Callable[[str, RawObject], Any]
"""(resource, raw object) -> its typed form, or None for a resource kept raw only; may raise
:class:`InputError` (kept as the object's typed form, so the error is known once too)."""


def parse_watched(resource: str, obj: RawObject) -> Node | Pod | None:
    """Nodes and pods typed as a snapshot reads them (source ``cluster``; the built-in priority
    classes, the only ones ``serve`` knows); the other resources are few and kept raw."""
    if resource == "nodes":
        return parse_node(obj, CLUSTER)
    if resource == "pods":
        return parse_pod(obj, CLUSTER)
    return None


class Store:
    """Objects by resource and ``namespace/name``; every method is thread-safe.

    With a ``parse`` function each object is also kept typed, parsed once when it changes (a
    watch event or a relist that brings a new resourceVersion), never again for each reader."""

    def __init__(self, parse: Parser | None = parse_watched) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, RawObject]] = {}
        self._typed: dict[str, dict[str, Any]] = {}
        self._parse = parse
        self.generation = 0
        """Counts changes, so a reader can tell whether anything changed since it last looked."""
        self._listed: dict[str, list[tuple[RawObject, Any]]] = {}
        """Per resource, :meth:`typed_items` as of the generation it was made at (dropped when the
        resource changes): the nodes change rarely, and every cycle reads all of them."""

    def _typed_of(self, resource: str, obj: RawObject) -> Any:
        if self._parse is None:
            return None
        try:
            return self._parse(resource, obj)
        except InputError as error:
            return error

    def replace(self, resource: str, items: list[RawObject]) -> list[tuple[str, RawObject | None, RawObject | None]]:
        """Sets the resource's objects to ``items``; returns the differences as changes."""
        fresh = {object_key(item): item for item in items}
        with self._lock:
            old = self._objects.get(resource, {})
            old_typed = self._typed.get(resource, {})
        changes: list[tuple[str, RawObject | None, RawObject | None]] = []
        typed: dict[str, Any] = {}
        for key, item in fresh.items():
            before = old.get(key)
            if before is None:
                changes.append((ADDED, None, item))
            elif _version(before) != _version(item):
                changes.append((MODIFIED, before, item))
            elif _version(item) and key in old_typed:
                typed[key] = old_typed[key]  # the same version: parsed already
                continue
            typed[key] = self._typed_of(resource, item)
        changes += [(DELETED, before, None) for key, before in old.items() if key not in fresh]
        with self._lock:
            self._objects[resource] = fresh
            self._typed[resource] = typed
            self.generation += 1
            self._listed.pop(resource, None)
        return changes

    def apply(self, resource: str, event: str, obj: RawObject) -> RawObject | None:
        """Applies one watch event; returns the object it replaced (None if new)."""
        key = object_key(obj)
        typed = None if event == DELETED else self._typed_of(resource, obj)
        with self._lock:
            objects = self._objects.setdefault(resource, {})
            parsed = self._typed.setdefault(resource, {})
            old = objects.pop(key, None) if event == DELETED else objects.get(key)
            parsed.pop(key, None)
            if event != DELETED:
                objects[key] = obj
                parsed[key] = typed
            self.generation += 1
            self._listed.pop(resource, None)
        return old

    def get(self, resource: str, key: str) -> RawObject | None:
        with self._lock:
            return self._objects.get(resource, {}).get(key)

    def typed(self, resource: str, key: str) -> Any:
        """The object's typed form (None without a parser, or for a resource kept raw; the
        :class:`InputError` when it does not parse)."""
        with self._lock:
            return self._typed.get(resource, {}).get(key)

    def items(self, resource: str) -> list[RawObject]:
        with self._lock:
            return list(self._objects.get(resource, {}).values())

    def typed_items(self, resource: str) -> list[tuple[RawObject, Any]]:
        """(raw, typed) of every object of ``resource`` (shared, not copied: read-only; the same
        list until the resource changes)."""
        with self._lock:
            listed = self._listed.get(resource)
            if listed is not None:
                return listed
            objects, typed = self._objects.get(resource, {}), self._typed.get(resource, {})
            items = [(obj, typed.get(key)) for key, obj in objects.items()]
            self._listed[resource] = items
            return items

    def sizes(self) -> dict[str, int]:
        """Objects per resource."""
        with self._lock:
            return {resource: len(objects) for resource, objects in self._objects.items()}

    def resources(self) -> list[str]:
        with self._lock:
            return list(self._objects)

    def all_objects(self) -> list[RawObject]:
        """Every object of every resource (shared, not copied: treat them as read-only)."""
        with self._lock:
            return [obj for objects in self._objects.values() for obj in objects.values()]


QUICK_WATCH = 1.0
"""Seconds: a watch that ends sooner without an event, or with 410 Gone, twice in a row or more,
is started again (listing again after 410) only after a pause doubling from 0.5 s to
``max_retry``, as client-go's reflector paces ListAndWatch: a server that ends every watch at once
is not asked again and again (a full LIST each time after 410) as fast as it answers."""


class Informer:
    """Keeps a :class:`Store` current from the API; see the module docstring."""

    def __init__(self, client: WatchClient, store: Store | None = None, *,
                 resources: tuple[Watched, ...] = RESOURCES, on_change: ChangeHandler | None = None,
                 resync_seconds: float | None = None, watch_seconds: int = 60, absent_poll: float = 30.0,
                 max_retry: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.clock = client, clock
        self.store = store or Store()
        self.resources = resources
        self.on_change = on_change
        self.resync_seconds = resync_seconds
        self.watch_seconds = watch_seconds
        self.absent_poll = absent_poll
        self.max_retry = max_retry
        self.relists: dict[str, int] = {w.resource: 0 for w in resources}
        """Lists done per resource (the first one, resyncs and relists after 410 or errors)."""
        self._synced = {w.resource: threading.Event() for w in resources}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for watched in self.resources:
            thread = threading.Thread(target=self.run, args=(watched,), daemon=True,
                                      name=f"informer-{watched.resource}")
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stops the threads at their next event or watch timeout (they are daemons)."""
        self._stop.set()

    def wait_synced(self, timeout: float) -> bool:
        """True once every resource has been listed, within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        return all(event.wait(max(0.0, deadline - time.monotonic())) for event in self._synced.values())

    def run(self, watched: Watched) -> None:
        """The list-and-watch loop of one resource, until :meth:`stop`."""
        version = ""
        listed_at = 0.0
        failures = 0
        quick = 0
        while not self._stop.is_set():
            if quick >= 2:  # (the first at once, as a 410 after a compaction wants)
                self._stop.wait(doubling(quick - 1, 0.5, self.max_retry))
            started = time.monotonic()
            try:
                if not version or self._resync_due(listed_at):
                    version = self._relist(watched)
                    listed_at = self.clock()
                seen = self._watch(watched, version, listed_at)
                quick = quick + 1 if seen == version and time.monotonic() - started < QUICK_WATCH else 0
                version = seen
                failures = 0
            except Gone as error:
                log.info("watch %s: %s; listing again", watched.resource, error)
                quick = quick + 1 if time.monotonic() - started < QUICK_WATCH else 0
                version = ""
            except NotFound as error:
                if not watched.optional:
                    failures = self._pause(watched, error, failures)
                    continue
                self._emit(watched.resource, self.store.replace(watched.resource, []))
                self._synced[watched.resource].set()
                version = ""
                self._stop.wait(self.absent_poll)
            except (ClusterError, ValueError, KeyError) as error:
                failures = self._pause(watched, error, failures)

    def _resync_due(self, listed_at: float) -> bool:
        return self.resync_seconds is not None and self.clock() - listed_at >= self.resync_seconds

    def _pause(self, watched: Watched, error: Exception, failures: int) -> int:
        delay = doubling(failures + 1, 0.5, self.max_retry)
        log.warning("watch %s failed (%s); retrying in %.1fs", watched.resource, error, delay)
        self._stop.wait(delay)
        return failures + 1

    def _relist(self, watched: Watched) -> str:
        items, version = self.client.list_resource(watched.resource, watched.field_selector)
        self.relists[watched.resource] += 1
        self._emit(watched.resource, self.store.replace(watched.resource, items))
        self._synced[watched.resource].set()
        return version

    def _watch(self, watched: Watched, version: str, listed_at: float) -> str:
        """Applies events until the watch ends or a resync is due; returns the last version."""
        timeout = self.watch_seconds
        if self.resync_seconds is not None:
            timeout = max(1, int(min(timeout, self.resync_seconds - (self.clock() - listed_at))))
        for event, obj in self.client.watch_resource(watched.resource, version, timeout, watched.field_selector):
            if self._stop.is_set():
                break
            version = _version(obj) or version
            if event == "BOOKMARK":
                continue
            old = self.store.apply(watched.resource, event, obj)
            self._emit(watched.resource, [(event, old, None if event == DELETED else obj)])
        return version

    def _emit(self, resource: str, changes: list[tuple[str, RawObject | None, RawObject | None]]) -> None:
        if self.on_change is None:
            return
        for event, old, new in changes:
            try:
                self.on_change(resource, event, old, new)
            except Exception:  # a handler bug must not kill the watch
                log.exception("change handler failed for %s %s", event, resource)


def with_node_name(pod: RawObject, node: str) -> RawObject:
    """A copy of a raw pod as if bound to ``node`` (assumed until the watch confirms it)."""
    out = copy.copy(pod)
    out["spec"] = {**(pod.get("spec") or {}), "nodeName": node}
    return out
