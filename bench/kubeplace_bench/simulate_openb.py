"""The openb trace as a simulation: its nodes as the cluster, its pods arriving at their
``creation_time`` and running ``deletion_time - creation_time`` seconds once started (a pod
without a deletion time runs to the end; the 5-column files without times arrive one per second
in file order). The data stays where it is (``$KUBEPLACE_OPENB_DIR`` or the shared data directory).

    kubeplace bench openb-simulate [--pods openb_pod_list_default.csv] [--scheduler NAME ...]
    kubeplace openb trace --pods CSV -o trace.yaml     (the Kubernetes-native trace of ``simulate``)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kubeplace.kube.errors import InputError
from kubeplace.simulate.cluster import Cluster
from kubeplace.simulate.trace import Arrival, Trace
from kubeplace_bench.cluster_scenarios import OPENB_ENV, default_openb_dir
from kubeplace_bench.openb import (
    NAMESPACE,
    kube_name,
    node_manifest,
    pod_manifest,
    read_deletions,
    read_nodes,
    read_pods,
)

DEFAULT_NODES = "openb_node_list_gpu_node.csv"
DEFAULT_PODS = "openb_pod_list_default.csv"


def openb_dir() -> Path:
    """Where the trace is (``cluster_scenarios.default_openb_dir``); an InputError when nowhere."""
    found = default_openb_dir()
    if found is None:
        raise InputError(f"no openb trace found (set {OPENB_ENV})", field="--pods")
    return found


def openb_cluster(nodes_csv: Path) -> Cluster:
    return Cluster(tuple(node_manifest(n) for n in read_nodes(nodes_csv)), (), str(nodes_csv))


def openb_trace(pods_csv: Path, first: int | None = None) -> Trace:
    """The pod list as a trace, in arrival order; ``first``: only its first pods."""
    pods = read_pods(pods_csv)
    deletions = read_deletions(pods_csv)
    arrivals = []
    for pod in sorted(pods, key=lambda p: p.creation):  # (a stable sort: file order among equal times)
        manifest = pod_manifest(pod)  # (the simulation sets its uid, creation time and scheduler)
        deletion = deletions.get(pod.name)
        duration = None if deletion is None else float(max(1, deletion - pod.creation))
        arrivals.append(Arrival(float(pod.creation), duration, manifest))
    return Trace(tuple(arrivals[:first]), str(pods_csv))


def pod_keys(pods_csv: Path) -> Sequence[str]:
    return [f"{NAMESPACE}/{kube_name(p.name)}" for p in read_pods(pods_csv)]
