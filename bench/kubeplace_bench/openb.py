"""Alibaba's openb GPU trace (cluster-trace-gpu-v2023): CSV reading and Kubernetes manifests.

Nodes (``sn,cpu_milli,memory_mib,gpu,model``) become Node objects:

- allocatable = capacity: ``cpu: <cpu_milli>m``, ``memory: <memory_mib>Mi``, ``pods: "1000"`` (the
  trace has no pod limit; 1000 is far above what any node's cpu and memory admit for these pods,
  so the pod count never binds), and on GPU nodes ``nvidia.com/gpu: <gpu>`` plus Koordinator's
  ``koordinator.sh/gpu-core`` and ``koordinator.sh/gpu-memory-ratio`` of ``100 * gpu`` (percent);
- GPU nodes are labelled ``nvidia.com/gpu.product: <model>``.

Pods (``name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,...]``)
become pending Pods of namespace ``openb`` with ``schedulerName: kubeplace``:

- whole GPUs (``gpu_milli == 1000``) request ``nvidia.com/gpu: <num_gpu>``;
- GPU shares (``num_gpu == 1``, ``gpu_milli < 1000``, a multiple of 10) request Koordinator's
  ``koordinator.sh/gpu-core`` and ``koordinator.sh/gpu-memory-ratio`` of ``gpu_milli / 10`` and no
  ``nvidia.com/gpu``; GPU resources are written as requests and limits (extended resources);
- ``gpu_spec`` (models separated by ``|``) of a GPU pod becomes required node affinity
  ``nvidia.com/gpu.product In [...]`` (each model once); the pod keeps the models as written,
  repeats included, since FGD's typical pods are keyed by that string (``PodSpec.models``); a
  CPU-only pod's ``gpu_spec`` is ignored, as the FGD authors' converter ignores it;
- every pod is pending whatever its trace phase (the benchmark treats the whole list as pending);
  ``creationTimestamp`` is 2023-01-01T00:00:00Z plus ``creation_time`` seconds (plus the row
  number for the 5-column files that have no times), so creation order is the trace's.

Files without ``memory_mib`` (``*nomem*``) give memory 0; the 5-column ``multigpu`` files have no
gpu_spec, qos, phase or times. Names are kept when they are valid DNS-1123 names (all openb names
are); otherwise they are lowercased and cleaned, and ``kubeplace.io/openb-name`` on every object
keeps the original. Any bad cell is an :class:`InputError` naming the file, line and column.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubeplace.kube.errors import InputError
from kubeplace.kube.gpu_conventions import KOORD_CORE, KOORD_MEMORY
from kubeplace.kube.objects import GPU
from kubeplace_bench.gpusim import WHOLE, NodeSpec, PodSpec

Manifest = dict[str, Any]

NAMESPACE = "openb"
SCHEDULER = "kubeplace"
MODEL_LABEL = "nvidia.com/gpu.product"
DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
NAME_ANNOTATION = "kubeplace.io/openb-name"
MAX_PODS = "1000"
EPOCH = datetime.datetime(2023, 1, 1, tzinfo=datetime.UTC)
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu")
POD_COLUMNS = ("name", "cpu_milli", "num_gpu", "gpu_milli")
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class _Rows:
    """A CSV file's rows as dicts, with typed access that fails naming file, line and column."""

    def __init__(self, path: Path, required: Sequence[str]) -> None:
        self.path = str(path)
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror}", file=self.path) from None
        self.reader = csv.reader(text.splitlines(), strict=True)
        try:
            self.header = [h.strip() for h in next(self.reader)]
        except StopIteration:
            raise InputError("empty file, expected a header line", file=self.path, line=1) from None
        except csv.Error as e:
            raise InputError(f"malformed CSV: {e}", file=self.path, line=1) from None
        missing = [c for c in required if c not in self.header]
        if missing:
            raise InputError(f"missing column(s) {', '.join(missing)}", file=self.path, line=1,
                             expected=f"a header with {', '.join(required)}")
        self.line = 1

    def __iter__(self) -> Any:
        while True:
            try:
                row = next(self.reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise InputError(f"malformed CSV: {e}", file=self.path, line=self.reader.line_num) from None
            self.line = self.reader.line_num
            if not row:
                continue
            if len(row) != len(self.header):
                raise InputError(f"{len(row)} fields, the header has {len(self.header)}", file=self.path,
                                 line=self.line)
            yield dict(zip(self.header, row, strict=True))

    def integer(self, row: dict[str, str], column: str, default: int | None = None) -> int:
        if column not in row and default is not None:
            return default
        text = row[column].strip()
        if not text and default is not None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise InputError(f"{text!r} is not an integer", file=self.path, line=self.line, field=column,
                             expected="a non-negative integer") from None
        if value < 0:
            raise InputError(f"{value} is negative", file=self.path, line=self.line, field=column,
                             expected="a non-negative integer")
        return value

    def fail(self, problem: str, column: str, expected: str = "") -> InputError:
        return InputError(problem, file=self.path, line=self.line, field=column, expected=expected)


def _text(row: dict[str, str], column: str) -> str:
    value = row.get(column, "").strip()
    return "" if value.lower() == "nan" else value


def read_nodes(path: Path) -> list[NodeSpec]:
    rows = _Rows(path, NODE_COLUMNS)
    out: list[NodeSpec] = []
    seen: dict[str, int] = {}
    for row in rows:
        name = row["sn"].strip()
        if not name:
            raise rows.fail("empty node name", "sn")
        if name in seen:
            raise rows.fail(f"duplicate node name (first on line {seen[name]})", "sn")
        seen[name] = rows.line
        out.append(NodeSpec(name, rows.integer(row, "cpu_milli"), rows.integer(row, "memory_mib"),
                            rows.integer(row, "gpu"), _text(row, "model")))
    return out


def read_pods(path: Path) -> list[PodSpec]:
    rows = _Rows(path, POD_COLUMNS)
    has_time = "creation_time" in rows.header
    out: list[PodSpec] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        name = row["name"].strip()
        if not name:
            raise rows.fail("empty pod name", "name")
        if name in seen:
            raise rows.fail(f"duplicate pod name (first on line {seen[name]})", "name")
        seen[name] = rows.line
        num, milli = rows.integer(row, "num_gpu"), rows.integer(row, "gpu_milli")
        if num == 0 and milli:
            raise rows.fail(f"gpu_milli {milli} without GPUs (num_gpu 0)", "gpu_milli", "0 when num_gpu is 0")
        if num and not 0 < milli <= WHOLE:
            raise rows.fail(f"gpu_milli {milli} out of range", "gpu_milli", "1..1000 when num_gpu > 0")
        if num > 1 and milli != WHOLE:
            raise rows.fail(f"a share of {milli} on {num} GPUs", "gpu_milli", "1000 when num_gpu > 1")
        if milli % 10:
            raise rows.fail(f"gpu_milli {milli} is not a multiple of 10", "gpu_milli",
                            "a multiple of 10 (Koordinator shares are whole percents)")
        # as written, repeats kept: FGD's typical pods tell "V100M16|V100M32|V100M32" from "V100M16|V100M32"
        models = tuple(m.strip() for m in _text(row, "gpu_spec").split("|") if m.strip()) if num else ()
        out.append(PodSpec(name, rows.integer(row, "cpu_milli"), rows.integer(row, "memory_mib", default=0), num,
                           milli if num else 0, models,
                           rows.integer(row, "creation_time", default=0) if has_time else index,
                           _text(row, "qos"), _text(row, "pod_phase")))
    return out


def read_deletions(path: Path) -> dict[str, int]:
    """Each pod's ``deletion_time`` (seconds, like ``creation_time``) where the file has one; a
    deletion before the pod's creation is an :class:`InputError`."""
    rows = _Rows(path, POD_COLUMNS)
    out: dict[str, int] = {}
    if "deletion_time" not in rows.header:
        return out
    for row in rows:
        if not _text(row, "deletion_time"):
            continue
        deletion = rows.integer(row, "deletion_time")
        creation = rows.integer(row, "creation_time", default=0)
        if deletion < creation:
            raise rows.fail(f"deletion_time {deletion} before creation_time {creation}", "deletion_time",
                            ">= creation_time")
        out[row["name"].strip()] = deletion
    return out


# --- names ---------------------------------------------------------------------------------------


def kube_name(name: str) -> str:
    """``name`` if it is a valid DNS-1123 subdomain, else a lowercased, cleaned name with a short
    hash of the original (so that different originals never collide)."""
    if len(name) <= 253 and _DNS.match(name):
        return name
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip(".-")[:200] or "x"
    return f"{cleaned}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class Names:
    """Kubernetes name -> openb name, for nodes and pods."""

    nodes: dict[str, str]
    pods: dict[str, str]

    @staticmethod
    def of(nodes: Iterable[NodeSpec], pods: Iterable[PodSpec]) -> Names:
        return Names({kube_name(n.name): n.name for n in nodes}, {kube_name(p.name): p.name for p in pods})


# --- manifests -----------------------------------------------------------------------------------


def node_manifest(node: NodeSpec) -> Manifest:
    name = kube_name(node.name)
    labels = {"kubernetes.io/hostname": name}
    allocatable = {"cpu": f"{node.cpu}m", "memory": f"{node.mem}Mi", "pods": MAX_PODS}
    if node.gpus:
        allocatable |= {GPU: str(node.gpus), KOORD_CORE: str(100 * node.gpus), KOORD_MEMORY: str(100 * node.gpus)}
        if node.model:
            labels[MODEL_LABEL] = node.model
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"openb-node-uid-{name}", "labels": labels,
                         "annotations": {NAME_ANNOTATION: node.name}},
            "spec": {}, "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


