"""The independent verifier's resource claim rules: each broken allocation is found."""

from __future__ import annotations

from kubeplace.kube.dra import Allocation, ClaimAllocation, DeviceId, DeviceResult
from kubeplace.kube.objects import Requirement, SelectorTerm, Snapshot
from kubeplace.models.config import Configuration
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.plan import Placement
from tests.builders import node, pod, snapshot_of
from tests.device_builders import (
    DRIVER,
    claiming,
    device,
    device_class,
    gpu_slice,
    request,
    resource_claim,
    resource_slice,
)


def on(node_name: str, *devices: str, request_name: str = "gpu") -> Allocation:
    selector = (SelectorTerm(match_fields=(Requirement("metadata.name", "In", (node_name,)),)),)
    return Allocation(tuple(DeviceResult(request_name, DeviceId(DRIVER, node_name, d)) for d in devices), selector)


def details(snapshot: Snapshot, *placements: Placement) -> list[str]:
    config = Configuration()
    return [v.detail for v in verify_plan(snapshot, placements, config, config.profiles[0])]


def place(name: str, node_name: str, claim: str, allocation: Allocation | None) -> Placement:
    return Placement("default", name, node_name, f"uid-default-{name}",
                     claims=() if allocation is None else (ClaimAllocation(claim, allocation),))


def cluster(*objects: object, claims: int = 1, **claim: object) -> Snapshot:
    made: list[object] = [node("n1").cpu("8"), node("n2").cpu("8"), device_class(),
                          gpu_slice("n1", 4, nvlink=["a", "a", "b", "b"]), gpu_slice("n2", 2), *objects]
    for i in range(claims):
        made += [resource_claim(f"c{i}", **claim), claiming(pod(f"p{i}").cpu("1"), claim=f"c{i}")]  # type: ignore[arg-type]
    return snapshot_of(*made)  # type: ignore[arg-type]


def test_a_valid_allocation_passes() -> None:
    assert details(cluster(), place("p0", "n1", "c0", on("n1", "gpu-0"))) == []


def test_missing_allocation_wrong_node_and_unknown_device() -> None:
    snapshot = cluster(claims=3)
    found = details(snapshot, place("p0", "n1", "c0", None), place("p1", "n2", "c1", on("n1", "gpu-1")),
                    place("p2", "n1", "c2", on("n1", "gpu-9")))
    assert "claim c0 is not allocated: cannot allocate all claims" in found
    assert f"claim c1: device {DRIVER}/n1/gpu-1 is not available on node n2" in found
    assert "claim c1: its allocation's node selector does not admit node n2" in found
    assert f"claim c2: device {DRIVER}/n1/gpu-9 does not exist" in found


def test_counts_selectors_and_all() -> None:
    snapshot = cluster(requests=[request(count=2, selectors=[f'device.attributes["{DRIVER}"].index < 3'])])
    assert details(snapshot, place("p0", "n1", "c0", on("n1", "gpu-0"))) == ["claim c0: request gpu: 1 devices, "
                                                                             "expected 2"]
    found = details(snapshot, place("p0", "n1", "c0", on("n1", "gpu-0", "gpu-3")))
    assert found == [f"claim c0: device {DRIVER}/n1/gpu-3 does not match request gpu's class and selectors"]
    every = cluster(requests=[request(all_devices=True)])
    assert details(every, place("p0", "n2", "c0", on("n2", "gpu-0"))) == [
        "claim c0: request gpu: allocationMode All needs all 2 matching devices, got 1"]


def test_double_allocation_against_the_cluster_and_within_the_plan() -> None:
    held = resource_claim("old", allocated=("n1", [("gpu", "gpu-0")]), reserved_for=["uid-x"])
    snapshot = cluster(held, pod("x").cpu("1").on("n1"), claims=2)
    found = details(snapshot, place("p0", "n1", "c0", on("n1", "gpu-0")), place("p1", "n1", "c1", on("n1", "gpu-1")))
    assert found == [f"device {DRIVER}/n1/gpu-0 allocated 2 times"]
    found = details(snapshot, place("p0", "n1", "c0", on("n1", "gpu-1")), place("p1", "n1", "c1", on("n1", "gpu-1")))
    assert found == [f"device {DRIVER}/n1/gpu-1 allocated 2 times"]


