"""Measured usage: the resource metrics API (``metrics.k8s.io/v1beta1``), what metrics-server
serves and ``kubectl top`` reads.

NodeMetrics and PodMetrics are read from a live cluster (:func:`kube.live.load_live_snapshot`)
or from snapshot files, as ``kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes`` prints them
(``NodeMetricsList``/``PodMetricsList``, or the single objects), and parsed into integers of
kubeplace's units (milli-CPU, bytes: metrics-server reports nanocores, rounded up here) with
their timestamps in seconds since the epoch.

The *measured load* of a node (:func:`measured_load`) is what load-aware placement reads, as
Koordinator's LoadAwareScheduling estimates it: the node's usage, plus the requests of the pods
running there that the metrics cannot include yet (a pod without PodMetrics when pods are
measured, or created after the node was measured), so that pods bound since the last scrape are
not forgotten. Metrics older than the allowed age are dropped with one warning line
(:func:`fresh_metrics`): the load then falls back to requests.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubeplace.kube.errors import InputError, expect_list, expect_mapping, expect_namespace, expect_str
from kubeplace.kube.objects import CPU, MEMORY, NodeMetrics, Pod, PodMetrics, Snapshot
from kubeplace.kube.quantity import QuantityError, resource_amount

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
NODE_METRICS = (GROUP, "NodeMetrics")
POD_METRICS = (GROUP, "PodMetrics")
KINDS = (NODE_METRICS, POD_METRICS)
MEASURED = (CPU, MEMORY)
"""The resources the metrics API measures."""
DEFAULT_MAX_AGE = 300.0
"""Seconds after which metrics count as stale (``--metrics-max-age``; 0: no limit)."""

RawObject = Mapping[str, Any]
RFC3339 = "an RFC 3339 time such as 2025-01-02T03:04:05Z"

__all__ = ["DEFAULT_MAX_AGE", "GROUP", "KINDS", "MEASURED", "NODE_METRICS", "POD_METRICS", "VERSION",
           "Load", "MetricsNote", "fresh_metrics", "measured_load", "metrics_objects", "parse_node_metrics",
           "parse_pod_metrics", "parse_time", "unmeasured"]


def parse_time(raw: object, field_name: str) -> float:
    """An RFC 3339 timestamp (``2025-01-02T03:04:05Z``, fractions allowed) in seconds since the
    epoch; YAML's own datetimes are accepted as written."""
    if isinstance(raw, datetime.datetime):
        moment = raw if raw.tzinfo else raw.replace(tzinfo=datetime.UTC)
        return moment.timestamp()
    text = expect_str(raw, field_name)
    if not text:
        raise InputError("missing timestamp", field=field_name, expected=RFC3339)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InputError(f"invalid timestamp {text!r}", field=field_name,
                         expected=RFC3339) from None
    if moment.tzinfo is None:
        raise InputError(f"timestamp {text!r} has no time zone", field=field_name,
                         expected=RFC3339)
    return moment.timestamp()


def _usage(raw: object, field_name: str) -> dict[str, int]:
    usage = {}
    for resource, value in sorted(expect_mapping(raw, field_name).items()):
        try:
            usage[str(resource)] = resource_amount(str(resource), value)
        except QuantityError as error:
            raise InputError(error.problem, field=f"{field_name}.{resource}", expected=error.expected) from None
    return usage


def _label(obj: RawObject) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name") or "?"
    if obj.get("kind") == "PodMetrics":
        return f"PodMetrics {meta.get('namespace') or 'default'}/{name}"
    return f"{obj.get('kind') or 'NodeMetrics'} {name}"


def _named(obj: RawObject) -> tuple[Mapping[str, Any], str]:
    """The object's metadata and its (required) name."""
    meta = expect_mapping(obj.get("metadata"), "metadata")
    name = expect_str(meta.get("name"), "metadata.name")
    if not name:
        raise InputError("missing name", field="metadata.name")
    return meta, name


def parse_node_metrics(obj: RawObject, source: str = "") -> NodeMetrics:
    """One NodeMetrics object; InputError naming the file, object and field otherwise."""
    try:
        _, name = _named(obj)
        return NodeMetrics(name, _usage(obj.get("usage"), "usage"), parse_time(obj.get("timestamp"), "timestamp"),
                           source)
    except InputError as error:
        raise error.located(file=source, obj=_label(obj)) from None


def parse_pod_metrics(obj: RawObject, source: str = "") -> PodMetrics:
    """One PodMetrics object, its containers' usage summed."""
    try:
        meta, name = _named(obj)
        total: dict[str, int] = {}
        for index, raw in enumerate(expect_list(obj.get("containers"), "containers")):
            container = expect_mapping(raw, f"containers[{index}]")
            for resource, amount in _usage(container.get("usage"), f"containers[{index}].usage").items():
                total[resource] = total.get(resource, 0) + amount
        return PodMetrics(expect_namespace(meta), name, total,
                          parse_time(obj.get("timestamp"), "timestamp"), source)
    except InputError as error:
        raise error.located(file=source, obj=_label(obj)) from None


