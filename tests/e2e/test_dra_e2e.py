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
from .test_bind_e2e import (
    OWNER_LABEL,
    SOLVER_ARGS,
    assert_exit,
    bind_report,
    cli,
    create_pods,
    kwok_nodes,
    pod_manifest,
    pod_nodes,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

GROUP, VERSION = "resource.k8s.io", "v1"
FINALIZER = "resource.kubernetes.io/delete-protection"


@contextlib.contextmanager
def published(custom: client.CustomObjectsApi, driver: str, nodes: Sequence[str], gpus: int,
              extended: str = "") -> Iterator[str]:
    """A DeviceClass of ``driver`` (serving the extended resource ``extended`` if given) and a
    ResourceSlice of ``gpus`` devices per node; yields the class."""
    name = driver.replace(".", "-")
    device_class = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass", "metadata": {"name": name},
                    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
                             **({"extendedResourceName": extended} if extended else {})}}
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


def gpu_pod(name: str, namespace: str, template: str = "one-gpu", scheduler: str = "kubeplace",
            side: str = "") -> dict[str, Any]:
    """A pod with a claim from ``template``; with ``side``, confined to the nodes of that side."""
    spec: dict[str, Any] = {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        "containers": [{"name": "app", "image": "registry.invalid/fake:1",
                        "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}}]}
    if side:
        spec["nodeSelector"] = {OWNER_LABEL: namespace, "side": side}
    return pod_manifest(name, namespace, scheduler=scheduler, spec=spec)


def claim_template(namespace: str, name: str, device_class: str, count: int = 1) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": device_class, "count": count}}]}}}}


def driver_of(namespace: str, side: str = "") -> str:
    """A driver name of the test's own (at most 63 bytes)."""
    return f"gpu{side}-{hashlib.sha256(namespace.encode()).hexdigest()[:8]}.example.com"


def test_claims_from_templates_are_allocated_and_the_pods_bound(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """Two nodes of 2 devices, five pods of one GPU each: four are bound, each claim allocated to
    a distinct device of its pod's node and reserved for the pod; the fifth waits, its claim unallocated."""
    core, custom = client.CoreV1Api(admin_api), client.CustomObjectsApi(admin_api)
    driver = driver_of(namespace)
    specs = {"a": {"cpu": "8", "memory": "16Gi"}, "b": {"cpu": "8", "memory": "16Gi"}}
    with kwok_nodes(core, namespace, specs) as nodes, published(custom, driver, nodes, 2) as device_class:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates",
                                               claim_template(namespace, "one-gpu", device_class))
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


def settled(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    """Bound, or found unschedulable by the kube-scheduler."""
    pod = core.read_namespaced_pod(name, namespace)
    return bool(pod.spec.node_name) or any(c.type == "PodScheduled" and c.status == "False"
                                           for c in pod.status.conditions or [])


def allocated_devices(custom: client.CustomObjectsApi, namespace: str) -> dict[str, list[tuple[str, str]]]:
    """Claim -> its allocated (pool, device)s."""
    return {name: [(r["pool"], r["device"]) for r in c["status"]["allocation"]["devices"]["results"]]
            for name, c in claims_of(custom, namespace).items() if "allocation" in (c.get("status") or {})}


@pytest.mark.timeout(180)
def test_side_by_side_with_the_kube_scheduler(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """The same pods on two copies of a cluster (2 nodes of 2 devices each): two 1-device pods
    created first, then a 2-device pod. The kube-scheduler, one pod at a time, allocates for each
    pod as it comes; kubeplace places the batch (the 1-device pods together), so it binds all three,
    at least as many as the kube-scheduler, and every allocation of both is accepted by the API
    server and gives no device twice."""
    core, custom = client.CoreV1Api(admin_api), client.CustomObjectsApi(admin_api)
    specs = {f"{side}{i}": {"cpu": "8", "memory": "16Gi", "labels": {"side": side}}
             for side in ("k", "p") for i in (1, 2)}
    with kwok_nodes(core, namespace, specs) as nodes, \
            published(custom, driver_of(namespace, "k"), nodes[:2], 2) as k_class, \
            published(custom, driver_of(namespace, "p"), nodes[2:], 2) as p_class:
        for side, device_class in (("k", k_class), ("p", p_class)):
            for count in (1, 2):
                custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates",
                                                       claim_template(namespace, f"{side}-{count}", device_class,
                                                                      count))
        shapes = [("one-0", 1), ("one-1", 1), ("two-0", 2)]
        create_pods(core, namespace, [gpu_pod(f"p-{n}", namespace, f"p-{c}", side="p") for n, c in shapes])
        names = [f"p-{n}" for n, _ in shapes]
        cp.wait_for(lambda: all(generated(core, namespace, names).values()), 30, "claims generated")
        result = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--yes", "-n", namespace,
                     "-o", "json", *SOLVER_ARGS)
        assert_exit(result, 0)
        by_kubeplace = {n for n, row in bind_report(result).items() if row["outcome"] == "bound"}

        k_names = [f"k-{n}" for n, _ in shapes]
        with control_plane.start_scheduler():
            for n, c in shapes:  # one at a time, as they come
                create_pods(core, namespace, [gpu_pod(f"k-{n}", namespace, f"k-{c}", "default-scheduler", "k")])
                cp.wait_for(lambda n=n: settled(core, namespace, f"k-{n}"), 60, f"k-{n} bound or unschedulable")
            by_scheduler = {k for k in k_names if pod_nodes(core, namespace).get(k)}
        assert len(by_kubeplace) >= len(by_scheduler), (sorted(by_kubeplace), sorted(by_scheduler))
        assert by_kubeplace == set(names)
        devices = [d for ds in allocated_devices(custom, namespace).values() for d in ds]
        assert len(devices) == len(set(devices)) == 4 + 2 * sum(n.startswith("k-two") for n in by_scheduler) \
            + sum(n.startswith("k-one") for n in by_scheduler)
        print(f"kube-scheduler bound {sorted(by_scheduler)}, kubeplace {sorted(by_kubeplace)}")


def test_a_shared_claim_is_allocated_once_and_reserved_for_each_pod(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """Two pods name one claim: the first binding allocates it; the second pod waits for that
    (as behind the kube-scheduler's in-flight allocation), then is bound beside it and added to
    the claim's reservedFor."""
    core, custom = client.CoreV1Api(admin_api), client.CustomObjectsApi(admin_api)
    specs = {"a": {"cpu": "8", "memory": "16Gi"}, "b": {"cpu": "8", "memory": "16Gi"}}
    with kwok_nodes(core, namespace, specs) as nodes, published(custom, driver_of(namespace, "s"), nodes, 1) as cls:
        claim = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
                 "metadata": {"name": "shared", "namespace": namespace},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}}}
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim)
        pods = []
        for name in ("first", "second"):
            manifest = gpu_pod(name, namespace)
            manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
            pods.append(manifest)
        create_pods(core, namespace, pods[:1])
        create_pods(core, namespace, pods[1:])
        kubeconfig = str(control_plane.admin_kubeconfig)
        first = cli("bind", "--kubeconfig", kubeconfig, "--yes", "-n", namespace, "-o", "json", *SOLVER_ARGS)
        assert_exit(first, 0)
        assert set(bind_report(first)) == {"first"}
        second = cli("bind", "--kubeconfig", kubeconfig, "--yes", "-n", namespace, "-o", "json", *SOLVER_ARGS)
        assert_exit(second, 0)
        assert bind_report(second)["second"]["outcome"] == "bound"
        where = pod_nodes(core, namespace)
        stored = claims_of(custom, namespace)["shared"]["status"]
        (result,) = stored["allocation"]["devices"]["results"]
        assert where["first"] == where["second"] == result["pool"]
        assert sorted(r["name"] for r in stored["reservedFor"]) == ["first", "second"]