def test_match_attribute_and_counters() -> None:
    snapshot = cluster(requests=[request(count=2)], constraints=[{"matchAttribute": f"{DRIVER}/nvlink"}])
    assert details(snapshot, place("p0", "n1", "c0", on("n1", "gpu-0", "gpu-1"))) == []
    assert details(snapshot, place("p0", "n1", "c0", on("n1", "gpu-1", "gpu-2")))[0].startswith(
        f"claim c0: matchAttribute {DRIVER}/nvlink does not hold")
    parts = [device(f"part-{i}", consumes={"g": {"memory": "20"}}) for i in range(3)]
    partitioned = snapshot_of(node("n1").cpu("8"), device_class(),
                              resource_slice("s", parts, node="n1", pool="n1", counters={"g": {"memory": "40"}}),
                              *[x for i in range(3) for x in (resource_claim(f"c{i}"),
                                                              claiming(pod(f"p{i}").cpu("1"), claim=f"c{i}"))])
    found = details(partitioned, *(place(f"p{i}", "n1", f"c{i}", on("n1", f"part-{i}")) for i in range(3)))
    assert found == [f"counter g/memory of pool {DRIVER}/n1: 60000 used, 40000 available"]


def test_allocated_claims_pin_their_node_and_are_not_allocated_again() -> None:
    done = resource_claim("done", allocated=("n2", [("gpu", "gpu-0")]))
    snapshot = snapshot_of(node("n1").cpu("8"), node("n2").cpu("8"), device_class(), gpu_slice("n2", 1), done,
                           claiming(pod("a").cpu("1"), claim="done"))
    assert details(snapshot, place("a", "n2", "done", None)) == []
    assert details(snapshot, place("a", "n1", "done", None)) == ["resourceclaim done not available on the node"]
    assert details(snapshot, place("a", "n2", "done", on("n2", "gpu-0"))) == []  # its reservation
    assert details(snapshot, place("a", "n2", "done", on("n2", "gpu-1"))) == [
        "claim done is allocated already; the plan allocates it again"]


def test_claims_that_are_not_there_yet() -> None:
    snapshot = snapshot_of(node("n1").cpu("8"), device_class(), claiming(pod("p").cpu("1"), template="t"))
    assert details(snapshot, Placement("default", "p", "n1")) == [
        'pod "default/p": ResourceClaim not created yet']


def test_a_claim_listed_twice_for_a_pod_and_reservations_past_the_limit_are_refused() -> None:
    twice = Placement("default", "p0", "n1", "uid-default-p0",
                      claims=(ClaimAllocation("c0", on("n1", "gpu-0")), ClaimAllocation("c0", on("n1", "gpu-1"))))
    assert "claim c0 is listed 2 times for the pod" in details(cluster(), twice)
    almost = [f"uid-{i}" for i in range(255)]
    snapshot = cluster(resource_claim("shared", allocated=("n1", [("gpu", "gpu-3")]), reserved_for=almost),
                       claiming(pod("a").cpu("1"), claim="shared"), claiming(pod("b").cpu("1"), claim="shared"),
                       resource_claim("full", allocated=("n1", [("gpu", "gpu-2")]), reserved_for=[*almost, "x"]),
                       claiming(pod("c").cpu("1"), claim="full"))
    found = details(snapshot, place("a", "n1", "shared", on("n1", "gpu-3")),
                    place("b", "n1", "shared", on("n1", "gpu-3")), place("c", "n1", "full", on("n1", "gpu-2")))
    assert "claim default/shared reserved for 255 consumers gets 2 more, over the API server's 256" in found
    assert "resourceclaim full in use: reserved for 256 consumers" in found
    assert details(snapshot, place("a", "n1", "shared", on("n1", "gpu-3"))) == []


def test_an_existing_allocation_listing_a_device_twice_holds_it_once() -> None:
    """The API server accepts such a results list (atomic, no uniqueness); the kube-scheduler's
    allocated devices are a set. Found by the claims fuzz: the verifier refused every plan joining it."""
    twice = resource_claim("done", allocated=("n1", [("gpu", "gpu-3"), ("gpu", "gpu-3")]), reserved_for=["uid-x"])
    snapshot = cluster(twice, pod("x").cpu("1").on("n1"), claiming(pod("joiner").cpu("1"), claim="done"))
    assert details(snapshot, place("joiner", "n1", "done", None), place("p0", "n1", "c0", on("n1", "gpu-0"))) == []
