"""models/plugins/dynamic_resources/: dynamic resource claims in the model (allocation on a node
with the structured allocator's rules, device pools as capacity across the batch, the
kube-scheduler's reasons; every plan is checked by the independent verifier, with the plan's
allocations) and the verifier's check over the plan (each broken allocation is found)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kubeplace.kube.dra import Allocation, ClaimAllocation, DeviceId, DeviceResult
from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import Requirement, SelectorTerm, Snapshot
from kubeplace.kube.parse import build_snapshot
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Placement, Plan
from tests.builders import node, pod, snapshot_of
from tests.device_builders import (
    DRIVER,
    FILTER_ERROR,
    claim_template,
    claiming,
    device,
    device_class,
    gpu_slice,
    request,
    resource_claim,
    resource_slice,
    sub_request,
)


def plan(snapshot: Snapshot) -> Plan:
    config = Configuration()
    profile = config.profiles[0]
    made = make_plan(snapshot, config, profile, SolverSettings(time_limit=10, workers=1, seed=0)).plan
    assert verify_plan(snapshot, made.placements, config, profile) == []
    return made


def where(made: Plan) -> dict[str, str]:
    return {p.name: p.node for p in made.placements}


def why(made: Plan) -> dict[str, str]:
    return {u.name: " / ".join(u.reasons) for u in made.unplaced}


def devices_of(made: Plan) -> dict[str, list[str]]:
    return {p.name: sorted(r.device.device for c in p.claims for r in c.allocation.results) for p in made.placements}


def allocations(made: Plan) -> dict[str, tuple[ClaimAllocation, ...]]:
    return {p.name: p.claims for p in made.placements if p.claims}


def gpu_pods(n: int, count: int = 1, **claim: Any) -> list[Any]:
    """n pods, each with its own claim (as from a template) for ``count`` GPUs."""
    out: list[Any] = []
    for i in range(n):
        out.append(resource_claim(f"c{i}", requests=[request(count=count, **claim)],
                                  owner_uid=f"uid-default-p{i}"))
        out.append(claiming(pod(f"p{i}").cpu("1"), template="t", generated=f"c{i}"))
    return out


def test_pods_get_distinct_devices_and_packing_is_capped_by_devices() -> None:
    """Two nodes of 2 GPUs, five 1-GPU pods: four placed, each with its own device; the fifth
    gets the kube-scheduler's reason."""
    snapshot = snapshot_of(node("n1").cpu("8"), node("n2").cpu("8"), device_class(), gpu_slice("n1", 2),
                           gpu_slice("n2", 2), *gpu_pods(5))
    made = plan(snapshot)
    assert len(made.placements) == 4
    taken = [(p.node, d) for p in made.placements for d in devices_of(made)[p.name]]
    assert len(set(taken)) == 4
    assert "cannot allocate all claims" in why(made)["p4"]


def test_exact_count_and_all() -> None:
    snapshot = snapshot_of(node("n1").cpu("8"), node("n2").cpu("8"), device_class(), gpu_slice("n1", 2),
                           gpu_slice("n2", 4),
                           resource_claim("three", requests=[request(count=3)]),
                           claiming(pod("big").cpu("1"), claim="three"),
                           resource_claim("every", requests=[request(all_devices=True)]),
                           claiming(pod("all").cpu("1"), claim="every"))
    made = plan(snapshot)
    assert where(made)["big"] == "n2" and len(devices_of(made)["big"]) == 3
    assert where(made)["all"] == "n1" and devices_of(made)["all"] == ["gpu-0", "gpu-1"]


