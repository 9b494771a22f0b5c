"""Dynamic resource claims on the real control plane: a DeviceClass and ResourceSlices published by
the test as a DRA driver would (kwok nodes run no driver), pods whose claims the controller
manager's resourceclaim controller generates from a template, and `kubeplace bind`, which
allocates the claims (status.allocation, reservedFor, the finalizer) before binding the pods.
The API server accepts every allocation; the devices are distinct and on the pods' nodes."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import controlplane as cp
from .test_bind_e2e import SOLVER_ARGS, assert_exit, bind_report, cli, create_pods, kwok_nodes, pod_manifest, pod_nodes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

GROUP, VERSION = "resource.k8s.io", "v1"
FINALIZER = "resource.kubernetes.io/delete-protection"


@contextlib.contextmanager
def published(custom: client.CustomObjectsApi, driver: str, nodes: Sequence[str], gpus: int) -> Iterator[str]:
    """A DeviceClass of ``driver`` and a ResourceSlice of ``gpus`` devices per node; yields the class."""
    name = driver.replace(".", "-")
    device_class = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass", "metadata": {"name": name},
                    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}
    slices = [{"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{name}"},
               "spec": {"driver": driver, "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}},
                                     "capacity": {"memory": {"value": "40Gi"}}} for i in range(gpus)]}}
              for node in nodes]
    try:
        custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", device_class)
        for item in slices:
            custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", item)
        yield name
    finally:
        for item in slices:
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(GROUP, VERSION, "resourceslices", item["metadata"]["name"])
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object(GROUP, VERSION, "deviceclasses", name)


def claims_of(custom: client.CustomObjectsApi, namespace: str) -> dict[str, dict[str, Any]]:
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims")
    return {c["metadata"]["name"]: c for c in listed["items"]}


def generated(core: client.CoreV1Api, namespace: str, names: Sequence[str]) -> dict[str, str]:
    """Pod -> the claim the resourceclaim controller generated for it ("" while not yet)."""
    out = {}
    for name in names:
        statuses = core.read_namespaced_pod(name, namespace).status.resource_claim_statuses or []
        out[name] = next((s.resource_claim_name or "" for s in statuses), "")
    return out


def gpu_pod(name: str, namespace: str) -> dict[str, Any]:
    return pod_manifest(name, namespace, spec={
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "containers": [{"name": "app", "image": "registry.invalid/fake:1",
                        "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}}]})


def test_claims_from_templates_are_allocated_and_the_pods_bound(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """Two nodes of 2 devices, five pods of one GPU each: four are bound, each claim allocated to
    a distinct device of its pod's node and reserved for the pod; the fifth waits, its claim unallocated."""
    core, custom = client.CoreV1Api(admin_api), client.CustomObjectsApi(admin_api)
    driver = f"gpu-{hashlib.sha256(namespace.encode()).hexdigest()[:8]}.example.com"  # at most 63 bytes
    specs = {"a": {"cpu": "8", "memory": "16Gi"}, "b": {"cpu": "8", "memory": "16Gi"}}
    with kwok_nodes(core, namespace, specs) as nodes, published(custom, driver, nodes, 2) as device_class:
        template = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate",
                    "metadata": {"name": "one-gpu", "namespace": namespace},
                    "spec": {"spec": {"devices": {"requests": [
                        {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}}
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", template)
        names = [f"train-{i}" for i in range(5)]
        create_pods(core, namespace, [gpu_pod(n, namespace) for n in names])
        cp.wait_for(lambda: all(generated(core, namespace, names).values()), 30, "claims generated")

        dry = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--yes", "-n", namespace,
                  "--dry-run=server", "-o", "json", *SOLVER_ARGS)
        assert_exit(dry, 0)
        assert sum(r["outcome"] == "bound" for r in bind_report(dry).values()) == 4
        assert not any("allocation" in (c.get("status") or {}) for c in claims_of(custom, namespace).values())
        assert set(pod_nodes(core, namespace).values()) == {""}

        result = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--yes", "-n", namespace,
                     "-o", "json", *SOLVER_ARGS)

        assert_exit(result, 0)
        report = bind_report(result)
        bound = {name for name, row in report.items() if row["outcome"] == "bound"}
        assert len(bound) == 4
        where = pod_nodes(core, namespace)
        claim_of = generated(core, namespace, names)
        claims = claims_of(custom, namespace)
        devices = []
        uids = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(namespace).items}
        for name in bound:
            claim = claims[claim_of[name]]
            results = claim["status"]["allocation"]["devices"]["results"]
            assert [(r["driver"], r["pool"]) for r in results] == [(driver, where[name])]
            assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": name, "uid": uids[name]}]
            assert FINALIZER in claim["metadata"]["finalizers"]
            devices.append((results[0]["pool"], results[0]["device"]))
        assert len(set(devices)) == 4
        (waiting,) = set(names) - bound
        assert where[waiting] == "" and "allocation" not in (claims[claim_of[waiting]].get("status") or {})
