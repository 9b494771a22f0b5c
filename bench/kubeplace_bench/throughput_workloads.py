"""Workloads of ``kubeplace bench throughput``: kwok nodes and pods, deterministic from a seed.

- ``basic``: scheduler_perf's SchedulingBasic shape. Nodes of 4 CPU / 32 GiB / 110 pods (its
  node-default.yaml) in two pools (label ``pool``: a, b) of half the nodes each; plain pods
  requesting 100m CPU / 500 MiB (its pod-default.yaml), all created while the scheduler is
  stopped (a backlog), as in the issue's measurement.
- ``gangs``: gangs of 3-8 pods, each gang one shape (launcher of 500m / 1 GiB plus workers of
  1-2 CPU and 1-4 GiB), arriving gang by gang, evenly over ``arrival_seconds`` while the
  scheduler runs. A gang is the ``kubeplace.io/gang`` label plus the
  ``kubeplace.io/gang-min-member`` annotation (its size); the kube-scheduler has no gangs and
  binds their pods one by one.
- ``gpu``: openb-shaped GPU pods on GPU nodes, whole GPUs (``nvidia.com/gpu``) and shares of one
  device (``koordinator.sh/gpu-core`` and ``gpu-memory-ratio`` in percent, as ``kubeplace openb
  convert`` writes them, the nodes advertising 100 per GPU). Read from the openb trace when a
  directory is given, else synthetic shapes with openb's mix. The kube-scheduler sees the share
  resources as plain extended resources (no devices); the harness checks every binding's device
  packing afterwards.
- ``churn``: ``pods`` plain pods arrive at the start; then, for ``duration`` seconds, bound pods
  are deleted and as many new ones created, ``churn_rate`` a second.

Pod names carry their creation position, so name order is creation order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kubeplace.kube.gpu_conventions import KOORD_CORE, KOORD_MEMORY
from kubeplace.kube.objects import GPU
from kubeplace_bench.cluster_scenarios import (
    OPENB_ENV,
    OPENB_NODES,
    OPENB_PODS,
    default_openb_dir,
    node,
    pod,
    sample_openb,
)
from kubeplace_bench.controlplane import fake_node_manifest
from kubeplace_bench.gpusim import WHOLE, NodeSpec, PodSpec
from kubeplace_bench.openb import gpu_resources

Manifest = dict[str, Any]

WORKLOADS = ("basic", "gangs", "gpu", "churn")
GANG_LABEL, MIN_MEMBER = "kubeplace.io/gang", "kubeplace.io/gang-min-member"
POOL_LABEL = "pool"
MODEL_LABEL = "nvidia.com/gpu.product"
DEFAULT_PODS = {"basic": 3000, "gangs": 5500, "gpu": 0, "churn": 3000}
"""``--pods`` when not given (gpu: 0 = as many as the openb sample has for the nodes)."""


@dataclass(frozen=True)
class Arrival:
    at: float
    """Seconds after the scheduler is ready (0 for a backlog)."""
    pod: Manifest


@dataclass(frozen=True)
class Workload:
    name: str
    summary: str
    nodes: tuple[Manifest, ...]
    arrivals: tuple[Arrival, ...]
    backlog: bool
    """True: every pod is created before the scheduler starts."""
    gangs: dict[str, int] = field(default_factory=dict)
    """Gang name -> its size (minMember)."""
    churn_seconds: float = 0.0
    churn_rate: float = 0.0
    """Pods deleted and created a second during ``churn_seconds`` (churn only)."""
    notes: tuple[str, ...] = ()

    @property
    def pods(self) -> int:
        return len(self.arrivals)


def basic_nodes(n: int) -> list[Manifest]:
    """scheduler_perf's node-default.yaml shape, in two pools."""
    return [node(f"n{i:05d}", 4, 32, labels={POOL_LABEL: "a" if i < n // 2 else "b"}) for i in range(n)]


def plain_pod(index: int, cpu_m: int = 100, memory_mi: int = 500, shape: str = "basic") -> Manifest:
    """scheduler_perf's pod-default.yaml requests (100m CPU, 500 MiB)."""
    return pod(index, shape, cpu_m, memory_mi)


def basic(nodes: int, pods: int) -> Workload:
    return Workload("basic", f"{nodes} nodes of 4 CPU / 32 GiB (2 pools); {pods} pods of 100m / 500Mi, created "
                    "before the scheduler starts", tuple(basic_nodes(nodes)),
                    tuple(Arrival(0.0, plain_pod(i)) for i in range(pods)), backlog=True)


def gangs(nodes: int, pods: int, seed: int, arrival_seconds: float = 60.0) -> Workload:
    rng = np.random.default_rng([seed, 14])
    shapes = ((1000, 1024), (1000, 4096), (2000, 2048), (2000, 4096))
    members: list[list[Manifest]] = []
    sizes: dict[str, int] = {}
    total = 0
    while total < pods:
        size = min(int(rng.integers(3, 9)), max(pods - total, 3))
        cpu_m, memory_mi = shapes[int(rng.integers(len(shapes)))]
        name = f"g{len(members):05d}"
        gang = []
        for k in range(size):
            manifest = (plain_pod(total + k, 500, 1024, "launcher") if k == 0
                        else plain_pod(total + k, cpu_m, memory_mi, "worker"))
            manifest["metadata"]["labels"][GANG_LABEL] = name
            manifest["metadata"]["annotations"] = {MIN_MEMBER: str(size)}
            gang.append(manifest)
        members.append(gang)
        sizes[name] = size
        total += size
    step = arrival_seconds / max(len(members), 1)
    arrivals = tuple(Arrival(round(g * step, 3), m) for g, gang in enumerate(members) for m in gang)
    return Workload("gangs", f"{nodes} nodes of 4 CPU / 32 GiB; {len(members)} gangs of 3-8 pods ({total} pods) "
                    f"arriving over {arrival_seconds:g}s", tuple(basic_nodes(nodes)), arrivals, backlog=False,
                    gangs=sizes)


def churn(nodes: int, pods: int, duration: float, rate: float) -> Workload:
    return Workload("churn", f"{nodes} nodes of 4 CPU / 32 GiB; {pods} pods of 100m / 500Mi, then {rate:g} pods/s "
                    f"deleted and created for {duration:g}s", tuple(basic_nodes(nodes)),
                    tuple(Arrival(0.0, plain_pod(i)) for i in range(pods)), backlog=False,
                    churn_seconds=duration, churn_rate=rate)


# --------------------------------------------------------------------------- gpu


SYNTHETIC_NODE_SHAPES = (  # cpu milli, memory MiB, gpus, model; weight (openb's mix, roughly)
    (96_000, 786_432, 8, "V100M32", 0.45),
    (96_000, 393_216, 8, "G2", 0.25),
    (64_000, 262_144, 4, "T4", 0.15),
    (96_000, 786_432, 2, "P100", 0.05),
    (96_000, 393_216, 0, "", 0.10),
)
SYNTHETIC_POD_SHAPES = (  # cpu milli, memory MiB, num_gpu, gpu_milli; weight
    (4_000, 16_384, 1, 1000, 0.30),
    (8_000, 32_768, 2, 1000, 0.06),
    (16_000, 65_536, 4, 1000, 0.04),
    (32_000, 131_072, 8, 1000, 0.03),
    (4_000, 15_360, 1, 500, 0.20),
    (2_000, 8_192, 1, 250, 0.12),
    (6_000, 24_576, 1, 600, 0.08),
    (8_000, 16_384, 0, 0, 0.17),
)


def synthetic_gpu(nodes: int, pods: int, seed: int) -> tuple[list[NodeSpec], list[PodSpec]]:
    """openb-like shapes: whole GPUs (1, 2, 4, 8) and shares of one device, about as many GPUs
    asked as there are (the trace's default list asks for about 95%)."""
    rng = np.random.default_rng([seed, 15])
    weights = np.array([s[4] for s in SYNTHETIC_NODE_SHAPES])
    kinds = rng.choice(len(SYNTHETIC_NODE_SHAPES), size=nodes, p=weights / weights.sum())
    node_specs = [NodeSpec(f"gpu-{i:05d}", *SYNTHETIC_NODE_SHAPES[k][:4]) for i, k in enumerate(kinds)]
    gpus = sum(n.gpus for n in node_specs)
    pw = np.array([s[4] for s in SYNTHETIC_POD_SHAPES])
    specs: list[PodSpec] = []
    asked = 0
    while (pods and len(specs) < pods) or (not pods and asked < 0.95 * gpus * WHOLE):
        cpu, mem, num, milli, _ = SYNTHETIC_POD_SHAPES[int(rng.choice(len(SYNTHETIC_POD_SHAPES), p=pw / pw.sum()))]
        specs.append(PodSpec(f"pod-{len(specs):05d}", cpu, mem, num, milli))
        asked += num * milli
    return node_specs, specs


def gpu(nodes: int, pods: int, seed: int, openb_dir: Path | None, synthetic: bool = False) -> Workload:
    """openb's shapes from the trace (``--openb DIR``, else :func:`default_openb_dir`), synthetic
    openb-like ones when there is no trace or ``synthetic``; a note says which."""
    notes: list[str] = []
    data_dir = None if synthetic else openb_dir or default_openb_dir()
    if data_dir is not None:
        from kubeplace_bench.openb import read_nodes, read_pods

        all_nodes, all_pods = read_nodes(data_dir / OPENB_NODES), read_pods(data_dir / OPENB_PODS)
        node_specs, pod_specs = sample_openb(all_nodes, all_pods, nodes, seed)
        if pods:
            pod_specs = pod_specs[:pods]
        found = "--openb" if openb_dir is not None else "the default"
        notes.append(f"shapes: the openb trace at {data_dir} ({found}); {len(node_specs)} of {len(all_nodes)} "
                     f"nodes, {len(pod_specs)} of {len(all_pods)} pods, seed {seed}")
    else:
        node_specs, pod_specs = synthetic_gpu(nodes, pods, seed)
        why = "--synthetic-gpu" if synthetic else f"no openb trace found: give --openb DIR or set {OPENB_ENV}"
        notes.append(f"shapes: synthetic openb-like ({why})")
    node_docs = [gpu_node(i, n) for i, n in enumerate(node_specs)]
    pod_docs = [gpu_pod(j, p) for j, p in enumerate(pod_specs)]
    whole = sum(1 for p in pod_specs if p.num_gpu and not p.is_share)
    shares = sum(1 for p in pod_specs if p.is_share)
    asked = sum(p.gpu_total for p in pod_specs) / WHOLE
    total = sum(n.gpus for n in node_specs)
    notes.append(f"{whole} whole-GPU pods, {shares} GPU-share pods, {len(pod_specs) - whole - shares} CPU pods; "
                 f"{asked:.1f} GPUs asked of {total}")
    return Workload("gpu", f"{len(node_specs)} GPU nodes ({total} GPUs); {len(pod_specs)} openb-shaped pods, created "
                    "before the scheduler starts", tuple(node_docs),
                    tuple(Arrival(0.0, d) for d in pod_docs), backlog=True, notes=tuple(notes))


def gpu_node(index: int, spec: NodeSpec) -> Manifest:
    labels = {MODEL_LABEL: spec.model} if spec.gpus and spec.model else {}
    extended = gpu_capacity(spec.gpus) if spec.gpus else None
    return fake_node_manifest(f"g{index:05d}", cpu=f"{spec.cpu}m", memory=f"{spec.mem}Mi", pods="110",
                              labels=labels, extended=extended)


def gpu_capacity(gpus: int) -> dict[str, str]:
    return {GPU: str(gpus), KOORD_CORE: str(100 * gpus), KOORD_MEMORY: str(100 * gpus)}


def gpu_pod(index: int, spec: PodSpec) -> Manifest:
    gpus = gpu_resources(spec)
    shape = "cpu" if not spec.num_gpu else (f"share{spec.gpu_milli // 10}" if spec.is_share else f"gpu{spec.num_gpu}")
    manifest = pod(index, shape, spec.cpu, spec.mem)
    resources = manifest["spec"]["containers"][0]["resources"]
    resources["requests"].update(gpus)
    if gpus:
        resources["limits"] = dict(gpus)
    if spec.models:
        manifest["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": MODEL_LABEL, "operator": "In", "values": list(spec.models)}]}]}}}
    return manifest


