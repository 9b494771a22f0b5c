"""Smoke tests of the e2e control plane itself: version, kwok nodes and pods, auth."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import controlplane as cp

pytestmark = pytest.mark.e2e


@pytest.fixture
def fake_node(admin_api: client.ApiClient) -> Iterator[str]:
    """A kwok-managed node, deleted after the test."""
    core = client.CoreV1Api(admin_api)
    name = f"kwok-{secrets.token_hex(3)}"
    core.create_node(cp.fake_node_manifest(name))
    try:
        yield name
    finally:
        core.delete_node(name)


def _pod_manifest(name: str, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "app", "image": "registry.invalid/fake:1"}],
            "tolerations": [cp.KWOK_TOLERATION],
            "nodeSelector": node_selector or {},
        },
    }


def _node_ready(core: client.CoreV1Api, name: str) -> bool:
    conditions = core.read_node(name).status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _pod_phase(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    phase: str | None = core.read_namespaced_pod(name, namespace).status.phase
    return phase


def test_version_is_the_pinned_release(admin_api: client.ApiClient) -> None:
    info = client.VersionApi(admin_api).get_code()
    assert info.git_version == cp.pinned_kube_version() == "v1.36.3"
    assert (info.major, info.minor) == ("1", "36")


def test_kwok_node_becomes_ready(admin_api: client.ApiClient, fake_node: str) -> None:
    core = client.CoreV1Api(admin_api)
    cp.wait_for(lambda: _node_ready(core, fake_node), 30, f"node {fake_node} Ready")
    assert core.read_node(fake_node).status.allocatable["cpu"] == "32"


def test_bound_pod_runs(admin_api: client.ApiClient, namespace: str, fake_node: str) -> None:
    core = client.CoreV1Api(admin_api)
    core.create_namespaced_pod(namespace, _pod_manifest("bound"))
    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name="bound"),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=fake_node),
    )
    # The generated client can't deserialize the Status a binding returns, hence no preload.
    response = core.create_namespaced_binding(namespace, binding, _preload_content=False)
    assert response.status == 201
    cp.wait_for(lambda: _pod_phase(core, namespace, "bound") == "Running", 60, "pod bound to Running")
    assert core.read_namespaced_pod("bound", namespace).spec.node_name == fake_node


def test_kubeplace_cannot_delete_pods_without_rbac(
    admin_api: client.ApiClient, kubeplace_api: client.ApiClient, namespace: str
) -> None:
    client.CoreV1Api(admin_api).create_namespaced_pod(namespace, _pod_manifest("victim"))
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(kubeplace_api).delete_namespaced_pod("victim", namespace)
    assert refused.value.status == 403
    assert cp.KUBEPLACE_USER in str(refused.value.body)
    victim = client.CoreV1Api(admin_api).read_namespaced_pod("victim", namespace)
    assert victim.metadata.deletion_timestamp is None


def test_scheduler_starts_on_demand(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str, fake_node: str
) -> None:
    core = client.CoreV1Api(admin_api)
    cp.wait_for(lambda: _node_ready(core, fake_node), 30, f"node {fake_node} Ready")
    pod = _pod_manifest("scheduled", {"kubernetes.io/hostname": fake_node})
    with control_plane.start_scheduler() as scheduler:
        core.create_namespaced_pod(namespace, pod)
        cp.wait_for(lambda: _pod_phase(core, namespace, "scheduled") == "Running", 60, "scheduled pod")
    assert not scheduler.alive()
