"""Allocating pods' resource claims before the pods (kube/claim_binder.py), against a fake API
with resourceVersion preconditions."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubeplace.kube.binder import Binding, Outcome
from kubeplace.kube.claim_binder import allocate_claims
from kubeplace.kube.dra import DELETE_PROTECTION, Allocation, ClaimAllocation, DeviceId, DeviceResult
from kubeplace.kube.errors import Conflict, Unreachable
from tests.device_builders import DRIVER, resource_claim

Raw = dict[str, Any]


class FakeClaims:
    def __init__(self, *claims: Raw) -> None:
        self.claims = {c["metadata"]["name"]: c for c in claims}
        self.writes: list[tuple[str, str, bool]] = []
        self.fail: dict[str, Exception] = {}

    def read_resource_claim(self, namespace: str, name: str) -> Raw:
        return copy.deepcopy(self.claims[name])

    def update_resource_claim(self, claim: Mapping[str, Any], dry_run: bool = False, status: bool = False) -> Raw:
        obj = copy.deepcopy(dict(claim))
        name = obj["metadata"]["name"]
        if name in self.fail:
            raise self.fail.pop(name)
        stored = self.claims[name]
        if obj["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            raise Conflict(f"update {name}: the object has been modified", status=409)
        merged = copy.deepcopy(stored)
        if status:
            merged["status"] = obj.get("status", {})
        else:
            merged["metadata"] = obj["metadata"]
        self.writes.append((name, "status" if status else "claim", dry_run))
        if not dry_run:
            merged["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
            self.claims[name] = merged
        return copy.deepcopy(merged)


def given(claim: str, device: str = "gpu-0") -> ClaimAllocation:
    return ClaimAllocation(claim, Allocation((DeviceResult("gpu", DeviceId(DRIVER, "n1", device)),)))


def binding(name: str) -> Binding:
    return Binding("default", name, f"uid-{name}", "n1")


def test_finalizer_then_allocation_and_reservation_with_preconditions() -> None:
    api = FakeClaims(resource_claim("c"))
    ready, failed = allocate_claims(api, [binding("p")], {"default/p": [given("c")]}, dry_run=False)
    assert [b.name for b in ready] == ["p"] and failed == []
    stored = api.claims["c"]
    assert api.writes == [("c", "claim", False), ("c", "status", False)]
    assert stored["metadata"]["finalizers"] == [DELETE_PROTECTION]
    assert stored["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]
    assert stored["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]


def test_a_conflict_fails_that_pod_and_the_others_go_on() -> None:
    api = FakeClaims(resource_claim("a"), resource_claim("b"))
    api.fail["a"] = Conflict("update a: the object has been modified", status=409)
    ready, failed = allocate_claims(api, [binding("p"), binding("q")],
                                    {"default/p": [given("a")], "default/q": [given("b", "gpu-1")]}, dry_run=False)
    assert [b.name for b in ready] == ["q"]
    assert [(r.binding.name, r.outcome) for r in failed] == [("p", Outcome.CONFLICT)]
    assert "resource claims not allocated: update a" in failed[0].message


def test_allocated_elsewhere_meanwhile_is_refused_and_earlier_claims_undone() -> None:
    taken = resource_claim("b", allocated=("n1", [("gpu", "gpu-5")]))
    api = FakeClaims(resource_claim("a"), taken)
    ready, failed = allocate_claims(api, [binding("p")], {"default/p": [given("a"), given("b", "gpu-1")]},
                                    dry_run=False)
    assert ready == [] and failed[0].outcome == Outcome.CONFLICT
    assert "claim default/b got allocated elsewhere in the meantime; undone: a" in failed[0].message
    assert "allocation" not in api.claims["a"]["status"] and api.claims["a"]["status"]["reservedFor"] == []


def test_dry_run_sends_every_write_as_a_dry_run_and_an_unreachable_server_stops() -> None:
    api = FakeClaims(resource_claim("a"), resource_claim("b"))
    ready, _ = allocate_claims(api, [binding("p")], {"default/p": [given("a")]}, dry_run=True)
    assert [b.name for b in ready] == ["p"] and api.writes == [("a", "claim", True), ("a", "status", True)]
    assert "allocation" not in api.claims["a"]["status"]
    api.fail["a"] = Unreachable("API server unreachable")
    ready, failed = allocate_claims(api, [binding("p"), binding("q")],
                                    {"default/p": [given("a")], "default/q": [given("b")]}, dry_run=False)
    assert ready == [] and [r.outcome for r in failed] == [Outcome.UNKNOWN, Outcome.NOT_ATTEMPTED]


def test_an_allocated_claim_only_gets_the_reservation() -> None:
    done = resource_claim("s", allocated=("n1", [("gpu", "gpu-0")]), reserved_for=["uid-other"])
    api = FakeClaims(done)
    allocation = Allocation((DeviceResult("gpu", DeviceId(DRIVER, "n1", "gpu-0")),))
    ready, _ = allocate_claims(api, [binding("p")], {"default/p": [ClaimAllocation("s", allocation)]}, dry_run=False)
    assert ready and api.writes == [("s", "status", False)]
    assert [r["uid"] for r in api.claims["s"]["status"]["reservedFor"]] == ["uid-other", "uid-p"]