def gpu_need(manifest: Manifest) -> tuple[int, int]:
    """(devices, milli each) a pod manifest of this module asks for; (0, 0) without GPUs."""
    requests = manifest["spec"]["containers"][0]["resources"]["requests"]
    whole = int(requests.get(GPU, 0))
    if whole:
        return whole, 1000
    share = int(requests.get(KOORD_CORE, 0)) * 10
    return (1, share) if share else (0, 0)


def node_gpus(manifest: Manifest) -> int:
    return int(manifest["status"]["allocatable"].get(GPU, 0))


def gpu_milli(manifest: Manifest) -> int:
    """The GPU milli a pod manifest of this module asks for (whole GPUs and shares)."""
    requests = manifest["spec"]["containers"][0]["resources"]["requests"]
    return int(requests.get(GPU, 0)) * WHOLE + int(requests.get(KOORD_CORE, 0)) * 10


def build(name: str, *, nodes: int, pods: int | None, seed: int = 0, arrival_seconds: float = 60.0,
          duration: float = 600.0, churn_rate: float = 20.0, openb_dir: Path | None = None,
          synthetic: bool = False) -> Workload:
    count = DEFAULT_PODS[name] if pods is None else pods
    if name == "basic":
        return basic(nodes, count)
    if name == "gangs":
        return gangs(nodes, count, seed, arrival_seconds)
    if name == "gpu":
        return gpu(nodes, count, seed, openb_dir, synthetic)
    if name == "churn":
        return churn(nodes, count, duration, churn_rate)
    raise ValueError(f"unknown workload {name}; known: {', '.join(WORKLOADS)}")


def gangs_of(arrivals: Sequence[Arrival]) -> dict[str, str]:
    """Pod name -> gang name, for the pods that belong to one."""
    out = {}
    for a in arrivals:
        gang = a.pod["metadata"].get("labels", {}).get(GANG_LABEL)
        if gang:
            out[a.pod["metadata"]["name"]] = gang
    return out

