"""Running clusters for the rebalance benchmark, deterministic from a seed.

``fragmented``: a few hundred nodes whose pods were placed by a skewed history (some nodes hot,
some nearly empty), with the pods a real cluster has that must stay (DaemonSet pods, bare pods,
pods with emptyDir) and PodDisruptionBudgets. ``openb``: nodes sampled from Alibaba's openb
trace (read from the shared data directory, never copied) with the trace's pods placed the same
skewed way. ``defrag``: small GPU clusters where 1-GPU pods are scattered so that a pending
multi-GPU job fits nowhere until some move.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kubeplace.kube.objects import GPU

Manifest = dict[str, Any]
MODEL_LABEL = "nvidia.com/gpu.product"


def node(name: str, cpu_m: int, mem_mi: int, gpus: int = 0, labels: dict[str, str] | None = None) -> Manifest:
    alloc = {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi", "pods": "250"}
    if gpus:
        alloc[GPU] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}",
                         "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {}, "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def pod(name: str, namespace: str, cpu_m: int, mem_mi: int, gpus: int = 0, *, node_name: str = "",
        owner: tuple[str, str] | None = ("ReplicaSet", "rs"), labels: dict[str, str] | None = None,
        volumes: list[Manifest] | None = None, scheduler: str = "default-scheduler",
        affinity: Manifest | None = None) -> Manifest:
    requests = {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"}
    resources: Manifest = {"requests": requests}
    if gpus:
        requests[GPU] = str(gpus)
        resources["limits"] = {GPU: str(gpus)}
    metadata: Manifest = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                          "labels": dict(labels or {}), "creationTimestamp": "2024-01-01T00:00:00Z"}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1],
                                        "uid": f"uid-{owner[1]}", "controller": True}]
    spec: Manifest = {"schedulerName": scheduler,
                      "containers": [{"name": "main", "image": "registry.local/app:1", "resources": resources}]}
    if volumes:
        spec["volumes"] = volumes
    if affinity:
        spec["affinity"] = affinity
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending"}}


def pdb(name: str, namespace: str, app: str, allowed: int) -> Manifest:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": app}}, "maxUnavailable": allowed},
            "status": {"disruptionsAllowed": allowed}}


class _Placer:
    """Places pods one at a time on a node drawn with a skewed weight among those with room:
    a few hot nodes fill up, many stay nearly empty, as after scale-ups and churn."""

    def __init__(self, rng: np.random.Generator, nodes: list[Manifest], skew: float) -> None:
        self.rng = rng
        self.names = [n["metadata"]["name"] for n in nodes]
        alloc = [n["status"]["allocatable"] for n in nodes]
        self.free = np.array([[int(a["cpu"][:-1]), int(a["memory"][:-2]), int(a.get(GPU, 0))] for a in alloc],
                             dtype=np.int64)
        self.weight = rng.pareto(skew, len(nodes)) + 0.05
        self.models = [n["metadata"]["labels"].get(MODEL_LABEL, "") for n in nodes]

    def place(self, need: tuple[int, int, int], models: tuple[str, ...] = ()) -> str | None:
        fits = (self.free >= np.array(need)).all(axis=1)
        if models:
            fits &= np.array([m in models for m in self.models])
        if need[2] == 0:
            fits &= self.free[:, 2] == 0  # CPU pods stay off GPU nodes, as taints would keep them
        if not fits.any():
            return None
        w = np.where(fits, self.weight, 0)
        i = int(self.rng.choice(len(w), p=w / w.sum()))
        self.free[i] -= need
        return str(self.names[i])


def fragmented(seed: int, n_nodes: int = 200, load: float = 0.45) -> list[Manifest]:
    rng = np.random.default_rng([seed, 7])
    nodes = []
    for i in range(n_nodes):
        if i % 10 == 9:
            nodes.append(node(f"gpu-{i:04d}", 64000, 512 * 1024, 8))
        elif i % 3 == 0:
            nodes.append(node(f"big-{i:04d}", 32000, 128 * 1024))
        else:
            nodes.append(node(f"std-{i:04d}", 16000, 64 * 1024))
    placer = _Placer(rng, nodes, skew=1.2)
    objects: list[Manifest] = list(nodes)
    for n in nodes:  # a DaemonSet pod per node: it stays
        name = n["metadata"]["name"]
        objects.append(pod(f"agent-{name}", "kube-system", 100, 128, node_name=name, owner=("DaemonSet", "agent")))
    shapes = [(250, 512), (500, 1024), (1000, 2048), (2000, 4096), (4000, 8192), (1000, 8192)]
    cpu_total = sum(int(n["status"]["allocatable"]["cpu"][:-1]) for n in nodes if GPU not in n["status"]["allocatable"])
    budget, k = load * cpu_total, 0
    while budget > 0:
        cpu, mem = shapes[int(rng.integers(len(shapes)))]
        app, ns = f"app-{k % 40}", f"team-{k % 6}"
        kind = rng.random()
        extra: dict[str, Any] = {"owner": ("ReplicaSet", f"{app}-rs")}
        if kind < 0.03:
            extra["owner"] = None
        elif kind < 0.06:
            extra["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        where = placer.place((cpu, mem, 0))
        if where is None:
            break
        objects.append(pod(f"{app}-{k:05d}", ns, cpu, mem, node_name=where, labels={"app": app}, **extra))
        budget -= cpu
        k += 1
    for g in range(n_nodes // 10 * 5):  # GPU jobs: 1 or 2 whole GPUs
        gpus = 1 if rng.random() < 0.7 else 2
        where = placer.place((8000 * gpus, 32768 * gpus, gpus))
        if where is not None:
            objects.append(pod(f"train-{g:04d}", "ml", 8000 * gpus, 32768 * gpus, gpus, node_name=where,
                               owner=("Job", f"train-{g:04d}"), labels={"app": "train"}))
    objects += [pdb(f"app-{a}-pdb", f"team-{a % 6}", f"app-{a}", int(rng.integers(0, 3))) for a in range(0, 40, 4)]
    return objects


def openb(seed: int, data_dir: Path, n_nodes: int = 250) -> tuple[list[Manifest], str]:
    """openb nodes sampled with the trace's model mix and the trace's pods (GPU shares rounded
    up to one whole GPU), placed with the skewed history; returns (objects, a note)."""
    from kubeplace_bench.cluster_scenarios import OPENB_NODES, OPENB_PODS, sample_openb
    from kubeplace_bench.gpusim import WHOLE
    from kubeplace_bench.openb import read_nodes, read_pods

    all_nodes = read_nodes(data_dir / OPENB_NODES)
    all_pods = read_pods(data_dir / OPENB_PODS)
    specs, pods = sample_openb(all_nodes, all_pods, n_nodes, seed)
    nodes = [node(f"ob-{i:04d}", n.cpu, n.mem, n.gpus, {MODEL_LABEL: n.model} if n.gpus and n.model else {})
             for i, n in enumerate(specs)]
    placer = _Placer(np.random.default_rng([seed, 11]), nodes, skew=1.5)
    objects: list[Manifest] = list(nodes)
    placed = 0
    for j, p in enumerate(pods):
        gpus = p.num_gpu if p.gpu_milli >= WHOLE else (1 if p.num_gpu else 0)
        where = placer.place((p.cpu, p.mem, gpus), p.models if gpus else ())
        if where is None:
            continue
        affinity = None
        if p.models and gpus:
            affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": list(p.models)}]}]}}}
        objects.append(pod(f"ob-{j:05d}", "openb", p.cpu, p.mem, gpus, node_name=where,
                           owner=("ReplicaSet", f"ob-rs-{j % 50}"), affinity=affinity))
        placed += 1
    note = f"openb: {len(nodes)} of {len(all_nodes)} nodes, {placed} of {len(pods)} sampled pods placed (seed {seed})"
    return objects, note


def defrag(seed: int, n_nodes: int = 6, gpus_per_node: int = 4, job_gpus: int = 4,
           members: int = 1, sizes: tuple[int, ...] = (1, 2)) -> tuple[list[Manifest], str]:
    """GPU nodes with pods of ``sizes`` GPUs scattered (each node keeps fewer than ``job_gpus``
    free), and a pending job of ``members`` pods of ``job_gpus`` GPUs (a gang when members > 1).
    Returns (objects, the job's key: NS/NAME of its first pod)."""
    rng = np.random.default_rng([seed, 13])
    nodes = [node(f"g{i:02d}", 64000, 512 * 1024, gpus_per_node) for i in range(n_nodes)]
    objects: list[Manifest] = list(nodes)
    k = 0
    for i in range(n_nodes):
        free_left = int(rng.integers(1, job_gpus)) if job_gpus <= gpus_per_node else gpus_per_node
        used = max(gpus_per_node - free_left, 1)
        while used > 0:
            g = int(rng.choice([s for s in sizes if s <= used] or [1]))
            objects.append(pod(f"w{k:03d}", "ml", 4000 * g, 16384 * g, g, node_name=f"g{i:02d}",
                               owner=("Job", f"w{k:03d}"), labels={"app": "worker"}))
            used -= g
            k += 1
    gang = {"kubeplace.io/gang": "job"} if members > 1 else {}
    for m in range(members):
        job = pod(f"job-{m}", "ml", 8000, 32768, job_gpus, owner=("Job", "job"), labels=gang, scheduler="kubeplace")
        if members > 1:
            job["metadata"]["annotations"] = {"kubeplace.io/gang-min-member": str(members)}
        objects.append(job)
    return objects, "ml/job-0"
