"""``kubeplace bench consolidate-scale``: ``rebalance --consolidate`` on a large fragmented
cluster, planned on paper.

``nodes`` Karpenter nodes of the ``capacity`` bench's CPU instance types (families c, m, r of 2 to
32 vCPUs, on demand in three zones), labelled as Karpenter labels them, each with its NodeClaim,
of one NodePool whose budget is every node; each runs pods of a few Deployments (shapes from 250m/256Mi to 2 CPUs/4Gi)
filled to a random share of its CPU (``fill``, low: a cluster after a scale-down), one DaemonSet
pod each. Measured: the cost per hour before and after, nodes removed (and added, ``--replace``),
pods moved, the bound and the gap, the seconds, and whether the answer was verified.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from typing import Any

from kubeplace.kube.catalogue import PRICE_UNIT, parse_catalogue
from kubeplace.kube.objects import GPU
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.rebalance.cluster_state import state_of
from kubeplace.rebalance.consolidate import consolidate
from kubeplace.rebalance.movable import Rules
from kubeplace.rebalance.solve_moves import Settings
from kubeplace_bench.capacity_workloads import (
    CAPACITY_TYPE_LABEL,
    CPU_FAMILIES,
    CPU_SIZES,
    INSTANCE_TYPE_LABEL,
    ZONE_LABEL,
    ZONES,
    catalogue,
)

NODEPOOL_LABEL = "karpenter.sh/nodepool"
SHAPES = ((250, 256), (500, 512), (500, 1024), (1000, 2048), (1000, 1024), (2000, 4096))
"""(millicores, MiB) of the Deployments' pods."""


@dataclass(frozen=True)
class ConsolidateScaleSpec:
    nodes: int = 200
    fill: tuple[float, float] = (0.1, 0.6)
    """Each node's pods take a random share of its CPU in this range."""
    seed: int = 0
    replace: bool = False


@dataclass(frozen=True)
class ConsolidateScaleResult:
    nodes: int
    pods: int
    cost_before: float
    cost_after: float
    bound: float
    gap: float
    nodes_removed: int
    nodes_added: int
    pods_moved: int
    status: str
    verified: bool
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cluster(spec: ConsolidateScaleSpec) -> list[dict[str, Any]]:
    """The nodes, pods, the DaemonSet pods and the NodePool, as raw objects."""
    rng = random.Random(spec.seed)
    types = [(family, cpu, cpu * gib) for family, (gib, _) in CPU_FAMILIES.items() for cpu in CPU_SIZES]
    objects: list[dict[str, Any]] = [_node_pool()]
    for i in range(spec.nodes):
        family, cpu, memory_gi = rng.choice(types)
        name = f"node-{i:04d}"
        objects.append(_node(name, f"{family}-{cpu}x-amd64-linux", rng.choice(ZONES), cpu, memory_gi))
        objects.append(_node_claim(name))
        objects.append(_pod(f"agent-{i:04d}", name, 50, 64, ("DaemonSet", "agent")))
        budget = int(cpu * 1000 * rng.uniform(*spec.fill))
        k = 0
        while True:
            deployment = rng.randrange(len(SHAPES))
            cpu_m, memory_mi = SHAPES[deployment]
            if cpu_m > budget:
                break
            budget -= cpu_m
            objects.append(_pod(f"d{deployment}-{i:04d}-{k}", name, cpu_m, memory_mi,
                                ("ReplicaSet", f"d{deployment}"), {"app": f"d{deployment}"}))
            k += 1
    return objects


def _node(name: str, instance_type: str, zone: str, cpu: int, memory_gi: int) -> dict[str, Any]:
    allocatable = {"cpu": f"{cpu * 1000 - 100}m", "memory": f"{memory_gi * 1024 - 10}Mi", "pods": "110"}
    labels = {INSTANCE_TYPE_LABEL: instance_type, ZONE_LABEL: zone, CAPACITY_TYPE_LABEL: "on-demand",
              NODEPOOL_LABEL: "default", "kubernetes.io/hostname": name, "kubernetes.io/arch": "amd64",
              "kubernetes.io/os": "linux"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
            "spec": {"providerID": f"kwok://{name}"}, "status": {"allocatable": allocatable,
                                                                 "capacity": dict(allocatable)}}


def _node_claim(node: str) -> dict[str, Any]:
    """The NodeClaim that launched ``node``, initialized long ago: consolidation removes only nodes
    a NodeClaim owns, once it is consolidatable (initialized, consolidateAfter passed)."""
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": f"{node}-claim", "labels": {NODEPOOL_LABEL: "default"}},
            "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                                          "name": "default"}},
            "status": {"nodeName": node, "providerID": f"kwok://{node}", "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def _pod(name: str, node: str, cpu_m: int, memory_mi: int, owner: tuple[str, str],
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1],
                                              "uid": f"uid-{owner[1]}", "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {
                "cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi"}}}]},
            "status": {"phase": "Running"}}


def _node_pool() -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "requirements": [{"key": "karpenter.kwok.sh/instance-family", "operator": "In",
                                  "values": list(CPU_FAMILIES)},
                                 {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": ["on-demand"]}],
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}},
                "disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}}}


def run_consolidate_scale(spec: ConsolidateScaleSpec, time_limit: float) -> ConsolidateScaleResult:
    objects = cluster(spec)
    types = [t for t in catalogue() if GPU not in t["resources"]]
    instance_types = parse_catalogue(types, "the capacity bench's catalogue")
    state = state_of([(o, "consolidate-scale") for o in objects])
    config = Configuration()
    settings = Settings(solver=SolverSettings(time_limit=time_limit, seed=spec.seed))
    started = time.monotonic()
    result = consolidate(state, instance_types, Rules(), config, config.profile(None), settings, spec.replace)
    seconds = time.monotonic() - started
    after = result.cost_after
    return ConsolidateScaleResult(
        nodes=spec.nodes, pods=sum(1 for o in objects if o["kind"] == "Pod" and "agent" not in o["metadata"]["name"]),
        cost_before=round(result.cost_before / PRICE_UNIT, 4), cost_after=round(after / PRICE_UNIT, 4),
        bound=round(result.bound / PRICE_UNIT, 4), gap=round((after - result.bound) / after, 4) if after else 0.0,
        nodes_removed=len(result.drain), nodes_added=len(result.added), pods_moved=len(result.moves),
        status=result.status, verified=result.verified, seconds=round(seconds, 1))
