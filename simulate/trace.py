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

from kubeplace.kube.errors import (
    INT32_MAX,
    INT32_MIN,
    InputError,
    expect_dns1123,
    expect_int,
    expect_label_value,
)
from kubeplace.kube.files import read_document
from kubeplace.kube.gangs import PLAIN_LABEL, PLAIN_MIN_MEMBER
from kubeplace.kube.parse import parse_pod
from kubeplace.simulate.names import MAX_SECONDS, MAX_TRACE_PODS

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
        batch = _item(item, templates, index, fail, MAX_TRACE_PODS - len(arrivals))
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
    """A time or duration of the item: a finite number of seconds, >= 0 (> 0 when ``positive``),
    at most ``MAX_SECONDS``; None when absent."""
    value = item.get(field)
    if value is None:
        return None
    expected = f"seconds, {'> 0' if positive else '>= 0'} and at most {MAX_SECONDS:g}"
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise fail(where, field, f"{value!r} is not a number", expected)
    if value < 0 or (positive and value == 0):
        raise fail(where, field, f"{_shown(value)} is negative" if value < 0 else "0", expected)
    if value > MAX_SECONDS:
        raise fail(where, field, f"{_shown(value)} is too large", expected)
    return float(value)


def _whole(item: Mapping[str, Any], field: str, fail: Any, where: str, low: int, high: int, default: int,
           named: str = "") -> int:
    """A whole number of the item from ``low`` to ``high`` (``default`` when absent); errors
    name ``named`` (default: ``field``)."""
    value = item.get(field, default)
    try:
        return expect_int(value, field, low, high)
    except InputError as error:
        raise fail(where, named or field, error.problem, error.expected) from None


def _shown(value: int | float) -> str:
    """A number for a message, cut short when huge."""
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"


def _item(item: Any, templates: Mapping[str, Any], index: int, fail: Any, room: int) -> list[Arrival]:
    """The pods of one item (at most ``room``: what the trace's bound on its pods leaves), each
    one checked as the API server would check it before a pod is built for it."""
    where = f"items[{index}]"
    if not isinstance(item, Mapping):
        raise fail(where, "", "not a mapping", "an arrival")
    unknown = sorted(set(item) - ITEM_FIELDS, key=str)
    if unknown:
        raise fail(where, str(unknown[0]), "unknown field", ", ".join(sorted(ITEM_FIELDS)))
    at = _seconds(item, "arrivalSeconds", fail, where, positive=False)
    if at is None:
        raise fail(where, "arrivalSeconds", "missing", "seconds from the start, >= 0")
    duration = _seconds(item, "durationSeconds", fail, where, positive=True)
    count = _whole(item, "count", fail, where, 1, INT32_MAX, 1)
    if count > room:
        raise fail(where, "count", f"{count} more pods make the trace more than {MAX_TRACE_PODS} pods",
                   f"at most {MAX_TRACE_PODS} pods in a trace")
    priority = None if item.get("priority") is None else _whole(item, "priority", fail, where, INT32_MIN,
                                                                 INT32_MAX, 0)
    pod, origin = _pod(item, templates, index, fail)
    meta = pod["metadata"]
    _set_namespace(meta, item, origin, fail, where)
    meta["creationTimestamp"] = timestamp(at)
    if priority is not None:
        pod["spec"]["priority"] = priority
    if item.get("gang") is not None:
        _join_gang(pod, item["gang"], fail, where)
    name = meta["name"]
    names = [name] if count == 1 else [f"{name}-{k}" for k in range(count)]
    meta["name"] = names[0]
    _check_pod(pod, item, origin, fail, where)
    if count > 1:  # (the other names differ only by a shorter or equal suffix: the last is the longest)
        try:
            expect_dns1123(names[-1], "metadata.name")
        except InputError as error:
            raise fail(where, "name", f"the name of its pod {count - 1} (count {count}): {error.problem}") from None
    out = [Arrival(at, duration, pod)]
    for other in names[1:]:
        one = copy.deepcopy(pod)
        one["metadata"]["name"] = other
        out.append(Arrival(at, duration, one))
    return out


