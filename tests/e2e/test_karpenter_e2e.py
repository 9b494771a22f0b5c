"""The real Karpenter (its kwok cloud provider, built by .ci/build-karpenter from the module pinned in
tools/karpenter) runs against the test control plane: given a NodePool and a pod no node can host,
it launches a NodeClaim and a kwok node of the cheapest instance type that fits, which the
kube-scheduler then binds the pod to. What kubeplace's capacity planning will be compared with."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubeplace.kube.capacity import NodeTemplate, candidate_nodes
from kubeplace.kube.catalogue import parse_catalogue
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.parse import build_snapshot
from kubeplace.kube.quantity import resource_amount

from . import controlplane as cp
from .crds import install_crds

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]  # a cold build (KUBEPLACE_BUILD_KARPENTER=1) included

BUILD_SCRIPT = cp.REPO_ROOT / ".ci" / "build-karpenter"
KARPENTER, KWOK_GROUP = ("karpenter.sh", "v1"), ("karpenter.kwok.sh", "v1alpha1")
ZONE = "test-zone-a"


def offering(price: float) -> dict[str, Any]:
    return {"Price": price, "Available": True, "Requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]}]}


CATALOGUE = [  # the kwok provider's format, as kubeplace reads it too (kube.catalogue)
    {"name": "c-2x-amd64-linux", "offerings": [offering(0.08)], "architecture": "amd64",
     "operatingSystems": ["linux"], "resources": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
    {"name": "c-8x-amd64-linux", "offerings": [offering(0.32)], "architecture": "amd64",
     "operatingSystems": ["linux"], "resources": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
]


@pytest.fixture(scope="module")
def karpenter_build() -> Path:
    """The cached build's directory (bin/karpenter-kwok, crds/). A cold build takes minutes, so it
    is made here only when KUBEPLACE_BUILD_KARPENTER=1; otherwise the test skips until
    ``bash .ci/build-karpenter`` has been run once."""
    if shutil.which(os.environ.get("GO", "go")) is None:
        pytest.skip("Go is not on PATH: Karpenter cannot be built")
    build = os.environ.get("KUBEPLACE_BUILD_KARPENTER") == "1"
    result = subprocess.run(["bash", str(BUILD_SCRIPT), *([] if build else ["--cached-only"])], capture_output=True,
                            text=True, timeout=cp.BUILD_TIMEOUT_S, check=False)
    if result.returncode == 3 and not build:
        pytest.skip(f"Karpenter is not built: run bash {BUILD_SCRIPT} (or set KUBEPLACE_BUILD_KARPENTER=1)")
    if result.returncode != 0:
        pytest.fail(f"{BUILD_SCRIPT} failed: {result.stderr.strip()[-2000:]}", pytrace=False)
    return Path(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def karpenter_crds(karpenter_build: Path, admin_api: client.ApiClient) -> None:
    """NodePool, NodeClaim, NodeOverlay and KWOKNodeClass installed and established."""
    install_crds(admin_api, [yaml.safe_load(p.read_text()) for p in sorted((karpenter_build / "crds").glob("*.yaml"))])


@pytest.fixture
def karpenter(control_plane: cp.ControlPlane, karpenter_build: Path, karpenter_crds: None,
              tmp_path: Path) -> Iterator[cp.Component]:
    """Karpenter's kwok controller against the test control plane, with the small catalogue."""
    catalogue = tmp_path / "instance_types.json"
    catalogue.write_text(json.dumps(CATALOGUE))
    health = cp.free_port()
    env = {"KUBECONFIG": str(control_plane.admin_kubeconfig), "INSTANCE_TYPES_FILE_PATH": str(catalogue),
           "DISABLE_LEADER_ELECTION": "true", "METRICS_PORT": str(cp.free_port()), "HEALTH_PROBE_PORT": str(health),
           "BATCH_IDLE_DURATION": "1s", "BATCH_MAX_DURATION": "3s", "LOG_LEVEL": "debug"}
    component = control_plane.launch("karpenter", [str(karpenter_build / "bin" / "karpenter-kwok")], env)
    with component:
        cp.wait_ready(component, lambda: cp.http_ok(f"http://127.0.0.1:{health}/readyz"), 120)
        yield component


