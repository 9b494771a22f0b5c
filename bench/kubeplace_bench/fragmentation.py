"""FGD's fragmentation of the device simulator's cluster (the benchmarks' metric): the authors'
definition and typical pods, ``kubeplace.simulate.policies.typical``, summed over the nodes."""

from __future__ import annotations

from kubeplace.simulate.policies.typical import TaskDistribution, node_fragmentation
from kubeplace_bench.gpusim import Cluster


def cluster_fragmentation(cluster: Cluster, dist: TaskDistribution) -> float:
    """Sum over nodes of F_n(M), milli-GPU."""
    models = [cluster.nodes[i].model if cluster.n_gpu[i] else "" for i in range(len(cluster.nodes))]
    return float(node_fragmentation(cluster.cpu_free, cluster.dev_free, models, dist).sum())


def fragmentation_ratio(cluster: Cluster, dist: TaskDistribution) -> float:
    free = int(cluster.dev_free.sum())
    return cluster_fragmentation(cluster, dist) / free if free else 0.0
