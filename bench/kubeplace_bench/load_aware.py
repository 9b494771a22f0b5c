"""Load-aware placement vs a requests-only plan on a synthetic cluster with skewed measured load.

Every node carries the same requests, but what the pods really use (NodeMetrics) is skewed: a
share of the nodes runs hot (measured at 60-95% CPU), the rest cool (15-45%). The same pending
batch is planned twice on the same snapshot, with the default profile (LoadAware: hot nodes
filtered out, measured load balanced) and with LoadAware disabled (requests only). Each plan is
checked by the independent verifier (with the thresholds it was made under); the measures are the
nodes' CPU load after placement as metrics would see it (measured usage plus the placed requests).
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np

from kubeplace.kube.metrics import measured_load
from kubeplace.kube.objects import Snapshot
from kubeplace.kube.parse import build_snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.pipeline import make_plan

THRESHOLD = 0.7
TIMESTAMP = "2025-06-01T12:00:00Z"


def synthetic(nodes: int, pods: int, hot_share: float, seed: int) -> Snapshot:
    rng = random.Random(seed)
    objects: list[tuple[dict[str, Any], str]] = []
    alloc = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    for i in range(nodes):
        name = f"node-{i:04d}"
        objects.append(({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                         "status": {"allocatable": alloc}}, "synthetic"))
        objects.append(({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"running-{i:04d}", "namespace": "apps",
                                      "creationTimestamp": "2025-06-01T10:00:00Z"},
                         "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {
                             "requests": {"cpu": "6", "memory": "16Gi"}}}]},
                         "status": {"phase": "Running"}}, "synthetic"))
        hot = rng.random() < hot_share
        cpu = rng.uniform(0.60, 0.95) if hot else rng.uniform(0.15, 0.45)
        objects.append(({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": name},
                         "timestamp": TIMESTAMP, "window": "15s",
                         "usage": {"cpu": f"{int(cpu * 16000)}m", "memory": f"{rng.randint(12, 30)}Gi"}},
                        "synthetic"))
    for j in range(pods):
        objects.append(({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"new-{j:05d}", "namespace": "apps"},
                         "spec": {"schedulerName": "kubeplace", "containers": [{"name": "c", "resources": {
                             "requests": {"cpu": f"{rng.choice([250, 500, 1000, 2000])}m",
                                          "memory": f"{rng.choice([1, 2, 4])}Gi"}}}]}}, "synthetic"))
    return build_snapshot(objects, source="synthetic")


def _measures(snapshot: Snapshot, placements: Any, threshold: float) -> dict[str, Any]:
    loads = measured_load(snapshot)
    cpu = {n.name: loads[n.name].usage["cpu"] for n in snapshot.nodes}
    alloc = {n.name: n.allocatable["cpu"] for n in snapshot.nodes}
    hot_before = {n for n in cpu if cpu[n] / alloc[n] > threshold}
    pending = {(p.namespace, p.name): p for p in snapshot.pending}
    onto_hot = 0
    for p in placements:
        cpu[p.node] += pending[(p.namespace, p.name)].requests.get("cpu", 0)
        onto_hot += p.node in hot_before
    ratio = np.array([cpu[n] / alloc[n] for n in cpu])
    return {"pods_placed": len(placements), "max_cpu_load": round(float(ratio.max()), 4),
            "p95_cpu_load": round(float(np.percentile(ratio, 95)), 4),
            "cpu_load_stddev": round(float(ratio.std()), 4),
            "nodes_above_threshold": int((ratio > threshold).sum()), "nodes_above_threshold_before": len(hot_before),
            "pods_onto_hot_nodes": onto_hot}


def compare(nodes: int, pods: int, hot_share: float, seed: int, solver: SolverSettings) -> dict[str, Any]:
    snapshot = synthetic(nodes, pods, hot_share, seed)
    config = Configuration()
    rows = {}
    for name, profile in (("load-aware", Profile()), ("requests-only", Profile(disabled=("LoadAware",)))):
        started = time.monotonic()
        planned = make_plan(snapshot, config, profile, solver)
        seconds = time.monotonic() - started
        assert not planned.violations, planned.violations[:3]
        rows[name] = {**_measures(snapshot, planned.plan.placements, THRESHOLD), "seconds": round(seconds, 2),
                      "verified": planned.plan.summary.verified}
    return {"nodes": nodes, "pods": pods, "hot_share": hot_share, "seed": seed, "threshold": THRESHOLD,
            "time_limit": solver.time_limit, "plans": rows}


def table(doc: dict[str, Any]) -> str:
    keys = ["pods_placed", "max_cpu_load", "p95_cpu_load", "cpu_load_stddev", "nodes_above_threshold",
            "pods_onto_hot_nodes", "seconds"]
    head = f"{'':24}" + "".join(f"{k:>16}" for k in doc["plans"])
    lines = [f"{doc['nodes']} nodes (16 CPU, {doc['hot_share']:.0%} measured hot), {doc['pods']} pending pods, "
             f"seed {doc['seed']}, threshold {doc['threshold']}; nodes above it before placement: "
             f"{doc['plans']['load-aware']['nodes_above_threshold_before']}", head]
    for k in keys:
        lines.append(f"{k:24}" + "".join(f"{row[k]!s:>16}" for row in doc["plans"].values()))
    return "\n".join(lines)
