"""Scenarios for ``kubeplace bench cluster``: kwok nodes and pending pods, deterministic from a seed.

Each scenario is a list of Node manifests (kwok fake nodes, see :func:`bench.controlplane.fake_node_manifest`)
and a list of pod templates in creation order. The runner gives the pods their namespace and
scheduler name; everything else (requests, labels, affinity, tolerations) is the same for the
kube-scheduler copy and the kubeplace copy, so both work under the same rules.

Pod names start with their zero-padded position (``p00042-...``), so that name order, creation
order and the kube-scheduler's queue order (priority, then arrival) are one and the same.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kubeplace.kube.objects import GPU
from kubeplace_bench.controlplane import KWOK_TOLERATION, fake_node_manifest
from kubeplace_bench.gpusim import WHOLE, NodeSpec, PodSpec

Manifest = dict[str, Any]

TENANT = "tenant"
MODEL_LABEL = "nvidia.com/gpu.product"
IMAGE = "registry.local/bench:1"
OPENB_ENV = "KUBEPLACE_OPENB_DIR"
OPENB_SHARED = Path("shared", "data", "openb")
OPENB_NODES = "openb_node_list_all_node.csv"
OPENB_PODS = "openb_pod_list_default.csv"
OPENB_SAMPLE_NODES = 250


def default_openb_dir(environ: Mapping[str, str] | None = None, start: Path | None = None) -> Path | None:
    """The openb trace's directory when none is given: ``$KUBEPLACE_OPENB_DIR``, else the first
    ``shared/data/openb`` that holds the node list, looking upward from this checkout (a worktree
    nested deeper than the main checkout finds it too); None when there is neither."""
    given = (os.environ if environ is None else environ).get(OPENB_ENV)
    if given:
        return Path(given)
    for parent in (start or Path(__file__).resolve()).parents:
        if (parent / OPENB_SHARED / OPENB_NODES).is_file():
            return parent / OPENB_SHARED
    return None


@dataclass(frozen=True)
class Followers:
    """Pods created only once their leader is bound, each with ``nodeSelector[key]`` = the value of
    ``key`` on the leader's node: how JobSet's pod webhook admits the followers of a job with
    exclusive topology (``pod_mutating_webhook.go setNodeSelector``; until the leader is scheduled
    the follower's creation is refused and retried)."""

    leader: str
    """Name of the leader's template in ``Scenario.pods``."""
    key: str
    pods: tuple[Manifest, ...]


@dataclass(frozen=True)
class Expected:
    """Pods each scheduler is expected to place in a scenario, by construction."""

    kube_scheduler: int
    kubeplace: int
    why: str


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    nodes: tuple[Manifest, ...]
    pods: tuple[Manifest, ...]
    """Templates in creation order; the runner sets namespace and schedulerName."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    followers: tuple[Followers, ...] = ()
    """Created in a second wave, once the first wave is placed, for the leaders that were placed."""
    objects: tuple[Manifest, ...] = ()
    """Other namespaced objects, created in each copy's namespace before its pods."""
    expected: Expected | None = None

    @property
    def workload_pods(self) -> int:
        """Every pod of the workload, followers included whether or not they get created."""
        return len(self.pods) + sum(len(f.pods) for f in self.followers)
    background: tuple[tuple[Manifest, ...], ...] = ()
    """Pods bound to their nodes (``nodeName``) before the pending ones arrive, in groups created a
    little over a second apart; a scenario with any is a preemption scenario (``cluster_preempt``)."""
    priority_classes: tuple[tuple[str, int], ...] = ()
    """(name, value) of the PriorityClasses its pods name, created for the run."""


def node(name: str, cpu: int, memory_gi: int, gpus: int = 0, labels: dict[str, str] | None = None,
         pods: int = 110) -> Manifest:
    """A kwok node with ``cpu`` cores, ``memory_gi`` GiB and ``gpus`` whole ``nvidia.com/gpu``."""
    return fake_node_manifest(name, cpu=str(cpu), memory=f"{memory_gi}Gi", pods=str(pods), labels=labels,
                              extended={GPU: str(gpus)} if gpus else None)


def pod(index: int, shape: str, cpu_m: int, memory_mi: int, gpus: int = 0, *,
        labels: dict[str, str] | None = None, affinity: Manifest | None = None,
        annotations: dict[str, str] | None = None, spread: list[Manifest] | None = None) -> Manifest:
    """A pending pod template: requests (GPUs also as limits, as extended resources need), and
    optionally labels, annotations, affinity and topology spread constraints."""
    resources: Manifest = {"requests": {"cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi"}}
    if gpus:
        resources["requests"][GPU] = str(gpus)
        resources["limits"] = {GPU: str(gpus)}
    spec: Manifest = {"containers": [{"name": "main", "image": IMAGE, "resources": resources}],
                      "tolerations": [dict(KWOK_TOLERATION)], "terminationGracePeriodSeconds": 0}
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = spread
    metadata: Manifest = {"name": f"p{index:05d}-{shape}", "labels": {"app": "bench", "shape": shape, **(labels or {})}}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


# --------------------------------------------------------------------------- (1) fragmented GPUs


def fragmented_gpu(seed: int) -> Scenario:
    """n nodes x 4 GPUs; 2n one-GPU pods arrive first, then n/2 four-GPU pods (exactly the GPU capacity).

    One pod at a time, LeastAllocated sends each 1-GPU pod to the emptiest node: every node ends
    with ~2 GPUs used and no node has 4 free, so every 4-GPU pod stays pending. Packing the 1-GPU
    pods four to a node leaves n/2 whole nodes for the 4-GPU pods.
    """
    rng = np.random.default_rng([seed, 1])
    n = 2 * int(rng.integers(3, 6))  # 6, 8 or 10 nodes
    nodes = [node(f"gpu-{i:03d}", 32, 128, gpus=4) for i in range(n)]
    pods: list[Manifest] = []
    for _ in range(2 * n):
        pods.append(pod(len(pods), "gpu1", int(rng.choice([2000, 4000, 6000])), int(rng.choice([8, 12, 16])) * 1024,
                        gpus=1))
    for _ in range(n // 2):
        pods.append(pod(len(pods), "gpu4", 16000, 64 * 1024, gpus=4))
    return Scenario("fragmented-gpu", f"{n} nodes x 4 GPUs; {2 * n} 1-GPU pods, then {n // 2} 4-GPU pods",
                    tuple(nodes), tuple(pods))


# --------------------------------------------------------------------------- (2) mixed CPU / memory


def mixed_shapes(seed: int) -> Scenario:
    """n nodes of 16 CPU / 64 GiB; 4n small pods (2 CPU / 4 GiB), then n/2 CPU-heavy (12 CPU / 8 GiB)
    and n/2 memory-heavy (2 CPU / 56 GiB) pods, alternating.

    Spread four to a node, the small pods leave 8 CPU / 48 GiB everywhere: neither large shape
    fits. Packed eight to a node they fill half the nodes, and each other node takes one
    CPU-heavy and one memory-heavy pod (14 CPU / 64 GiB).
    """
    rng = np.random.default_rng([seed, 2])
    n = int(rng.integers(6, 11))
    nodes = [node(f"cpu-{i:03d}", 16, 64) for i in range(n)]
    pods = [pod(i, "small", 2000, 4096) for i in range(4 * n)]
    for k in range(2 * (n // 2)):
        pods.append(pod(len(pods), "cpu-heavy", 12000, 8192) if k % 2 == 0 else
                    pod(len(pods), "mem-heavy", 2000, 56 * 1024))
    return Scenario("mixed-shapes", f"{n} nodes of 16 CPU / 64 GiB; {4 * n} small pods, then {n // 2} CPU-heavy "
                    f"and {n // 2} memory-heavy pods", tuple(nodes), tuple(pods))


# --------------------------------------------------------------------------- (3) tenants


def tenant_affinity(tenant: str) -> Manifest:
    """kubeplace's Tenant rule (untenanted nodes shared) as required node affinity, which the
    kube-scheduler honours: ``tenant In [t]`` OR ``tenant DoesNotExist`` (terms are ORed)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": TENANT, "operator": "In", "values": [tenant]}]},
        {"matchExpressions": [{"key": TENANT, "operator": "DoesNotExist"}]},
    ]}}}


def tenants(seed: int) -> Scenario:
    """Tenant a and b nodes plus shared (unlabelled) nodes, 16 CPU / 64 GiB each. Each tenant's
    small pods (2 CPU / 4 GiB, interleaved a, b) then its large pods (12 CPU / 16 GiB).

    Pods carry the label ``tenant`` (kubeplace's Tenant filter, trusted by the bench's
    configuration since their namespace names no tenant) and the same rule as required node
    affinity (the kube-scheduler's NodeAffinity): both schedulers see the same feasible nodes.
    """
    rng = np.random.default_rng([seed, 3])
    per_tenant, shared = int(rng.integers(2, 5)), int(rng.integers(2, 4))
    nodes = [node(f"ten-{t}-{i:02d}", 16, 64, labels={TENANT: t}) for t in "ab" for i in range(per_tenant)]
    nodes += [node(f"shared-{i:02d}", 16, 64) for i in range(shared)]
    capacity_nodes = per_tenant + shared / 2  # each tenant's fair share of the nodes it may use
    small = int(4 * capacity_nodes)
    large = max(1, int(capacity_nodes // 2))
    pods: list[Manifest] = []
    for _ in range(small):
        for t in "ab":
            pods.append(pod(len(pods), f"small-{t}", 2000, 4096, labels={TENANT: t}, affinity=tenant_affinity(t)))
    for _ in range(large):
        for t in "ab":
            pods.append(pod(len(pods), f"large-{t}", 12000, 16 * 1024, labels={TENANT: t},
                            affinity=tenant_affinity(t)))
    return Scenario("tenants", f"{per_tenant} nodes per tenant (a, b) + {shared} shared; {2 * small} small, then "
                    f"{2 * large} large pods", tuple(nodes), tuple(pods))


# --------------------------------------------------------------------------- (4) openb, scaled down


def sample_openb(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], n_nodes: int,
                 seed: int) -> tuple[list[NodeSpec], list[PodSpec]]:
    """``n_nodes`` nodes drawn per GPU model in proportion (the model mix is kept), and the same share
    of the pods, drawn uniformly and kept in trace order."""
    rng = np.random.default_rng([seed, 4])
    by_model: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        by_model.setdefault(n.model if n.gpus else "", []).append(i)
    share = min(1.0, n_nodes / max(len(nodes), 1))
    picked: list[int] = []
    for model in sorted(by_model):
        members = by_model[model]
        take = min(len(members), max(1, round(len(members) * share)))
        picked += rng.choice(members, size=take, replace=False).tolist()
    n_pods = min(len(pods), round(len(pods) * len(picked) / max(len(nodes), 1)))
    pod_idx = np.sort(rng.choice(len(pods), size=n_pods, replace=False))
    return [nodes[i] for i in sorted(picked)], [pods[int(j)] for j in pod_idx]


def openb(seed: int, data_dir: Path | None = None, n_nodes: int = OPENB_SAMPLE_NODES) -> Scenario:
    """A scaled-down openb cluster; GPU shares become one whole GPU (ceil), since the kube-scheduler
    knows nothing of shares and both copies must follow the same rules. ``data_dir``: the trace's
    directory (default: :func:`default_openb_dir`)."""
    from kubeplace_bench.openb import read_nodes, read_pods

    data_dir = data_dir or default_openb_dir()
    if data_dir is None:
        raise FileNotFoundError(f"no openb trace found (set {OPENB_ENV})")
    all_nodes = read_nodes(data_dir / OPENB_NODES)
    all_pods = read_pods(data_dir / OPENB_PODS)
    nodes, pods = sample_openb(all_nodes, all_pods, n_nodes, seed)
    node_docs = []
    for i, n in enumerate(nodes):
        labels = {MODEL_LABEL: n.model} if n.gpus and n.model else {}
        node_docs.append(fake_node_manifest(
            f"ob-{i:04d}", cpu=f"{n.cpu}m", memory=f"{n.mem}Mi", pods="1000", labels=labels,
            extended={GPU: str(n.gpus)} if n.gpus else None))
    pod_docs, shares = [], 0
    for j, p in enumerate(pods):
        gpus = p.num_gpu if p.gpu_milli >= WHOLE else math.ceil(p.num_gpu * p.gpu_milli / WHOLE)
        shares += 0 < p.gpu_milli < WHOLE
        affinity = None
        if p.models:
            models = list(dict.fromkeys(p.models))  # gpu_spec as written may repeat a model
            affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": models}]}]}}}
        shape = f"gpu{gpus}" if gpus else "cpu"
        pod_docs.append(pod(j, shape, p.cpu, p.mem, gpus, affinity=affinity))
    gpus_total = sum(n.gpus for n in nodes)
    asked = sum(int(d["spec"]["containers"][0]["resources"]["requests"].get(GPU, 0)) for d in pod_docs)
    notes = (f"openb sample: {len(nodes)} of {len(all_nodes)} nodes ({OPENB_NODES}, model mix kept), {len(pods)} of "
             f"{len(all_pods)} pods ({OPENB_PODS}, trace order), seed {seed}",
             f"{shares} GPU-share pods rounded up to 1 whole GPU (the kube-scheduler has no GPU shares); "
             f"{asked} GPUs requested of {gpus_total}")
    return Scenario("openb", f"{len(nodes)} openb nodes ({gpus_total} GPUs), {len(pods)} pods",
                    tuple(node_docs), tuple(pod_docs), notes)


SCENARIOS: dict[str, Callable[[int], Scenario]] = {
    "fragmented-gpu": fragmented_gpu,
    "mixed-shapes": mixed_shapes,
    "tenants": tenants,
    "openb": openb,
}