def test_cel_selectors_of_the_claim_and_the_class() -> None:
    snapshot = snapshot_of(node("n1").cpu("8"), node("n2").cpu("8"),
                           device_class("gpu", f'device.driver == "{DRIVER}"',
                                        f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'),
                           gpu_slice("n1", 2, model="A100", memory="80Gi"), gpu_slice("n2", 2, model="H100"),
                           resource_claim("h", requests=[request(selectors=[
                               f'device.attributes["{DRIVER}"].model == "H100"'])]),
                           claiming(pod("h100").cpu("1"), claim="h"))
    assert where(plan(snapshot)) == {"h100": "n2"}
    small = snapshot_of(node("n1").cpu("8"),
                        device_class("gpu", f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("50Gi"))'),
                        gpu_slice("n1", 2, memory="40Gi"), resource_claim("c"), claiming(pod("p").cpu("1"), claim="c"))
    assert why(plan(small))["p"] == "0/1 nodes are available: 1 cannot allocate all claims."


def test_match_attribute_keeps_a_claims_devices_on_one_nvlink_domain() -> None:
    """n1 has 3 free GPUs but on two domains (2 + 1 after gpu-0 is taken); n2 has 2 on one."""
    taken = resource_claim("old", allocated=("n1", [("gpu", "gpu-0")]), reserved_for=["uid-x"])
    snapshot = snapshot_of(node("n1").cpu("8"), node("n2").cpu("8"), device_class(),
                           gpu_slice("n1", 4, nvlink=["a", "a", "b", "b"]), gpu_slice("n2", 2, nvlink=["c", "d"]),
                           taken, pod("x").cpu("1").on("n1"),
                           resource_claim("pair", requests=[request(count=2)],
                                          constraints=[{"matchAttribute": f"{DRIVER}/nvlink"}]),
                           claiming(pod("p").cpu("1"), claim="pair"))
    made = plan(snapshot)
    assert where(made) == {"p": "n1"} and devices_of(made)["p"] == ["gpu-2", "gpu-3"]


def test_first_available_takes_the_first_alternative_that_fits() -> None:
    snapshot = snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 2, model="A100"),
                           resource_claim("c", requests=[request("gpu", first_available=[
                               sub_request("h100", selectors=[f'device.attributes["{DRIVER}"].model == "H100"']),
                               sub_request("two", count=2)])]),
                           claiming(pod("p").cpu("1"), claim="c"))
    made = plan(snapshot)
    assert [r.request for c in allocations(made)["p"] for r in c.allocation.results] == ["gpu/two", "gpu/two"]


def test_partitionable_devices_share_counters() -> None:
    """A GPU of 40 memory units sold as 4 partitions of 20: two fit at once, not three."""
    parts = [device(f"part-{i}", consumes={"gpu-0": {"memory": "20"}}) for i in range(4)]
    snapshot = snapshot_of(node("n1").cpu("8"), device_class(),
                           resource_slice("s", parts, node="n1", counters={"gpu-0": {"memory": "40"}}),
                           *gpu_pods(3))
    made = plan(snapshot)
    assert len(made.placements) == 2
    assert "cannot allocate all claims" in why(made)[next(iter(why(made)))]


def test_devices_of_allocated_claims_and_tainted_devices_are_not_given() -> None:
    snapshot = snapshot_of(node("n1").cpu("8"), device_class(),
                           resource_slice("s", [device("gpu-0"), device("gpu-1", taint=True), device("gpu-2")],
                                          node="n1"),
                           resource_claim("old", allocated=("n1", [("gpu", "gpu-0")]), reserved_for=["uid-x"]),
                           pod("x").cpu("1").on("n1"), *gpu_pods(2))
    made = plan(snapshot)
    assert [d for devices in devices_of(made).values() for d in devices] == ["gpu-2"]


def test_a_shared_claim_is_allocated_once_and_an_allocated_claim_pins_the_node() -> None:
    snapshot = snapshot_of(node("n1").cpu("8"), node("n2").cpu("8"), device_class(), gpu_slice("n1", 1),
                           gpu_slice("n2", 1),
                           resource_claim("done", allocated=("n2", [("gpu", "gpu-0")])),
                           claiming(pod("a").cpu("1"), claim="done"), claiming(pod("b").cpu("1"), claim="done"),
                           resource_claim("new"), claiming(pod("c").cpu("1").created("2024-01-01T00:00:00Z"),
                                                           claim="new"),
                           claiming(pod("d").cpu("1").created("2024-01-02T00:00:00Z"), claim="new"))
    made = plan(snapshot)
    assert where(made) == {"a": "n2", "b": "n2", "c": "n1"}
    assert allocations(made).keys() == {"a", "b", "c"}  # a and b: to be added to done's reservedFor
    assert allocations(made)["a"] == allocations(made)["b"] != allocations(made)["c"]
    assert why(made)["d"] == ("0/2 nodes are available: resource claim default/new is in the process of being "
                              "allocated.")


