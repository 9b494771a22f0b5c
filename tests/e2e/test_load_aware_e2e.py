"""Load-aware placement on the real metrics path: kwok emulates each node's kubelet
``/metrics/resource`` (pod usage from the ``kwok.x-k8s.io/usage-cpu`` annotation), metrics-server
(built from its Go module) scrapes it, and the kube-apiserver's aggregator serves the result as
``metrics.k8s.io/v1beta1`` through a registered APIService: kubeplace reads NodeMetrics exactly as
it would from a real cluster. A hot node is avoided and a cool overcommit node is filled past the
ordinary nodes' headroom; `kubeplace bind` binds that plan.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import controlplane as cp
from .test_bind_e2e import (
    SOLVER_ARGS,
    assert_exit,
    bind_report,
    cli,
    kwok_nodes,
    node_name,
    pod_manifest,
    pod_nodes,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

APISERVICE = "v1beta1.metrics.k8s.io"
METRICS_PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
USAGE_CPU = "kwok.x-k8s.io/usage-cpu"


def _insecure() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _available(api: client.ApiregistrationV1Api) -> bool:
    status = api.read_api_service(APISERVICE).status
    return any(c.type == "Available" and c.status == "True" for c in (status.conditions or []) if status)


@pytest.fixture(scope="module")
def metrics_api(control_plane: cp.ControlPlane, admin_api: client.ApiClient) -> Iterator[int]:
    """metrics-server running and registered as ``v1beta1.metrics.k8s.io``; yields its port."""
    binary = control_plane.bin_dir / "metrics-server"
    if not binary.exists() or not (control_plane.bin_dir / "kwok-metrics.yaml").exists():
        message = f"{binary} or kwok-metrics.yaml missing: run .ci/build-controlplane"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    port = cp.free_port()
    server = control_plane.launch("metrics-server", [
        str(binary), f"--kubeconfig={control_plane.admin_kubeconfig}", *control_plane.delegated_auth_args(),
        "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={control_plane.workdir / 'ms-certs'}",
        "--kubelet-insecure-tls", "--kubelet-use-node-status-port", "--kubelet-preferred-address-types=InternalIP",
        "--metric-resolution=10s", "--kubelet-request-timeout=5s",
    ])  # fmt: skip
    cp.wait_ready(server, lambda: cp.http_ok(f"https://127.0.0.1:{port}/livez", context=_insecure()), 60)
    core, registration = client.CoreV1Api(admin_api), client.ApiregistrationV1Api(admin_api)
    # The aggregator resolves an ExternalName Service to its name: metrics-server on loopback.
    core.create_namespaced_service("kube-system", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics-server"},
        "spec": {"type": "ExternalName", "externalName": "127.0.0.1", "ports": [{"port": port}]}})
    registration.create_api_service({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": APISERVICE},
        "spec": {"service": {"name": "metrics-server", "namespace": "kube-system", "port": port},
                 "group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": True,
                 "groupPriorityMinimum": 100, "versionPriority": 100}})
    try:
        cp.wait_for(lambda: _available(registration), 60, "APIService v1beta1.metrics.k8s.io Available")
        yield port
    finally:
        with contextlib.suppress(ApiException):
            registration.delete_api_service(APISERVICE)
        with contextlib.suppress(ApiException):
            core.delete_namespaced_service("metrics-server", "kube-system")
        server.stop()


def node_cpu(admin_api: client.ApiClient, name: str) -> float:
    """CPUs the metrics API reports for the node (-1 while it has none)."""
    try:
        found: Any = client.CustomObjectsApi(admin_api).get_cluster_custom_object(
            "metrics.k8s.io", "v1beta1", "nodes", name)
    except ApiException:
        return -1.0
    cpu = str(found["usage"]["cpu"])
    scale = {"n": 1e-9, "u": 1e-6, "m": 1e-3}.get(cpu[-1], 1.0)
    return float(cpu.rstrip("num")) * scale


def test_a_hot_node_is_avoided_and_an_overcommit_node_filled_on_real_node_metrics(
    metrics_api: int, control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(admin_api)
    # kwok serves each node's kubelet metrics at its own path; this annotation tells metrics-server
    specs = {suffix: {"cpu": "8", "memory": "32Gi", "labels": labels, "annotations": {
        METRICS_PATH_ANNOTATION: f"/metrics/nodes/{node_name(namespace, suffix)}/metrics/resource"}}
        for suffix, labels in (("hot", {}), ("cool", {}), ("colo", {"overcommit": "true"}))}
    with kwok_nodes(core, namespace, specs) as (hot, cool, colo):
        usage = {hot: "6500m", cool: "500m", colo: "800m"}
        for node, cpu in usage.items():  # each node runs one 1-CPU pod that uses `cpu`
            running = pod_manifest(f"busy-{node[-4:]}", namespace, cpu="1", node=node)
            running["metadata"]["annotations"] = {USAGE_CPU: cpu}
            core.create_namespaced_pod(namespace, running)
        cp.wait_for(lambda: all(node_cpu(admin_api, n) > 0 for n in usage), 90, "NodeMetrics of the three nodes")
        measured = {n: node_cpu(admin_api, n) for n in usage}
        assert measured[hot] / 8 > 0.7 > measured[colo] / 8, measured

        for i in range(10):
            core.create_namespaced_pod(namespace, pod_manifest(f"web-{i}", namespace, cpu="1"))
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementConfiguration",
            "profiles": [{"schedulerName": "kubeplace", "pluginConfig": [
                {"name": "LoadAware", "args": {"thresholds": {"cpu": 0.7}}},
                {"name": "Overcommit", "args": {"headroom": 0.5, "nodeLabel": "overcommit=true",
                                                "loadThreshold": 0.7}}]}]}))
        kubeconfig = str(control_plane.admin_kubeconfig)
        planned = cli("plan", "--kubeconfig", kubeconfig, "-n", namespace, "--config", str(config), "-o", "json",
                      *SOLVER_ARGS)
        assert_exit(planned, 0)
        assert "metrics API not available" not in planned.stderr
        doc = json.loads(planned.stdout)
        placed = [p["node"] for p in doc["placements"]]
        # hot: measured 0.81 > 0.7, nothing. cool: headroom 0.5 of 8 CPUs = 4, 1 requested: 3 more.
        # colo: labelled and measured 0.1 < 0.7: up to 8 CPUs, 1 requested: 7 more.
        assert placed.count(hot) == 0 and placed.count(cool) == 3 and placed.count(colo) == 7, doc
        assert doc["summary"]["verified"] is True
        print(f"\nmeasured CPUs {measured}; plan: {dict((n, placed.count(n)) for n in usage)}")

        bound = cli("bind", "--kubeconfig", kubeconfig, "-n", namespace, "--config", str(config), "--yes", "-o",
                    "json", *SOLVER_ARGS)
        assert_exit(bound, 0)
        assert all(row["outcome"] == "bound" for row in bind_report(bound).values())
        nodes = pod_nodes(core, namespace)
        assert sum(1 for name, n in nodes.items() if name.startswith("web-") and n == hot) == 0
        assert sum(1 for name, n in nodes.items() if name.startswith("web-") and n == colo) == 7