def shape(claim: dict[str, Any]) -> tuple[Any, ...]:
    """What an extended resource claim's writer decides, the names of the side aside."""
    metadata = claim["metadata"]
    return (metadata["name"].split("-", 1)[1].rsplit("-", 1)[0], metadata["annotations"],
            [(o["kind"], o["controller"]) for o in metadata["ownerReferences"]], metadata.get("finalizers"),
            [(r["name"], r["exactly"]["allocationMode"], r["exactly"]["count"])
             for r in claim["spec"]["devices"]["requests"]],
            [r["request"] for r in claim["status"]["allocation"]["devices"]["results"]],
            [r["resource"] for r in claim["status"]["reservedFor"]])


def extended_pod(name: str, namespace: str, resource: str, count: int, scheduler: str = "kubeplace",
                 side: str = "") -> dict[str, Any]:
    """A pod requesting ``count`` of the extended resource (no claim of its own)."""
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "registry.invalid/fake:1", "resources": {
        "requests": {"cpu": "100m", resource: str(count)}, "limits": {resource: str(count)}}}]}
    if side:
        spec["nodeSelector"] = {OWNER_LABEL: namespace, "side": side}
    return pod_manifest(name, namespace, scheduler=scheduler, spec=spec)


@pytest.mark.timeout(180)
def test_extended_resources_served_by_dra_side_by_side_with_the_kube_scheduler(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """A DeviceClass with extendedResourceName, slices of 2 devices on each of two nodes per side, no
    device plugin: two pods asking for 1 of the resource, then one asking for 2. kubeplace binds all
    three, each with the extended resource claim the kube-scheduler would create (generated name,
    the pod its controller, the annotation, allocated and reserved for the pod) and the pod's
    status.extendedResourceClaimStatus naming it; the kube-scheduler, one pod at a time, binds at
    most as many. No device is given twice."""
    core, custom = client.CoreV1Api(admin_api), client.CustomObjectsApi(admin_api)
    suffix = hashlib.sha256(namespace.encode()).hexdigest()[:8]
    resources = {side: f"example.com/gpu-{side}-{suffix}" for side in ("k", "p")}
    specs = {f"{side}{i}": {"cpu": "8", "memory": "16Gi", "labels": {"side": side}}
             for side in ("k", "p") for i in (1, 2)}
    with kwok_nodes(core, namespace, specs) as nodes, \
            published(custom, driver_of(namespace, "xk"), nodes[:2], 2, resources["k"]), \
            published(custom, driver_of(namespace, "xp"), nodes[2:], 2, resources["p"]):
        shapes = [("one-0", 1), ("one-1", 1), ("two-0", 2)]
        create_pods(core, namespace, [extended_pod(f"p-{n}", namespace, resources["p"], c, side="p")
                                      for n, c in shapes])
        names = [f"p-{n}" for n, _ in shapes]
        dry = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--yes", "-n", namespace,
                  "--dry-run=server", "-o", "json", *SOLVER_ARGS)
        assert_exit(dry, 0)
        assert claims_of(custom, namespace) == {}
        result = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--yes", "-n", namespace,
                     "-o", "json", *SOLVER_ARGS)
        assert_exit(result, 0)
        by_kubeplace = {n for n, row in bind_report(result).items() if row["outcome"] == "bound"}
        assert by_kubeplace == set(names)
        where = pod_nodes(core, namespace)
        claims = claims_of(custom, namespace)
        for name, count in ((f"p-{n}", c) for n, c in shapes):
            pod = core.read_namespaced_pod(name, namespace)
            status = pod.status.extended_resource_claim_status
            claim = claims[status.resource_claim_name]
            assert claim["metadata"]["name"].startswith(f"{name}-extended-resources-")
            assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
            (owner,) = claim["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Pod", name, pod.metadata.uid,
                                                                                         True)
            results = claim["status"]["allocation"]["devices"]["results"]
            assert len(results) == count and {r["pool"] for r in results} == {where[name]}
            assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": name, "uid": pod.metadata.uid}]
            assert [(m.container_name, m.resource_name, m.request_name) for m in status.request_mappings] == [
                ("app", resources["p"], results[0]["request"])]

        k_names = [f"k-{n}" for n, _ in shapes]
        with control_plane.start_scheduler():
            for n, c in shapes:  # one at a time, as they come
                create_pods(core, namespace, [extended_pod(f"k-{n}", namespace, resources["k"], c,
                                                           "default-scheduler", "k")])
                cp.wait_for(lambda n=n: settled(core, namespace, f"k-{n}"), 60, f"k-{n} bound or unschedulable")
            by_scheduler = {k for k in k_names if pod_nodes(core, namespace).get(k)}
        assert len(by_kubeplace) >= len(by_scheduler), (sorted(by_kubeplace), sorted(by_scheduler))
        claims = claims_of(custom, namespace)
        for name in by_scheduler:  # the kube-scheduler's writes have the shape of kubeplace's
            theirs, ours = (claims[core.read_namespaced_pod(n, namespace).status.extended_resource_claim_status
                                   .resource_claim_name] for n in (name, "p" + name[1:]))
            assert shape(theirs) == shape(ours), (theirs, ours)
        devices = [d for ds in allocated_devices(custom, namespace).values() for d in ds]
        assert len(devices) == len(set(devices))
        print(f"extended resources: kube-scheduler bound {sorted(by_scheduler)}, kubeplace {sorted(by_kubeplace)}")


