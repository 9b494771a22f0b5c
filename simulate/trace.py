"""Workload traces: pods that arrive at a time, run for a duration and leave.

The Kubernetes-native trace format (``docs/simulate.md``) is one YAML document::

    apiVersion: kubeplace.io/v1alpha1
    kind: Trace
    templates:                      # optional: pod templates by name (metadata and spec)
      small: {spec: {containers: [{name: main, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}}
    items:
      - arrivalSeconds: 0           # >= 0, never less than the item before
        durationSeconds: 600        # > 0; absent: runs until the end of the simulation
        template: small             # or pod: a whole Pod manifest
        name: web                   # default: the template's name and the item's index
        count: 2                    # pods web-0 and web-1 (default 1: the name as it is)
        priority: 100               # spec.priority
        gang: {name: train, minMember: 2}   # kubeplace's CRD-free gang (label and annotation)

A pod's duration counts from when it starts (is bound), so a pod that waits runs as long as it
would have. Times are seconds from the start of the simulation.
"""

from __future__ import annotations

import copy
import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubeplace.kube.errors import InputError
from kubeplace.kube.files import read_document
from kubeplace.kube.gangs import PLAIN_LABEL, PLAIN_MIN_MEMBER

RawObject = dict[str, Any]
API_VERSION = "kubeplace.io/v1alpha1"
KIND = "Trace"
EPOCH = datetime.datetime(2023, 1, 1, tzinfo=datetime.UTC)
"""Simulated time 0 as a wall-clock time (pods' creationTimestamp: the queue's order)."""
ITEM_FIELDS = frozenset({"arrivalSeconds", "durationSeconds", "template", "pod", "name", "count", "priority",
                         "gang", "namespace"})


@dataclass(frozen=True)
class Arrival:
    """One pod of a trace: its manifest (pending, no scheduler yet), when it arrives and how
    long it runs once started (None: until the end)."""

    at: float
    duration: float | None
    pod: RawObject

    @property
    def key(self) -> str:
        meta = self.pod["metadata"]
        return f"{meta.get('namespace', 'default')}/{meta['name']}"


@dataclass(frozen=True)
class Trace:
    arrivals: tuple[Arrival, ...]
    source: str

    @property
    def span(self) -> float:
        return self.arrivals[-1].at if self.arrivals else 0.0


def timestamp(seconds: float) -> str:
    return (EPOCH + datetime.timedelta(seconds=int(seconds))).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_trace(path: Path) -> Trace:
    """The trace in ``path``; an :class:`InputError` naming the file, item and field otherwise."""
    document = read_document(path)
    return parse_trace(document, str(path))


def parse_trace(document: Any, source: str) -> Trace:
    fail = _failer(source)
    if not isinstance(document, Mapping) or document.get("kind") != KIND:
        raise fail("", "kind", "not a trace", f"a mapping with kind: {KIND}, apiVersion: {API_VERSION}")
    if document.get("apiVersion") != API_VERSION:
        raise fail("", "apiVersion", f"unknown apiVersion {document.get('apiVersion')!r}", API_VERSION)
    templates = document.get("templates") or {}
    if not isinstance(templates, Mapping):
        raise fail("", "templates", "not a mapping", "pod templates by name")
    items = document.get("items")
    if not isinstance(items, list):
        raise fail("", "items", "missing or not a list", "a list of arrivals")
    arrivals: list[Arrival] = []
    seen: set[str] = set()
    last = 0.0
    for index, item in enumerate(items):
        where = f"items[{index}]"
        batch = _item(item, templates, index, fail)
        if batch and batch[0].at < last:
            raise fail(where, "arrivalSeconds", f"{batch[0].at:g} is before the item before ({last:g})",
                       "arrival times in order")
        for arrival in batch:
            if arrival.key in seen:
                raise fail(where, "name", f"pod {arrival.key} twice", "unique pod names")
            seen.add(arrival.key)
        last = batch[0].at if batch else last
        arrivals += batch
    return Trace(tuple(arrivals), source)


def _failer(source: str) -> Any:
    def fail(where: str, field: str, problem: str, expected: str = "") -> InputError:
        return InputError(problem, file=source, obj=where, field=field, expected=expected)
    return fail


