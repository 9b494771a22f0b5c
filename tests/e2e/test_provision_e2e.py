"""``kubeplace plan --provision`` against a real API server with Karpenter's CRDs installed: the
NodePool, the DaemonSet and the pending pods are read live, and the plan buys the node the
catalogue's prices and the DaemonSet's overhead call the cheapest."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubeplace.cli.main import main

from . import controlplane as cp
from .test_karpenter_e2e import CATALOGUE, KARPENTER, karpenter_build, karpenter_crds  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_plan_provision_reads_node_pools_and_daemon_sets_live(
        control_plane: cp.ControlPlane, admin_api: client.ApiClient, karpenter_crds: None,  # noqa: F811
        namespace: str, tmp_path: Path) -> None:
    """Three 1500m pods and a DaemonSet of 500m on the NodePool's nodes: a 2-CPU node keeps 1400m,
    so one 8-CPU node (0.32/h) holds the three."""
    custom = client.CustomObjectsApi(admin_api)
    pool = f"e2e-{namespace[-6:]}"
    daemon: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"nodeSelector": {"e2e-pool": pool}, "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "500m"}}}]}}}}
    node_pool: dict[str, Any] = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": pool},
        "spec": {"template": {"metadata": {"labels": {"e2e-pool": pool}}, "spec": {
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}}}}
    catalogue = tmp_path / "instance_types.json"
    catalogue.write_text(json.dumps(CATALOGUE))
    with contextlib.ExitStack() as cleanup:
        client.AppsV1Api(admin_api).create_namespaced_daemon_set(namespace, daemon)
        custom.create_cluster_custom_object(*KARPENTER, "nodepools", node_pool)
        cleanup.callback(_delete_quietly, lambda: custom.delete_cluster_custom_object(*KARPENTER, "nodepools", pool))
        core = client.CoreV1Api(admin_api)
        for i in range(3):
            core.create_namespaced_pod(namespace, {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{i}"},
                "spec": {"schedulerName": "kubeplace", "nodeSelector": {"e2e-pool": pool}, "containers": [
                    {"name": "c", "image": "registry.k8s.io/pause:3.10",
                     "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}})
        result = CliRunner().invoke(main, ["plan", "--kubeconfig", str(control_plane.admin_kubeconfig),
                                           "-n", namespace, "--provision", "--catalogue", str(catalogue),
                                           "--time-limit", "5", "-o", "json"])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        mine = [n for n in doc["provision"] if n["nodePool"] == pool]
        assert [(n["node"], n["instanceType"], n["pricePerHour"], sorted(n["pods"])) for n in mine] == [
            (f"{pool}-1", "c-8x-amd64-linux", 0.32, [f"{namespace}/web-{i}" for i in range(3)])]
        assert {p["node"] for p in doc["placements"] if p["namespace"] == namespace} == {f"{pool}-1"}


def _delete_quietly(delete: Any) -> None:
    try:
        delete()
    except ApiException as exc:
        if exc.status != 404:
            raise