def _pod(item: Mapping[str, Any], templates: Mapping[str, Any], index: int, fail: Any) -> tuple[RawObject, str]:
    """The item's pod manifest (pending, named) and where it came from: ``pod`` or
    ``templates.NAME`` (the field its errors are named under)."""
    where = f"items[{index}]"
    if ("pod" in item) == ("template" in item):
        raise fail(where, "template", "give exactly one of template and pod", "a template name or a Pod manifest")
    if "pod" in item:
        source, origin = item["pod"], "pod"
        metadata = source.get("metadata") if isinstance(source, Mapping) else None
        if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str):
            raise fail(where, "pod", "not a Pod manifest with metadata.name", "a Pod manifest")
        default_name = metadata["name"]
    else:
        name = item["template"]
        if not isinstance(name, str) or name not in templates:
            raise fail(where, "template", f"unknown template {name!r}", ", ".join(map(str, templates)) or "a template")
        source, origin = templates[name], f"templates.{name}"
        if not isinstance(source, Mapping) or not isinstance(source.get("spec"), Mapping):
            raise fail(f"templates.{name}", "spec", "missing", "a pod template with a spec")
        if not isinstance(source.get("metadata") or {}, Mapping):
            raise fail(f"templates.{name}", "metadata", "not a mapping", "object metadata")
        default_name = f"{name}-{index}"
    if not isinstance(source.get("spec") or {}, Mapping):
        raise fail(where, f"{origin}.spec", "not a mapping", "a pod spec")
    pod: RawObject = {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(dict(source.get("metadata") or {})),
                      "spec": copy.deepcopy(dict(source.get("spec") or {}))}
    name = item.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise fail(where, "name", f"{name!r}", "a pod name")
    pod["metadata"]["name"] = name
    pod["status"] = {"phase": "Pending"}
    return pod, origin


def _set_namespace(meta: RawObject, item: Mapping[str, Any], origin: str, fail: Any, where: str) -> None:
    """The item's ``namespace`` (else the manifest's, else ``default``); the two disagreeing is refused."""
    own = meta.get("namespace")
    if "namespace" not in item:
        meta["namespace"] = own if own not in (None, "") else "default"
        return
    namespace = item["namespace"]
    if not isinstance(namespace, str):
        raise fail(where, "namespace", f"{namespace!r} is not a string", "a namespace name")
    if own not in (None, "", namespace):
        raise fail(where, "namespace", f"{namespace!r} but {origin}.metadata.namespace is {own!r}", "one namespace")
    meta["namespace"] = namespace


def _check_pod(pod: RawObject, item: Mapping[str, Any], origin: str, fail: Any, where: str) -> None:
    """The pod as the API server checks it on create (``kube.parse.parse_pod``, which the
    simulated store reads it with: a pod it refused would silently never arrive), and pending."""
    try:
        parsed = parse_pod(pod)
    except InputError as error:
        raise fail(where, _item_field(error.field, item, origin), error.problem, error.expected) from None
    if parsed.node_name:
        raise fail(where, f"{origin}.spec.nodeName", "a trace pod arrives pending",
                   "no nodeName: the scheduler under test binds it (bound pods belong in --cluster)")


def _item_field(field: str, item: Mapping[str, Any], origin: str) -> str:
    """The item's field that gave a pod's field (its name, namespace, priority, gang), else the
    manifest's field under ``pod`` or ``templates.NAME``."""
    if field == "metadata.name":
        return "name"
    if field == "metadata.namespace" and "namespace" in item:
        return "namespace"
    if field == "spec.priority" and item.get("priority") is not None:
        return "priority"
    return f"{origin}.{field}" if field else origin


def _join_gang(pod: RawObject, gang: Any, fail: Any, where: str) -> None:
    if not isinstance(gang, Mapping) or not isinstance(gang.get("name"), str) or not gang["name"]:
        raise fail(where, "gang", "not a mapping with a name", "{name: NAME, minMember: N}")
    unknown = sorted(set(gang) - {"name", "minMember"}, key=str)
    if unknown:
        raise fail(where, f"gang.{unknown[0]}", "unknown field", "name, minMember")
    try:
        expect_label_value(gang["name"], "gang.name")  # (the value of the label kubeplace.io/gang)
    except InputError as error:
        raise fail(where, "gang.name", error.problem) from None
    min_member = _whole(gang, "minMember", fail, where, 1, INT32_MAX, 1, "gang.minMember")
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