def _seconds(item: Mapping[str, Any], field: str, fail: Any, where: str, positive: bool) -> float | None:
    value = item.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise fail(where, field, f"{value!r} is not a number", "seconds")
    if value < 0 or (positive and value == 0):
        raise fail(where, field, f"{value:g} is negative" if value < 0 else "0", "> 0" if positive else ">= 0")
    return float(value)


def _item(item: Any, templates: Mapping[str, Any], index: int, fail: Any) -> list[Arrival]:
    where = f"items[{index}]"
    if not isinstance(item, Mapping):
        raise fail(where, "", "not a mapping", "an arrival")
    unknown = sorted(set(item) - ITEM_FIELDS)
    if unknown:
        raise fail(where, unknown[0], "unknown field", ", ".join(sorted(ITEM_FIELDS)))
    at = _seconds(item, "arrivalSeconds", fail, where, positive=False)
    if at is None:
        raise fail(where, "arrivalSeconds", "missing", "seconds from the start, >= 0")
    duration = _seconds(item, "durationSeconds", fail, where, positive=True)
    pod = _pod(item, templates, index, fail)
    count = item.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise fail(where, "count", f"{count!r}", "a whole number >= 1")
    priority = item.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise fail(where, "priority", f"{priority!r} is not an integer", "an integer")
    gang = item.get("gang")
    name = pod["metadata"]["name"]
    out = []
    for k in range(count):
        one = copy.deepcopy(pod)
        meta = one["metadata"]
        meta["name"] = name if count == 1 else f"{name}-{k}"
        meta.setdefault("namespace", item.get("namespace", "default"))
        meta["creationTimestamp"] = timestamp(at)
        if priority is not None:
            one["spec"]["priority"] = priority
        if gang is not None:
            _join_gang(one, gang, fail, where)
        out.append(Arrival(at, duration, one))
    return out


def _pod(item: Mapping[str, Any], templates: Mapping[str, Any], index: int, fail: Any) -> RawObject:
    where = f"items[{index}]"
    if ("pod" in item) == ("template" in item):
        raise fail(where, "template", "give exactly one of template and pod", "a template name or a Pod manifest")
    if "pod" in item:
        source = item["pod"]
        if not isinstance(source, Mapping) or not isinstance(source.get("metadata", {}).get("name"), str):
            raise fail(where, "pod", "not a Pod manifest with metadata.name", "a Pod manifest")
        default_name = source["metadata"]["name"]
    else:
        name = item["template"]
        if not isinstance(name, str) or name not in templates:
            raise fail(where, "template", f"unknown template {name!r}", ", ".join(map(str, templates)) or "a template")
        source = templates[name]
        if not isinstance(source, Mapping) or not isinstance(source.get("spec"), Mapping):
            raise fail(f"templates.{name}", "spec", "missing", "a pod template with a spec")
        default_name = f"{name}-{index}"
    pod: RawObject = {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(dict(source.get("metadata") or {})),
                      "spec": copy.deepcopy(dict(source["spec"] or {}))}
    name = item.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise fail(where, "name", f"{name!r}", "a pod name")
    pod["metadata"]["name"] = name
    pod["status"] = {"phase": "Pending"}
    return pod


def _join_gang(pod: RawObject, gang: Any, fail: Any, where: str) -> None:
    if not isinstance(gang, Mapping) or not isinstance(gang.get("name"), str):
        raise fail(where, "gang", "not a mapping with a name", "{name: NAME, minMember: N}")
    min_member = gang.get("minMember", 1)
    if isinstance(min_member, bool) or not isinstance(min_member, int) or min_member < 1:
        raise fail(where, "gang.minMember", f"{min_member!r}", "a whole number >= 1")
    meta = pod["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), PLAIN_LABEL: gang["name"]}
    meta["annotations"] = {**(meta.get("annotations") or {}), PLAIN_MIN_MEMBER: str(min_member)}


def trace_document(arrivals: Sequence[Arrival], templates: Mapping[str, RawObject] | None = None) -> RawObject:
    """A trace document of whole pods (what :func:`parse_trace` reads back as ``arrivals``)."""
    items = []
    for a in arrivals:
        item: RawObject = {"arrivalSeconds": a.at, "pod": a.pod}
        if a.duration is not None:
            item["durationSeconds"] = a.duration
        items.append(item)
    return {"apiVersion": API_VERSION, "kind": KIND, **({"templates": dict(templates)} if templates else {}),
            "items": items}
