"""What the report draws: requests on every node before and after, per resource, and each GPU
device's used share, from the cluster's objects (the pods bound before, and after the plan or the
moves) so that a plan and a rebalance are measured the same way.

Nodes are grouped in pools: the first node-pool label a node has (Karpenter, GKE, EKS, AKS), else
its instance type, else its shape (CPU, memory, GPUs). A cluster with many pools keeps the
largest MAX_POOLS and counts the rest as one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubeplace.kube.gpu_conventions import GpuConventions
from kubeplace.kube.objects import Node, Pod
from kubeplace.models.gpu import WHOLE, DeviceTable
from kubeplace.plan.pipeline import SUMMARY_RESOURCES

FloatArray = npt.NDArray[np.float64]

POOL_LABELS = (
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
)
"""Labels naming a node's pool, the first present wins."""
MAX_POOLS = 12
GIB = 1 << 30


@dataclass(frozen=True)
class ClusterLoad:
    resources: tuple[str, ...]
    nodes: tuple[str, ...]
    pools: tuple[str, ...]
    """(N,) each node's pool."""
    capacity: FloatArray  # (N, R) allocatable
    before: FloatArray  # (N, R) requests of the pods bound before
    after: FloatArray  # (N, R) requests after the plan or the moves
    devices_before: FloatArray
    """(N, D) each GPU device's used share, 0..1; NaN where a node has fewer devices."""
    devices_after: FloatArray

    def pool_names(self) -> list[str]:
        """Pools, the largest first."""
        return [name for name, _ in Counter(self.pools).most_common()]

    def utilisation(self, r: int, after: bool) -> FloatArray:
        """(N,) requested / allocatable of resource ``r``; NaN where a node has none of it."""
        used, cap = (self.after if after else self.before)[:, r], self.capacity[:, r]
        out = np.full(len(cap), np.nan)
        np.divide(used, cap, out=out, where=cap > 0)
        return out


def pool_of(node: Node) -> str:
    for label in POOL_LABELS:
        if node.labels.get(label):
            return node.labels[label]
    cpu = node.allocatable.get("cpu", 0) / 1000
    memory = node.allocatable.get("memory", 0) / GIB
    gpus = sum(v for k, v in node.allocatable.items() if k.endswith("/gpu"))
    return f"{cpu:g} CPU, {memory:.0f} GiB" + (f", {gpus} GPU" if gpus else "")


def pools_of(nodes: Sequence[Node]) -> tuple[str, ...]:
    names = [pool_of(n) for n in nodes]
    counts = Counter(names)
    if len(counts) <= MAX_POOLS:
        return tuple(names)
    kept = {name for name, _ in counts.most_common(MAX_POOLS - 1)}
    other = f"other ({len(counts) - len(kept)} pools)"
    return tuple(name if name in kept else other for name in names)


def shown_resources(nodes: Sequence[Node], conv: GpuConventions) -> tuple[str, ...]:
    """The summary's resources (and the GPU device resource) that some node has."""
    wanted = (*SUMMARY_RESOURCES, conv.device_resource)
    return tuple(r for r in wanted if any(n.allocatable.get(r, 0) > 0 for n in nodes))


def requests_per_node(nodes: Sequence[Node], pods: Sequence[Pod], resources: Sequence[str]) -> FloatArray:
    """(N, R) the pods' requests summed per node (in floats: a chart's precision, never wraps)."""
    index = {n.name: i for i, n in enumerate(nodes)}
    placed = [(index[p.node_name], p) for p in pods if p.node_name in index]
    rows = np.array([i for i, _ in placed], dtype=np.int64)
    amounts = np.array([[float(p.requests.get(r, 0)) for r in resources] for _, p in placed],
                       dtype=np.float64).reshape(len(placed), len(resources))
    out = np.zeros((len(nodes), len(resources)), dtype=np.float64)
    np.add.at(out, rows, amounts)
    return out


def device_shares(nodes: Sequence[Node], pods: Sequence[Pod], conv: GpuConventions) -> FloatArray:
    """(N, D) used share of each device with ``pods`` bound (their allocation annotation, else
    first fit, as the model reads running pods)."""
    free = DeviceTable.build(nodes, pods, conv).free
    return np.where(free >= 0, (WHOLE - free) / WHOLE, np.nan)


def cluster_load(nodes: Sequence[Node], before: Sequence[Pod], after: Sequence[Pod],
                 conv: GpuConventions) -> ClusterLoad:
    """The load of ``nodes`` with the pods ``before`` bound, and with the pods ``after``."""
    resources = shown_resources(nodes, conv)
    capacity = np.array([[float(n.allocatable.get(r, 0)) for r in resources] for n in nodes],
                        dtype=np.float64).reshape(len(nodes), len(resources))
    return ClusterLoad(resources, tuple(n.name for n in nodes), pools_of(nodes), capacity,
                       requests_per_node(nodes, before, resources), requests_per_node(nodes, after, resources),
                       device_shares(nodes, before, conv), device_shares(nodes, after, conv))