@dataclass(frozen=True)
class MetricsNote:
    """What became of a snapshot's metrics, for one line on stderr (empty when all is well)."""

    stale_nodes: int = 0
    stale_pods: int = 0
    max_age: float = DEFAULT_MAX_AGE
    oldest: float = 0.0
    unavailable: str = ""
    """Why the metrics API could not be read ("" when it could, or for files)."""
    future: int = 0
    """How many of the stale ones are dated after now."""

    def line(self) -> str:
        if self.unavailable:
            return f"metrics API not available ({self.unavailable}); load-aware rules use requests only"
        if not (self.stale_nodes or self.stale_pods):
            return ""
        when = datetime.datetime.fromtimestamp(self.oldest, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        future = f", {self.future} of them dated in the future" if self.future else ""
        return (f"ignored the metrics of {self.stale_nodes} node(s) and {self.stale_pods} pod(s) older than "
                f"{self.max_age:g}s or dated in the future (oldest {when}{future}); their load falls back to "
                f"requests (--metrics-max-age 0 keeps them)")


def fresh_metrics(snapshot: Snapshot, max_age: float, now: float) -> Snapshot:
    """``snapshot`` without the metrics older than ``max_age`` seconds at ``now`` (0: no limit),
    with one line in its ``notes`` saying what was dropped. Metrics dated after ``now`` are dropped
    too: a scrape cannot be later than now, so the clock that stamped them is wrong, and by age
    alone they would count as fresh until long after (one dated 9999-12-31 forever)."""
    if max_age <= 0:
        return snapshot
    nodes = {k: m for k, m in snapshot.node_metrics.items() if 0 <= now - m.timestamp <= max_age}
    pods = {k: m for k, m in snapshot.pod_metrics.items() if 0 <= now - m.timestamp <= max_age}
    stale = [m.timestamp for k, m in snapshot.node_metrics.items() if k not in nodes]
    stale += [m.timestamp for k, m in snapshot.pod_metrics.items() if k not in pods]
    if not stale:
        return snapshot
    note = MetricsNote(len(snapshot.node_metrics) - len(nodes), len(snapshot.pod_metrics) - len(pods), max_age,
                       min(stale), future=sum(1 for t in stale if t > now))
    return replace(snapshot, node_metrics=nodes, pod_metrics=pods, notes=(*snapshot.notes, note.line()))


def unmeasured(pod: Pod, node: NodeMetrics, pod_metrics: Mapping[str, PodMetrics]) -> bool:
    """True when ``node``'s usage cannot include ``pod`` yet: pods are measured and this one is
    not, or it was created after the node was measured."""
    if pod_metrics and pod.key not in pod_metrics:
        return True
    if pod.creation:
        try:
            return parse_time(pod.creation, "metadata.creationTimestamp") > node.timestamp
        except InputError:
            return False
    return False


@dataclass(frozen=True)
class Load:
    """A node's measured load per measured resource."""

    usage: Mapping[str, int] = field(default_factory=dict)
    estimated: int = 0
    """Running pods counted at their requests because the metrics do not include them yet."""


def measured_load(snapshot: Snapshot, resources: Sequence[str] = MEASURED) -> dict[str, Load]:
    """Per node with fresh NodeMetrics: its usage plus the requests of its unmeasured pods."""
    if not snapshot.node_metrics:
        return {}
    by_node: dict[str, list[Pod]] = {}
    for pod in snapshot.bound:
        by_node.setdefault(pod.node_name, []).append(pod)
    out = {}
    for name, metrics in snapshot.node_metrics.items():
        usage = {r: max(int(metrics.usage.get(r, 0)), 0) for r in resources}
        extra = [p for p in by_node.get(name, []) if unmeasured(p, metrics, snapshot.pod_metrics)]
        for pod in extra:
            for r in resources:
                usage[r] += max(int(pod.requests.get(r, 0)), 0)
        out[name] = Load(usage, len(extra))
    return out


def metrics_objects(objects: Iterable[tuple[RawObject, str]]) -> tuple[dict[str, NodeMetrics], dict[str, PodMetrics]]:
    """NodeMetrics by node name and PodMetrics by ``namespace/name`` from raw objects already
    sorted by kind (:func:`kube.parse.build_snapshot`); a duplicate is an input error."""
    nodes: dict[str, NodeMetrics] = {}
    pods: dict[str, PodMetrics] = {}
    for obj, where in objects:
        if obj.get("kind") == "NodeMetrics":
            node = parse_node_metrics(obj, where)
            if node.node in nodes:
                raise InputError(f"duplicate NodeMetrics (first in {nodes[node.node].source})", file=where,
                                 obj=f"NodeMetrics {node.node}")
            nodes[node.node] = node
        else:
            pod = parse_pod_metrics(obj, where)
            if pod.key in pods:
                raise InputError(f"duplicate PodMetrics (first in {pods[pod.key].source})", file=where,
                                 obj=f"PodMetrics {pod.key}")
            pods[pod.key] = pod
    return dict(sorted(nodes.items())), dict(sorted(pods.items()))
