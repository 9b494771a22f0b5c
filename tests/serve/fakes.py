"""Fakes of the small client wrapper (:class:`kube.client.Cluster`), never of HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

from kubeplace.kube.errors import Conflict, NotFound

RawObject = dict[str, Any]


class FakeCluster:
    """bind / create_event / patch_object_status / read_lease / write_lease, in memory.

    ``bind_errors`` maps a pod name to the exception its binding raises (once);
    ``on_bind`` is called after each successful binding."""

    def __init__(self) -> None:
        self.bindings: list[tuple[str, str, str]] = []  # (namespace/name, node, uid)
        self.events: list[RawObject] = []
        self.statuses: list[tuple[str, str, RawObject]] = []  # (group, namespace/name, status)
        self.bind_errors: dict[str, Exception] = {}
        self.crds: set[str] = set()
        self.on_bind: Any = None
        self.leases: dict[str, RawObject] = {}
        self.lease_errors: list[Exception] = []
        self.config_maps: dict[str, dict[str, str]] = {}  # namespace/name -> data
        self.deleted: list[tuple[str, str]] = []  # (namespace/name, uid)
        self.evicted: list[tuple[str, str]] = []
        self.pod_statuses: list[tuple[str, RawObject]] = []  # (namespace/name, status patch)
        self.remove_errors: dict[str, Exception] = {}
        self._version = 0
        self._lock = threading.Lock()

    def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
             annotations: Mapping[str, str] | None = None) -> None:
        error = self.bind_errors.pop(name, None)
        if error is not None:
            raise error
        if any(key == f"{namespace}/{name}" for key, _, _ in self.bindings):
            raise Conflict(f"pod {namespace}/{name} is already assigned", status=409)
        self.bindings.append((f"{namespace}/{name}", node, uid))
        if self.on_bind is not None:
            self.on_bind(name)

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        error = self.remove_errors.pop(name, None)
        if error is not None:
            raise error
        self.deleted.append((f"{namespace}/{name}", uid))

    def evict(self, namespace: str, name: str, uid: str, dry_run: bool = False) -> None:
        error = self.remove_errors.pop(name, None)
        if error is not None:
            raise error
        self.evicted.append((f"{namespace}/{name}", uid))

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.pod_statuses.append((f"{namespace}/{name}", dict(status)))

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        self.events.append(dict(event))

    def patch_object_status(self, group: str, version: str, plural: str, namespace: str, name: str,
                            status: Mapping[str, Any]) -> None:
        if group not in self.crds:
            raise NotFound("404 page not found", status=404)
        self.statuses.append((group, f"{namespace}/{name}", dict(status)))

    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        return self.config_maps.get(f"{namespace}/{name}")

    def read_lease(self, namespace: str, name: str) -> RawObject:
        with self._lock:
            if self.lease_errors:
                raise self.lease_errors.pop(0)
            if name not in self.leases:
                raise NotFound("lease not found", status=404)
            return {**self.leases[name], "spec": dict(self.leases[name]["spec"])}

    def write_lease(self, namespace: str, lease: RawObject, create: bool) -> RawObject:
        with self._lock:
            name = lease["metadata"]["name"]
            current = self.leases.get(name)
            if create and current is not None:
                raise Conflict("already exists", status=409)
            if not create and (current is None or current["metadata"]["resourceVersion"]
                               != lease["metadata"].get("resourceVersion")):
                raise Conflict("the object has been modified", status=409)
            self._version += 1
            stored = {"metadata": {**lease["metadata"], "resourceVersion": str(self._version)},
                      "spec": dict(lease["spec"])}
            self.leases[name] = stored
            return stored

    def event_reasons(self, name: str) -> list[str]:
        return [e["reason"] for e in self.events if e["involvedObject"]["name"] == name]


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ScriptedWatch:
    """list_resource / watch_resource playing a script: each list returns the next entry of
    ``lists`` (items, version) or raises it; each watch yields the next entry of ``watches``
    (a list of (type, object)) or raises it. When the script is over, ``done`` is called."""

    def __init__(self, lists: list[Any], watches: list[Any], done: Any) -> None:
        self.lists, self.watches, self.done = lists, watches, done
        self.watched_from: list[str] = []

    def list_resource(self, resource: str, field_selector: str | None = None) -> tuple[list[RawObject], str]:
        if not self.lists:
            self.done()
            return [], "0"
        step = self.lists.pop(0)
        if isinstance(step, Exception):
            raise step
        items, version = step
        return list(items), str(version)

    def watch_resource(self, resource: str, resource_version: str, timeout_seconds: int,
                       field_selector: str | None = None) -> Iterator[tuple[str, RawObject]]:
        self.watched_from.append(resource_version)
        if not self.watches:
            self.done()
            return
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        yield from step
