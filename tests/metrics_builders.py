"""Metrics objects (``metrics.k8s.io/v1beta1``) as metrics-server serves them, for tests."""

from __future__ import annotations

from typing import Any

NOW = "2025-06-01T12:00:00Z"
NOW_EPOCH = 1748779200.0


def node_metrics(name: str, cpu: str, memory: str = "1Gi", timestamp: str = NOW) -> dict[str, Any]:
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
            "metadata": {"name": name, "creationTimestamp": timestamp},
            "timestamp": timestamp, "window": "10.5s", "usage": {"cpu": cpu, "memory": memory}}


def pod_metrics(name: str, cpu: str, memory: str = "100Mi", ns: str = "default",
                timestamp: str = NOW) -> dict[str, Any]:
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": timestamp},
            "timestamp": timestamp, "window": "10.5s",
            "containers": [{"name": "main", "usage": {"cpu": cpu, "memory": memory}}]}


def metrics_list(kind: str, *items: dict[str, Any]) -> dict[str, Any]:
    """``kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes``: items without kind/apiVersion."""
    return {"kind": f"{kind}List", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {},
            "items": [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")} for item in items]}