def test_prefilter_reasons_in_the_kube_schedulers_words() -> None:
    snapshot = snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 4), claim_template("t"),
                           claiming(pod("waiting").cpu("1"), template="t"),
                           claiming(pod("missing").cpu("1"), claim="nope"),
                           resource_claim("gone", deleting=True), claiming(pod("deleting").cpu("1"), claim="gone"),
                           resource_claim("theirs", owner_uid="someone"),
                           claiming(pod("stolen").cpu("1"), template="t", generated="theirs"),
                           resource_claim("classless", requests=[request(device_class="deleted")]),
                           claiming(pod("classless").cpu("1"), claim="classless"))
    reasons = why(plan(snapshot))
    assert reasons == {
        "waiting": '0/1 nodes are available: pod "default/waiting": ResourceClaim not created yet.',
        "missing": '0/1 nodes are available: could not find ResourceClaim "default/nope".',
        "deleting": '0/1 nodes are available: resourceclaim "gone" is being deleted.',
        "stolen": "0/1 nodes are available: ResourceClaim default/theirs was not created for Pod default/stolen "
                  "(Pod is not owner).",
        "classless": "0/1 nodes are available: request gpu: device class deleted does not exist.",
    }


def test_unsupported_request_features_leave_the_pod_to_the_default_scheduler() -> None:
    claim = resource_claim("c")
    claim["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    snapshot = snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 1), claim,
                           claiming(pod("p").cpu("1"), claim="c"))
    made = plan(snapshot)
    assert made.unplaced[0].left_to_default_scheduler
    assert made.unplaced[0].reasons == ("left to the default scheduler: dynamic resource claims: adminAccess",)


NVLINK = {"matchAttribute": f"{DRIVER}/nvlink", "requests": ["gpu"]}


@pytest.mark.parametrize("kind", ["claim", "template"])
def test_a_distinct_attribute_constraint_leaves_the_pod_to_the_default_scheduler_naming_its_field(kind: str) -> None:
    """DRAConsumableCapacity's distinctAttribute (beta, on by default in 1.36) is valid; kubeplace
    does not model it, so the pod goes to the default scheduler with the field as the reason,
    not refused as if matchAttribute were missing."""
    distinct = {"distinctAttribute": f"{DRIVER}/index", "requests": ["gpu"]}
    if kind == "claim":
        claimed = [resource_claim("c", requests=[request(count=2)], constraints=[NVLINK, distinct]),
                   claiming(pod("p").cpu("1"), claim="c")]
        field = "ResourceClaim default/c spec.devices.constraints[1].distinctAttribute"
    else:
        template = claim_template("t")
        template["spec"]["spec"]["devices"]["constraints"] = [distinct]
        claimed = [template, resource_claim("gen", owner_uid="uid-default-p"),
                   claiming(pod("p").cpu("1"), template="t", generated="gen")]
        claimed[1]["spec"]["devices"]["constraints"] = [distinct]  # generated from the template
        field = "ResourceClaim default/gen spec.devices.constraints[0].distinctAttribute"
    made = plan(snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 4), *claimed))
    assert not made.placements and made.unplaced[0].left_to_default_scheduler
    assert made.unplaced[0].reasons == (
        f"left to the default scheduler: dynamic resource claims: {field} (DRAConsumableCapacity)",)


