"""Manifests of ``resource.k8s.io/v1`` objects for tests, written as the API server returns them,
and pods that use resource claims::

    device_class("gpu", 'device.driver == "gpu.example.com"')
    gpu_slice("n1", gpus=4, nvlink=["a", "a", "b", "b"])          # node-local devices gpu-0..3
    resource_claim("train", requests=[request("gpu", count=2)])   # unallocated
    claiming(pod("p").cpu("1"), claim="train")                     # spec.resourceClaims
    claiming(pod("q"), template="one-gpu", generated="q-gpu-abc")  # generated from a template
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.builders import PodBuilder

Manifest = dict[str, Any]
DRIVER = "gpu.example.com"
API = "resource.k8s.io/v1"
FILTER_ERROR = 'running "DynamicResources" filter plugin: '
"""How the kube-scheduler begins the reason of a pod whose claim's selector fails at run time."""


def device_class(name: str = "gpu", *selectors: str, extended: str = "") -> Manifest:
    spec: Manifest = {"selectors": [{"cel": {"expression": e}} for e in selectors or (f'device.driver == "{DRIVER}"',)]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def device(name: str, *, attributes: dict[str, Any] | None = None, capacity: dict[str, str] | None = None,
           consumes: dict[str, dict[str, str]] | None = None, taint: bool = False) -> Manifest:
    """A device; attribute values are typed by their Python type (str, int, bool)."""
    kinds = {bool: "bool", int: "int", str: "string"}
    out: Manifest = {"name": name, "attributes": {k: {kinds[type(v)]: v} for k, v in (attributes or {}).items()},
                     "capacity": {k: {"value": v} for k, v in (capacity or {}).items()}}
    if consumes:
        out["consumesCounters"] = [{"counterSet": s, "counters": {k: {"value": v} for k, v in c.items()}}
                                   for s, c in consumes.items()]
    if taint:
        out["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    return out


def resource_slice(name: str, devices: Sequence[Manifest], *, node: str = "", pool: str = "", all_nodes: bool = False,
                   node_selector: Manifest | None = None, counters: dict[str, dict[str, str]] | None = None,
                   generation: int = 1, driver: str = DRIVER) -> Manifest:
    spec: Manifest = {"driver": driver, "pool": {"name": pool or node or name, "generation": generation,
                                                 "resourceSliceCount": 1}, "devices": list(devices)}
    if node:
        spec["nodeName"] = node
    if all_nodes:
        spec["allNodes"] = True
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if counters:
        spec["sharedCounters"] = [{"name": s, "counters": {k: {"value": v} for k, v in c.items()}}
                                  for s, c in counters.items()]
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def gpu_slice(node: str, gpus: int = 4, *, nvlink: Sequence[str] = (), model: str = "A100",
              memory: str = "40Gi") -> Manifest:
    """``gpus`` node-local devices gpu-0.. of the driver, with model, index and (if given) an
    NVLink domain attribute each, and memory capacity."""
    devices = []
    for i in range(gpus):
        attributes: dict[str, Any] = {"model": model, "index": i}
        if nvlink:
            attributes["nvlink"] = nvlink[i]
        devices.append(device(f"gpu-{i}", attributes=attributes, capacity={"memory": memory}))
    return resource_slice(f"{node}-gpus", devices, node=node)


def request(name: str = "gpu", device_class: str = "gpu", *, count: int = 1, all_devices: bool = False,
            selectors: Sequence[str] = (), first_available: Sequence[Manifest] = ()) -> Manifest:
    if first_available:
        return {"name": name, "firstAvailable": list(first_available)}
    exactly: Manifest = {"deviceClassName": device_class, "allocationMode": "All" if all_devices else "ExactCount"}
    if not all_devices:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def sub_request(name: str, device_class: str = "gpu", *, count: int = 1, selectors: Sequence[str] = ()) -> Manifest:
    out: Manifest = {"name": name, "deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return out


def resource_claim(name: str, *, ns: str = "default", requests: Sequence[Manifest] = (),
                   constraints: Sequence[Manifest] = (), allocated: tuple[str, Sequence[tuple[str, str]]] | None = None,
                   reserved_for: Sequence[str] = (), owner_uid: str = "", deleting: bool = False) -> Manifest:
    """A claim; ``allocated`` = (node, [(request, device)]) makes it allocated there (node-local
    devices of the driver, pool named after the node)."""
    metadata: Manifest = {"name": name, "namespace": ns, "uid": f"uid-claim-{ns}-{name}", "resourceVersion": "1"}
    if owner_uid:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid,
                                        "controller": True}]
    if deleting:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    status: Manifest = {}
    if allocated is not None:
        node, results = allocated
        status["allocation"] = {
            "devices": {"results": [{"request": r, "driver": DRIVER, "pool": node, "device": d} for r, d in results]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": uid, "uid": uid} for uid in reserved_for]
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": metadata,
            "spec": {"devices": {"requests": list(requests or [request()]), "constraints": list(constraints)}},
            "status": status}


def claim_template(name: str, *, ns: str = "default", requests: Sequence[Manifest] = ()) -> Manifest:
    return {"apiVersion": API, "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": ns},
            "spec": {"spec": {"devices": {"requests": list(requests or [request()])}}}}


def claiming(builder: PodBuilder, *, claim: str = "", template: str = "", generated: str | None = None,
             entry: str = "gpu") -> PodBuilder:
    """The pod with one ``spec.resourceClaims`` entry; a template entry's generated claim name
    goes in ``status.resourceClaimStatuses`` when given."""
    ref = {"name": entry, **({"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template})}
    builder.spec("resourceClaims", [ref])
    if generated is not None:
        builder.status("resourceClaimStatuses", [{"name": entry, "resourceClaimName": generated}])
    return builder
