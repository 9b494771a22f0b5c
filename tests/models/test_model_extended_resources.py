"""Extended resources served by DRA (DeviceClass ``extendedResourceName``, DRAExtendedResource):
a pod asking for ``nvidia.com/gpu`` gets devices of the class on nodes without device-plugin
capacity, through an implicit claim with the kube-scheduler's requests and mappings. Every plan
is checked by the independent verifier with its allocations."""

from __future__ import annotations

import dataclasses

from kubeplace.kube.dra import EXTENDED_CLAIM, ClaimAllocation, RequestMapping
from kubeplace.kube.objects import GPU
from kubeplace.kube.parse import parse_pod
from kubeplace.kube.plan_view import Finding, Placed, PlanView
from kubeplace.models.extended_resources import extended_claim
from kubeplace.models.plugins.dynamic_resources import verify
from tests.builders import node, pod, snapshot_of
from tests.device_builders import device_class, gpu_slice, resource_claim
from tests.models.plugins.test_dynamic_resources import allocations, devices_of, plan, where, why


def gpu_class() -> dict[str, object]:
    return device_class("gpu", extended=GPU)


def test_a_pod_requesting_the_extended_resource_gets_devices_of_its_class() -> None:
    """No node has nvidia.com/gpu from a device plugin; the DRA GPUs serve it: the pod is placed
    with an implicit claim of 2 devices (not "Insufficient nvidia.com/gpu")."""
    snapshot = snapshot_of(node("n1").cpu("8"), node("n2").cpu("8"), gpu_class(), gpu_slice("n2", 2),
                           pod("p").cpu("1").gpu(2))
    made = plan(snapshot)
    assert where(made) == {"p": "n2"}
    (given,) = allocations(made)["p"]
    assert given.claim == EXTENDED_CLAIM
    assert [(r.name, r.device_class, r.count) for r in given.requests] == [("container-0-request-1", "gpu", 2)]
    assert given.mappings == (RequestMapping("main", GPU, "container-0-request-1"),)
    assert devices_of(made) == {"p": ["gpu-0", "gpu-1"]}
    assert made.placements[0].gpus == ()  # no device-plugin annotation at binding


def test_devices_are_capacity_shared_with_claims_and_bound_pods() -> None:
    """4 GPUs on n1: one held by a bound pod's extended resource claim, one by an allocated
    claim; of three 1-GPU pods two fit, the third waits with the kube-scheduler's reason."""
    bound = pod("b").cpu("1").gpu(1).on("n1")
    held = resource_claim("held", allocated=("n1", [("gpu", "gpu-0")]))
    held["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    held["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": "uid-default-b",
                                            "controller": True}]
    other = resource_claim("other", allocated=("n1", [("gpu", "gpu-1")]))
    snapshot = snapshot_of(node("n1").cpu("8"), gpu_class(), gpu_slice("n1", 4), bound, held, other,
                           *[pod(f"p{i}").cpu("1").gpu(1) for i in range(3)])
    made = plan(snapshot)
    assert sorted(where(made)) == ["p0", "p1"]
    assert sorted(d for ds in devices_of(made).values() for d in ds) == ["gpu-2", "gpu-3"]
    assert "p2" in why(made)


def test_a_device_plugin_node_serves_it_as_allocatable() -> None:
    """A node with nvidia.com/gpu allocatable serves the request itself (no claim there)."""
    snapshot = snapshot_of(node("n1").cpu("8").gpu(2), gpu_class(), pod("p").cpu("1").gpu(2))
    made = plan(snapshot)
    assert where(made) == {"p": "n1"}
    assert allocations(made) == {}


def test_the_implicit_name_of_a_class_is_served_too() -> None:
    snapshot = snapshot_of(node("n1").cpu("8"), device_class("gpu"), gpu_slice("n1", 2),
                           pod("p").cpu("1").request("deviceclass.resource.kubernetes.io/gpu", 1)
                           .limit("deviceclass.resource.kubernetes.io/gpu", 1))
    made = plan(snapshot)
    assert where(made) == {"p": "n1"}
    assert [r.count for r in allocations(made)["p"][0].requests] == [1]


def test_a_stale_extended_resource_claim_of_the_pod_makes_it_wait() -> None:
    stale = resource_claim("p-extended-resources-x", owner_uid="uid-default-p")
    stale["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    snapshot = snapshot_of(node("n1").cpu("8"), gpu_class(), gpu_slice("n1", 2), stale, pod("p").cpu("1").gpu(1))
    made = plan(snapshot)
    assert where(made) == {}
    assert "cannot schedule extended resource claim" in why(made)["p"]


def test_requests_and_mappings_as_the_kube_scheduler_makes_them() -> None:
    """An init container reuses the devices of the containers that outlive it and asks only for
    the rest; request names are container-<index>-request-<index of the resource among the
    container's sorted requests>."""
    manifest = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {
            "initContainers": [{"name": "init", "resources": {"requests": {GPU: "3", "cpu": "1"}}}],
            "containers": [{"name": "a", "resources": {"requests": {GPU: "1", "cpu": "1", "memory": "1Gi"}}},
                           {"name": "b", "resources": {"requests": {GPU: "1"}}}]},
    }
    snapshot = snapshot_of(gpu_class())
    claim, mappings = extended_claim(parse_pod(manifest), snapshot.devices, [GPU])
    assert [(r.name, r.count) for r in claim.requests] == [
        ("container-0-request-1", 1), ("container-1-request-2", 1), ("container-2-request-0", 1)]
    assert mappings == (RequestMapping("a", GPU, "container-1-request-2"),
                        RequestMapping("b", GPU, "container-2-request-0"),
                        RequestMapping("init", GPU, "container-1-request-2"),
                        RequestMapping("init", GPU, "container-2-request-0"),
                        RequestMapping("init", GPU, "container-0-request-1"))
    assert sum(r.count for r in claim.requests) == parse_pod(manifest).requests[GPU]