def test_match_attribute_beside_a_distinct_attribute_is_the_constraint_as_the_allocator_reads_it() -> None:
    """Both set: the API server checks matchAttribute only, and every allocator takes the
    matchAttribute case first (allocator_*.go): the devices share the attribute."""
    both = {**NVLINK, "distinctAttribute": f"{DRIVER}/index"}
    made = plan(snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 4, nvlink=["a", "b", "b", "a"]),
                            resource_claim("c", requests=[request(count=2)], constraints=[both]),
                            claiming(pod("p").cpu("1"), claim="c")))
    assert sorted(devices_of(made)["p"]) in (["gpu-0", "gpu-3"], ["gpu-1", "gpu-2"])


BAD_ATTRIBUTES = ["numa", "gpu.example.com/", "/numa", "Bad_Domain!/numa", "gpu.example.com/9lives",
                  "gpu.example.com/" + "n" * 33, "d" * 64 + "/numa", "gpu.example.com/has-dash"]


@pytest.mark.parametrize("attribute", BAD_ATTRIBUTES)
@pytest.mark.parametrize("field", ["matchAttribute", "distinctAttribute"])
def test_a_constraint_attribute_is_a_fully_qualified_name(attribute: str, field: str) -> None:
    claim = resource_claim("c", constraints=[{field: attribute, "requests": ["gpu"]}])
    with pytest.raises(InputError, match=rf"spec.devices.constraints\[0\].{field}: Invalid value: ") as refused:
        build_snapshot([(claim, "c.yaml")])
    assert "\n" not in str(refused.value)


def test_a_constraint_with_neither_attribute_is_refused_in_the_api_servers_words() -> None:
    claim = resource_claim("c", constraints=[{"requests": ["gpu"]}])
    with pytest.raises(InputError, match=r'spec.devices.constraints\[0\]: Required value: exactly one of '
                                         r'"matchAttribute" or "distinctAttribute" is required'):
        build_snapshot([(claim, "c.yaml")])


def test_classes_sharing_devices_are_capped_together() -> None:
    """A100-only pods and any-GPU pods on a node of 1 A100 and 1 H100: never two A100 pods."""
    a100 = f'device.attributes["{DRIVER}"].model == "A100"'
    snapshot = snapshot_of(node("n1").cpu("8"), device_class(),
                           resource_slice("s", [device("gpu-0", attributes={"model": "A100"}),
                                                device("gpu-1", attributes={"model": "H100"})], node="n1"),
                           *gpu_pods(2, selectors=[a100]),
                           resource_claim("any"), claiming(pod("any").cpu("1"), claim="any"))
    made = plan(snapshot)
    assert len(made.placements) == 2 and "any" in where(made)


def placement_pairs(made: Plan) -> list[tuple[str, str]]:
    return [(p.name, p.node) for p in made.placements]


def test_plan_file_round_trips_allocations() -> None:
    from kubeplace.plan.plan import placements_from_dict
    snapshot = snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 2), *gpu_pods(1))
    made = plan(snapshot)
    assert placements_from_dict(made.to_dict(), "plan.json") == made.placements
    assert dataclasses.asdict(made.placements[0])["claims"][0]["claim"] == "c0"


def test_pods_of_different_device_counts_are_packed_by_device_capacity() -> None:
    """Two nodes of 2 devices: the two 1-device pods share one node so that the 2-device pod gets
    the other (device counts are a capacity the solver packs, not one pod per node)."""
    objects: list[Any] = [node("n1").cpu("8"), node("n2").cpu("8"), device_class(), gpu_slice("n1", 2),
                          gpu_slice("n2", 2)]
    for name, count in (("one-0", 1), ("one-1", 1), ("two-0", 2)):
        objects += [resource_claim(name, requests=[request(count=count)]), claiming(pod(name).cpu("1"), claim=name)]
    made = plan(snapshot_of(*objects))
    assert len(made.placements) == 3
    assert where(made)["one-0"] == where(made)["one-1"] != where(made)["two-0"]