@pytest.mark.parametrize("daemon_cpu", ["", "500m"], ids=["no-daemonset", "daemonset-500m"])
def test_karpenter_launches_the_node_kubeplace_computes_as_the_cheapest_that_fits(
        control_plane: cp.ControlPlane, admin_api: client.ApiClient, karpenter: cp.Component, namespace: str,
        daemon_cpu: str) -> None:
    """A 1500m pod fits the 2-CPU type (1900m allocatable) unless a DaemonSet of 500m runs on the
    NodePool's nodes; kubeplace's candidate nodes say which type is the cheapest that fits, and
    Karpenter launches that one, with the allocatable kubeplace computes."""
    custom, core = client.CustomObjectsApi(admin_api), client.CoreV1Api(admin_api)
    pool = f"e2e-{namespace[-6:]}"
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": namespace},
           "spec": {"nodeSelector": {"e2e-pool": pool},
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}}
    daemon: dict[str, Any] = {
              "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": namespace},
              "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
                  "metadata": {"labels": {"app": "agent"}},
                  "spec": {"nodeSelector": {"e2e-pool": pool}, "containers": [
                      {"name": "c", "image": "registry.k8s.io/pause:3.10",
                       "resources": {"requests": {"cpu": daemon_cpu or "1m"}}}]}}}}
    node_pool: dict[str, Any] = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": pool},
                 "spec": {"template": {"metadata": {"labels": {"e2e-pool": pool}}, "spec": {
                     "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                     "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}},
                     "limits": {"cpu": "16"}}}
    expected = _cheapest_fitting(node_pool, pod, [daemon] if daemon_cpu else [])
    assert expected.instance_type.name == ("c-8x-amd64-linux" if daemon_cpu else "c-2x-amd64-linux")
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(_delete_launched, custom, core, pool)
        _create_cluster_object(custom, KWOK_GROUP, "kwoknodeclasses", {
            "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}})
        if daemon_cpu:
            client.AppsV1Api(admin_api).create_namespaced_daemon_set(namespace, daemon)
        custom.create_cluster_custom_object(*KARPENTER, "nodepools", node_pool)
        cleanup.callback(_delete_quietly, lambda: custom.delete_cluster_custom_object(*KARPENTER, "nodepools", pool))
        with control_plane.start_scheduler():
            core.create_namespaced_pod(namespace, pod)
            claims = _wait_for_list(lambda: _claims(custom, pool), 120, f"a NodeClaim of NodePool {pool}",
                                    karpenter)
            nodes = _wait_for_list(lambda: core.list_node(label_selector=f"karpenter.sh/nodepool={pool}").items,
                                   120, f"a node of NodePool {pool}", karpenter)
            # a live snapshot reads the NodePool, its NodeClaim and the DaemonSet as files would give them
            live = load_live_snapshot(connect(str(control_plane.admin_kubeconfig)), scheduler_name="default-scheduler")
            assert pool in {p.name for p in live.node_pools}
            assert claims[0]["metadata"]["name"] in {c.name for c in live.node_claims}
            assert (f"{namespace}/agent" in {p.key for p in live.daemon_pods}) == bool(daemon_cpu)
            labels = nodes[0].metadata.labels
            assert labels["node.kubernetes.io/instance-type"] == expected.instance_type.name and len(claims) == 1
            for key in ("topology.kubernetes.io/zone", "karpenter.sh/capacity-type", "karpenter.sh/nodepool",
                        "kubernetes.io/arch", "kubernetes.io/os", "e2e-pool"):
                assert labels[key] == expected.node.labels[key], key
            # the allocatable Karpenter registered its node with is the instance type's kubeplace computes
            registered = nodes[0].status.allocatable
            allocatable = expected.instance_type.allocatable()
            assert {r: resource_amount(r, registered[r]) for r in allocatable} == allocatable
            cp.wait_for(lambda: _node_of(core, namespace, "web") == nodes[0].metadata.name, 120,
                        "the pod bound to Karpenter's node")


def _cheapest_fitting(node_pool: dict[str, Any], pod: dict[str, Any], daemons: list[dict[str, Any]]) -> NodeTemplate:
    """kubeplace's answer from the same objects: the cheapest candidate whose allocatable, net of
    overhead and DaemonSet pods, holds the pod's requests."""
    snapshot = build_snapshot([(obj, "e2e") for obj in (node_pool, pod, *daemons)], scheduler_name="default-scheduler")
    catalogue = parse_catalogue(CATALOGUE, "catalogue")
    (wanted,) = snapshot.pending
    fitting = [c for c in candidate_nodes(snapshot.node_pools, catalogue, snapshot.daemon_pods)
               if all(c.node.allocatable.get(r, 0) >= amount for r, amount in wanted.requests.items())]
    return min(fitting, key=lambda c: c.offering.price)


def _node_of(core: client.CoreV1Api, namespace: str, name: str) -> str:
    spec = core.read_namespaced_pod(name, namespace).spec
    return (spec.node_name or "") if spec is not None else ""


def _claims(custom: client.CustomObjectsApi, pool: str) -> list[Any]:
    found = custom.list_cluster_custom_object(*KARPENTER, "nodeclaims", label_selector=f"karpenter.sh/nodepool={pool}")
    items: list[Any] = found["items"]  # type: ignore[index]
    return items


def _wait_for_list(read: Any, timeout: float, what: str, karpenter: cp.Component) -> list[Any]:
    found: list[Any] = []

    def ready() -> bool:
        found[:] = read()
        return bool(found)

    try:
        cp.wait_for(ready, timeout, what)
    except Exception as error:
        raise AssertionError(f"{error}; Karpenter's log ends with:\n{karpenter.log_tail()}") from None
    return found


def _create_cluster_object(custom: client.CustomObjectsApi, group: tuple[str, str], plural: str,
                           body: dict[str, Any]) -> None:
    try:
        custom.create_cluster_custom_object(*group, plural, body)
    except ApiException as exc:
        if exc.status != 409:
            raise


def _delete_quietly(delete: Any) -> None:
    with contextlib.suppress(ApiException):
        delete()


def _delete_launched(custom: client.CustomObjectsApi, core: client.CoreV1Api, pool: str) -> None:
    """Leave no node of the test's NodePool behind: Karpenter's finalizers are dropped if it could
    not remove them (the control plane is shared by the session's tests)."""
    deadline = time.monotonic() + 60
    while _claims(custom, pool) and time.monotonic() < deadline:
        time.sleep(1)
    for claim in _claims(custom, pool):
        name = claim["metadata"]["name"]
        _delete_quietly(lambda name=name: custom.patch_cluster_custom_object(
            *KARPENTER, "nodeclaims", name, {"metadata": {"finalizers": None}}))
        _delete_quietly(lambda name=name: custom.delete_cluster_custom_object(*KARPENTER, "nodeclaims", name))
    for node in core.list_node(label_selector=f"karpenter.sh/nodepool={pool}").items:
        name = node.metadata.name if node.metadata is not None else ""
        _delete_quietly(lambda name=name: core.patch_node(name, {"metadata": {"finalizers": None}}))
        _delete_quietly(lambda name=name: core.delete_node(name))
