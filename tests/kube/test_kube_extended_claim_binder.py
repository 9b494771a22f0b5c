"""A pod's extended resource claim (extended resources served by DRA) written before the pod is
bound, as the kube-scheduler's PreBind does: created, allocated and reserved, the pod's
``status.extendedResourceClaimStatus`` patched; deleted again when a later write fails."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubeplace.kube.binder import Outcome
from kubeplace.kube.claim_binder import allocate_claims
from kubeplace.kube.dra import (
    DELETE_PROTECTION,
    EXTENDED_CLAIM,
    Allocation,
    ClaimAllocation,
    DeviceId,
    DeviceRequest,
    DeviceResult,
    RequestMapping,
)
from kubeplace.kube.errors import Conflict
from tests.device_builders import DRIVER
from tests.kube.test_kube_claim_binder import FakeClaims, binding

Raw = dict[str, Any]


class FakeApi(FakeClaims):
    def __init__(self) -> None:
        super().__init__()
        self.pod_status: list[tuple[str, Raw, bool]] = []
        self.deleted: list[str] = []
        self.fail_pod: Exception | None = None

    def create_resource_claim(self, claim: Mapping[str, Any], dry_run: bool = False) -> Raw:
        obj = copy.deepcopy(dict(claim))
        obj["metadata"]["name"] = obj["metadata"].pop("generateName") + "x7k2q"
        obj["metadata"]["resourceVersion"] = "1"
        obj["metadata"]["uid"] = "uid-created"
        self.writes.append((obj["metadata"]["name"], "create", dry_run))
        if not dry_run:
            self.claims[obj["metadata"]["name"]] = obj
        return copy.deepcopy(obj)

    def delete_resource_claim(self, namespace: str, name: str) -> None:
        self.deleted.append(name)
        del self.claims[name]

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any], dry_run: bool = False) -> None:
        if self.fail_pod is not None:
            raise self.fail_pod
        self.pod_status.append((name, dict(status), dry_run))


def extended() -> ClaimAllocation:
    return ClaimAllocation(EXTENDED_CLAIM, Allocation((DeviceResult("container-0-request-1",
                                                                     DeviceId(DRIVER, "n1", "gpu-0")),)),
                           (DeviceRequest("container-0-request-1", "gpu", count=1),),
                           (RequestMapping("main", "nvidia.com/gpu", "container-0-request-1"),))


def test_created_allocated_reserved_and_the_pod_status_patched() -> None:
    api = FakeApi()
    ready, failed = allocate_claims(api, [binding("p")], {"default/p": [extended()]}, dry_run=False)
    assert [b.name for b in ready] == ["p"] and failed == []
    name = "p-extended-resources-x7k2q"
    assert api.writes == [(name, "create", False), (name, "claim", False), (name, "status", False)]
    stored = api.claims[name]
    assert stored["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert stored["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p",
                                                      "controller": True}]
    assert stored["metadata"]["finalizers"] == [DELETE_PROTECTION]
    assert stored["spec"]["devices"]["requests"] == [{"name": "container-0-request-1", "exactly": {
        "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]
    assert stored["status"]["allocation"]["devices"]["results"] == [
        {"request": "container-0-request-1", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]
    assert stored["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert api.pod_status == [("p", {"extendedResourceClaimStatus": {
        "requestMappings": [{"containerName": "main", "resourceName": "nvidia.com/gpu",
                             "requestName": "container-0-request-1"}],
        "resourceClaimName": name}}, False)]


def test_a_failed_pod_status_patch_deletes_the_claim_and_fails_that_pod_only() -> None:
    api = FakeApi()
    api.fail_pod = Conflict("patch pod default/p status: conflict", status=409)
    ready, failed = allocate_claims(api, [binding("p")], {"default/p": [extended()]}, dry_run=False)
    assert ready == [] and [(r.binding.name, r.outcome) for r in failed] == [("p", Outcome.CONFLICT)]
    assert api.deleted == ["p-extended-resources-x7k2q"] and api.claims == {}


def test_a_dry_run_creates_and_patches_as_dry_runs() -> None:
    api = FakeApi()
    ready, failed = allocate_claims(api, [binding("p")], {"default/p": [extended()]}, dry_run=True)
    assert [b.name for b in ready] == ["p"] and failed == []
    assert api.writes == [("p-extended-resources-x7k2q", "create", True)]
    assert [dry for _, _, dry in api.pod_status] == [True] and api.claims == {}