def test_network_devices_are_given_once_across_nodes() -> None:
    """One device every node can use (allNodes) and one for zone-a nodes (nodeSelector): three
    pods, two devices; the allocations' node selectors say where they can be used."""
    zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    snapshot = snapshot_of(node("n1").cpu("8").label("zone", "a"), node("n2").cpu("8").label("zone", "b"),
                           device_class(), resource_slice("everywhere", [device("net-0")], pool="net", all_nodes=True),
                           resource_slice("zonal", [device("zonal-0")], pool="zonal", node_selector=zone),
                           *gpu_pods(3))
    made = plan(snapshot)
    assert len(made.placements) == 2
    selectors = {r.device.device: c.allocation.node_selector for p in made.placements for c in p.claims
                 for r in c.allocation.results}
    assert selectors["net-0"] is None
    assert selectors["zonal-0"] is not None and selectors["zonal-0"][0].match_expressions[0].values == ("a",)
    assert len(made.unplaced) == 1


def test_a_selector_failing_at_run_time_is_its_pods_reason_in_the_allocators_words() -> None:
    snapshot = snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 1),
                           resource_claim("c", requests=[request(selectors=[
                               'device.attributes["other.io"].model == "x"'])]),
                           claiming(pod("p").cpu("1"), claim="c"))
    assert why(plan(snapshot))["p"] == (f"{FILTER_ERROR}claim default/c: selector #0: "
                                        "CEL runtime error: no such key: model")


def test_one_poisoned_claim_leaves_its_pod_unplaced_and_every_other_pod_placed() -> None:
    """Division by zero, overflow: the pod of that claim is not placed (with the reason), the pods
    with healthy claims and the pods without claims are."""
    index = f'device.attributes["{DRIVER}"].index'
    snapshot = snapshot_of(node("n1").cpu("8"), node("n2").cpu("8"), device_class(), gpu_slice("n1", 2),
                           gpu_slice("n2", 2),
                           resource_claim("zero", requests=[request(selectors=[f"{index} / 0 == 1"])]),
                           resource_claim("big", requests=[request(selectors=[f"{index} + 9223372036854775807 > 0"])]),
                           resource_claim("fine", requests=[request(count=2)]),
                           claiming(pod("p").cpu("1"), claim="zero"), claiming(pod("o").cpu("1"), claim="big"),
                           claiming(pod("q").cpu("1"), claim="fine"), pod("r").cpu("1"), pod("s").cpu("1"))
    made = plan(snapshot)
    assert sorted(where(made)) == ["q", "r", "s"]
    assert why(made) == {
        "p": f"{FILTER_ERROR}claim default/zero: selector #0: CEL runtime error: division by zero",
        "o": f"{FILTER_ERROR}claim default/big: selector #0: CEL runtime error: integer overflow"}
    assert len(devices_of(made)["q"]) == 2


def test_a_selector_failing_on_one_node_only_keeps_its_pod_off_every_node() -> None:
    """As the kube-scheduler: an error anywhere aborts the pod's scheduling, even where another
    node's devices would pass (it would hide the broken selector)."""
    snapshot = snapshot_of(node("n1").cpu("8"), node("n2").cpu("8"), device_class(),
                           resource_slice("n1-gpus", [device("gpu-0", attributes={"model": "A100"})], node="n1"),
                           resource_slice("n2-gpus", [device("gpu-0")], node="n2"),
                           resource_claim("c", requests=[request(selectors=[
                               f'device.attributes["{DRIVER}"].model == "A100"'])]),
                           claiming(pod("p").cpu("1"), claim="c"))
    assert why(plan(snapshot))["p"] == (f"{FILTER_ERROR}claim default/c: selector #0: "
                                        "CEL runtime error: no such key: model")


def test_a_class_selector_failing_at_run_time_names_the_class() -> None:
    snapshot = snapshot_of(node("n1").cpu("8"), device_class("gpu", "device.attributes[\"x.io\"].model == 1"),
                           gpu_slice("n1", 1), resource_claim("c", requests=[request()]),
                           claiming(pod("p").cpu("1"), claim="c"), pod("r").cpu("1"))
    made = plan(snapshot)
    assert where(made) == {"r": "n1"}
    assert why(made)["p"] == f"{FILTER_ERROR}class gpu: selector #0: CEL runtime error: no such key: model"