def test_serve_binds_the_healthy_pods_while_one_claims_selector_fails_at_run_time(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """A ResourceClaim whose selector divides by zero (the API server accepts it: the error is
    only at run time): `kubeplace serve` binds the pods of healthy claims and a pod without
    claims, and the pod of the broken claim gets a FailedScheduling Event with the
    kube-scheduler's words instead of the cycle failing for everyone."""
    from tests.device_builders import FILTER_ERROR

    from .test_serve_e2e import events, running, service

    core, custom = client.CoreV1Api(admin_api), client.CustomObjectsApi(admin_api)
    driver = driver_of(namespace, "z")
    with kwok_nodes(core, namespace, {"a": {"cpu": "8", "memory": "16Gi"}}) as nodes, \
            published(custom, driver, nodes, 2) as device_class:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates",
                                               claim_template(namespace, "one-gpu", device_class))
        poisoned = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
                    "metadata": {"name": "poisoned", "namespace": namespace},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                        "deviceClassName": device_class,
                        "selectors": [{"cel": {"expression": f'device.attributes["{driver}"].index / 0 == 1'}}]}}]}}}
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", poisoned)
        victim = gpu_pod("victim", namespace)
        victim["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "poisoned"}]
        healthy = ["train-0", "train-1"]
        create_pods(core, namespace, [victim, *(gpu_pod(n, namespace) for n in healthy),
                                      pod_manifest("plain", namespace, cpu="100m")])
        cp.wait_for(lambda: all(generated(core, namespace, healthy).values()), 30, "claims generated")
        s = service(str(control_plane.admin_kubeconfig), namespace, "solo")
        with running(s):
            cp.wait_for(lambda: all(pod_nodes(core, namespace)[n] for n in [*healthy, "plain"]), 30,
                        "the healthy pods bound")
            cp.wait_for(lambda: "victim" in events(core, namespace, "FailedScheduling"), 30,
                        "a FailedScheduling event for the victim")
        assert pod_nodes(core, namespace)["victim"] == ""
        assert events(core, namespace, "FailedScheduling")["victim"] == (
            f"{FILTER_ERROR}claim {namespace}/poisoned: selector #0: CEL runtime error: division by zero")
        assert "allocation" not in (claims_of(custom, namespace)["poisoned"].get("status") or {})