def gpu_resources(pod: PodSpec) -> dict[str, str]:
    if pod.num_gpu == 0:
        return {}
    if pod.gpu_milli >= WHOLE:
        return {GPU: str(pod.num_gpu)}
    percent = str(pod.gpu_milli // 10)
    return {KOORD_CORE: percent, KOORD_MEMORY: percent}


def device_allocated(pod: PodSpec, devices: Sequence[int]) -> str:
    """Koordinator's ``scheduling.koordinator.sh/device-allocated`` value for ``devices``."""
    import json

    percent = str(min(pod.gpu_milli, WHOLE) // 10)
    entries = [{"minor": int(d), "resources": {KOORD_CORE: percent, KOORD_MEMORY: percent}} for d in devices]
    return json.dumps({"gpu": entries}, separators=(",", ":"))


def timestamp(seconds: int) -> str:
    return (EPOCH + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_manifest(pod: PodSpec, *, name: str | None = None, node: str = "",
                 devices: Sequence[int] = ()) -> Manifest:
    """A pending pod, or with ``node`` a running one bound there (``devices`` then become
    Koordinator's device-allocated annotation)."""
    name = name or kube_name(pod.name)
    requests: dict[str, str] = {"cpu": f"{pod.cpu}m", "memory": f"{pod.mem}Mi"}
    gpu = gpu_resources(pod)
    resources: dict[str, Any] = {"requests": requests | gpu}
    if gpu:
        resources["limits"] = dict(gpu)
    annotations = {NAME_ANNOTATION: pod.name}
    if pod.qos:
        annotations["kubeplace.io/openb-qos"] = pod.qos
    if pod.phase:
        annotations["kubeplace.io/openb-phase"] = pod.phase
    spec: dict[str, Any] = {"schedulerName": SCHEDULER,
                            "containers": [{"name": "main", "image": "registry.local/openb:1",
                                            "resources": resources}]}
    if pod.models:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": MODEL_LABEL, "operator": "In", "values": list(dict.fromkeys(pod.models))}]}]}}}
    if node:
        spec["nodeName"] = node
        if devices:
            annotations[DEVICE_ALLOCATED] = device_allocated(pod, devices)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"openb-pod-uid-{name}",
                         "creationTimestamp": timestamp(pod.creation), "labels": {"app": "openb"},
                         "annotations": annotations},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def manifests(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec]) -> tuple[list[Manifest], list[Manifest]]:
    """(Node manifests, Pod manifests); fails when two names clean up to the same Kubernetes name."""
    for kind, items in (("node", nodes), ("pod", pods)):
        names = [kube_name(x.name) for x in items]
        if len(set(names)) != len(names):
            raise InputError(f"two {kind} names map to the same Kubernetes name")
    return [node_manifest(n) for n in nodes], [pod_manifest(p) for p in pods]


def write_manifests(directory: Path, nodes: Sequence[NodeSpec], pods: Sequence[PodSpec]) -> tuple[Path, Path]:
    """Writes ``nodes.yaml`` and ``pods.yaml`` (multi-document YAML) into ``directory``."""
    node_docs, pod_docs = manifests(nodes, pods)
    directory.mkdir(parents=True, exist_ok=True)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    out = []
    for file, docs in (("nodes.yaml", node_docs), ("pods.yaml", pod_docs)):
        path = directory / file
        with path.open("w") as f:
            yaml.dump_all(docs, f, Dumper=dumper, sort_keys=False, default_flow_style=False)
        out.append(path)
    return out[0], out[1]