def test_a_preemption_plan_allocates_its_preemptors_claims() -> None:
    """A full node: the high-priority pod with a claim preempts a low-priority one and gets its
    devices in the plan (without them the verifier refuses the plan)."""
    from kubeplace.plan.preemption_plan import make_preemption_plan

    snapshot = snapshot_of(node("n1").cpu("2"), device_class(), gpu_slice("n1", 1),
                           pod("low").cpu("2").priority(1).owner("ReplicaSet", "rs").on("n1"),
                           resource_claim("c"), claiming(pod("high").cpu("1").priority(100), claim="c"))
    config = Configuration()
    planned = make_preemption_plan(snapshot, config, config.profiles[0], SolverSettings(time_limit=10, workers=1))
    assert planned.violations == ()
    assert [(p.name, [c.claim for c in p.claims]) for p in planned.plan.placements] == [("high", ["c"])]
    assert [v.name for v in planned.plan.preemptions] == ["low"]


def test_a_claim_reserved_for_the_most_consumers_is_in_use_for_other_pods() -> None:
    """ResourceClaimReservedForMaxSize is 256: a claim reserved for 256 pods takes no other
    (its own consumers still use it); of the pods joining a claim with one place left only the
    first in queue order is placed, so the plan never writes a 257th reservation."""
    full = [f"uid-{i}" for i in range(255)]
    snapshot = snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 2),
                           resource_claim("full", allocated=("n1", [("gpu", "gpu-0")]),
                                          reserved_for=[*full, "uid-other"]),
                           claiming(pod("late").cpu("1"), claim="full"),
                           resource_claim("nearly", allocated=("n1", [("gpu", "gpu-1")]), reserved_for=full),
                           claiming(pod("first").cpu("1").created("2024-01-01T00:00:00Z"), claim="nearly"),
                           claiming(pod("second").cpu("1").created("2024-01-02T00:00:00Z"), claim="nearly"))
    made = plan(snapshot)
    assert where(made) == {"first": "n1"}
    assert why(made) == {"late": "0/1 nodes are available: resourceclaim in use.",
                         "second": "0/1 nodes are available: resourceclaim in use."}
    own = snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 1),
                      resource_claim("full", allocated=("n1", [("gpu", "gpu-0")]),
                                     reserved_for=[*full, "uid-default-mine"]),
                      claiming(pod("mine").cpu("1"), claim="full"))
    assert where(plan(own)) == {"mine": "n1"}


def test_a_claim_a_pod_lists_twice_is_allocated_once() -> None:
    """Two entries of spec.resourceClaims naming one claim: its devices are allocated once."""
    twice = pod("p").cpu("1").spec("resourceClaims", [{"name": "a", "resourceClaimName": "train"},
                                                       {"name": "b", "resourceClaimName": "train"}])
    made = plan(snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 2),
                            resource_claim("train", requests=[request(count=2)]), twice))
    assert where(made) == {"p": "n1"}
    assert [c.claim for c in allocations(made)["p"]] == ["train"] and devices_of(made) == {"p": ["gpu-0", "gpu-1"]}


def test_a_claim_two_containers_use_is_allocated_once() -> None:
    builder = claiming(pod("p").cpu("1"), claim="train")
    manifest = builder.manifest()
    manifest["spec"]["containers"] = [{"name": name, "image": "x", "resources": {"claims": [{"name": "gpu"}]}}
                                      for name in ("a", "b")]
    made = plan(snapshot_of(node("n1").cpu("8"), device_class(), gpu_slice("n1", 2),
                            resource_claim("train", requests=[request(count=2)]), manifest))
    assert devices_of(made) == {"p": ["gpu-0", "gpu-1"]}


# ------------------------------------------------------------------ the verifier's check


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