def test_plan_file_round_trips_the_extended_resource_claim() -> None:
    from kubeplace.plan.plan import placements_from_dict
    snapshot = snapshot_of(node("n1").cpu("8"), gpu_class(), gpu_slice("n1", 2), pod("p").cpu("1").gpu(2))
    made = plan(snapshot)
    assert placements_from_dict(made.to_dict(), "plan.json") == made.placements


def test_the_verifier_checks_the_extended_resource_claim() -> None:
    """Independently: no allocation, too few devices, or a device of another class are findings."""
    snapshot = snapshot_of(node("n1").cpu("8"), gpu_class(), device_class("nic", 'device.driver == "nic.example.com"'),
                           gpu_slice("n1", 3), pod("p").cpu("1").gpu(2))
    made = plan(snapshot)
    (given,) = allocations(made)["p"]
    placements = (Placed(snapshot.pending[0], snapshot.nodes[0]),)  # p on n1

    def verify_claims(chosen: dict[tuple[str, str], tuple[ClaimAllocation, ...]]) -> list[Finding]:
        return verify.check_plan(PlanView(snapshot, placements, claim_allocations=chosen), None)

    assert verify_claims({("default", "p"): (given,)}) == []
    assert "are not allocated" in verify_claims({})[0][3]
    fewer = dataclasses.replace(given, allocation=dataclasses.replace(given.allocation,
                                                                      results=given.allocation.results[:1]))
    assert any("1 devices, expected 2" in f[3]
               for f in verify_claims({("default", "p"): (fewer,)}))
    other = dataclasses.replace(given, requests=tuple(dataclasses.replace(r, device_class="nic")
                                                      for r in given.requests))
    assert verify_claims({("default", "p"): (other,)}) != []


def test_defrag_counts_the_dra_devices_a_claim_takes() -> None:
    """DRA GPUs (the class serving nvidia.com/gpu): n1 has 4 free, n2 3 of 4 (one held by a
    claim); the workload runs 4-GPU pods. defrag puts the pending 1-GPU claim pod on n2 and keeps
    n1 whole (counted as a CPU-only pod, its devices would not matter and it went to n1)."""
    from kubeplace.models.config import Profile
    from kubeplace.models.framework import Objective
    from tests.device_builders import claiming, request
    from tests.models.test_model_profiles import plan as plan_with

    snapshot = snapshot_of(
        node("n1").cpu("4").memory("32Gi"), node("n2").cpu("16").memory("32Gi"),
        node("n3").cpu("16").memory("32Gi"),
        gpu_class(), gpu_slice("n1", 4), gpu_slice("n2", 4),
        resource_claim("held", allocated=("n2", [("gpu", "gpu-0")])),
        pod("big", "sys").scheduler("x").cpu("1").gpu(4).on("n3"),  # the workload runs 4-GPU pods
        resource_claim("c", requests=[request(count=1)], owner_uid="uid-default-p"),
        claiming(pod("p").cpu("1"), template="t", generated="c"),
    )
    (placed,) = plan_with(snapshot, Profile(objective=Objective.DEFRAG)).placements
    assert placed.node == "n2"


def test_reasons_in_the_kube_schedulers_words_per_node() -> None:
    """Where a device plugin serves the resource, NodeResourcesFit's reason; where DRA does,
    DynamicResources' (as the kube-scheduler's Fit leaves the resource to it there)."""
    snapshot = snapshot_of(node("n1").cpu("8"), node("n2").cpu("8").gpu(1), gpu_class(), gpu_slice("n1", 2),
                           pod("p").cpu("1").gpu(3))
    assert why(plan(snapshot)) == {
        "p": "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 cannot allocate all claims."}


def test_a_preemption_plan_allocates_the_preemptors_extended_resource_claim() -> None:
    """A full node (CPU): the high-priority pod asking for a DRA-served GPU preempts a low one and
    gets its extended resource claim in the plan (devices counted as the node's GPUs)."""
    from kubeplace.models.config import Configuration, SolverSettings
    from kubeplace.plan.preemption_plan import make_preemption_plan

    snapshot = snapshot_of(node("n1").cpu("2"), gpu_class(), gpu_slice("n1", 2),
                           pod("low").cpu("2").priority(1).owner("ReplicaSet", "rs").on("n1"),
                           pod("high").cpu("1").priority(100).gpu(2))
    config = Configuration()
    planned = make_preemption_plan(snapshot, config, config.profiles[0], SolverSettings(time_limit=10, workers=1))
    assert planned.violations == ()
    assert [(p.name, [c.claim for c in p.claims]) for p in planned.plan.placements] == [("high", [EXTENDED_CLAIM])]
    assert [v.name for v in planned.plan.preemptions] == ["low"]
