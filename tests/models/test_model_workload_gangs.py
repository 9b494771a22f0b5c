"""Gang sources beside the scheduler-plugins, Volcano and CRD-free ones: the upstream Workload API's
PodGroup (scheduling.k8s.io v1alpha2 / v1beta1) and KAI-Scheduler's (scheduling.run.ai/v2alpha2);
and a pod naming a PodGroup kubeplace cannot read is never placed, alone or with part of its gang."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.gangs import parse_pod_group
from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Plan
from kubeplace.plan.verify import verify
from tests.builders import PodBuilder, node, pod, snapshot_of

RACK = "cloud.provider.com/topology-rack"
BACKENDS = ["cpsat", "highs"]


def workload_group(name: str, min_count: int | None, version: str = "v1alpha2", key: str = "") -> dict[str, Any]:
    """A Workload API PodGroup (gang policy with minCount, or basic when None)."""
    policy: dict[str, Any] = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def kai_group(name: str, min_member: int, required: str = "", version: str = "v2alpha2") -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "team-a"}
    if required:
        spec["topologyConstraint"] = {"requiredTopologyLevel": required}
    return {"apiVersion": f"scheduling.run.ai/{version}", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def workload_member(name: str, group: str = "job", cpu: str = "2") -> PodBuilder:
    return pod(name).cpu(cpu).spec("schedulingGroup", {"podGroupName": group})


def kai_member(name: str, group: str = "job", cpu: str = "2") -> PodBuilder:
    return pod(name).cpu(cpu).annotation("pod-group-name", group)


MEMBERS = {"workload-api": workload_member, "kai": kai_member}


def plan_of(*objects: Any, backend: str = "cpsat") -> tuple[Plan, Snapshot]:
    snap = snapshot_of(*objects)
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(backend=backend, time_limit=5, workers=1)).plan
    assert verify(snap, [(p.namespace, p.name, p.node) for p in plan.placements]) == []
    assert plan.summary.verified
    return plan, snap


def placed(plan: Plan) -> set[str]:
    return {p.name for p in plan.placements}


TWO_NODES = (node("n1").cpu("4").memory("8Gi"), node("n2").cpu("2").memory("8Gi"))
"""Room for three 2-CPU pods: a 4-pod gang does not fit, pod by pod three would."""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("version", ["v1alpha2", "v1beta1"])
def test_workload_api_gang_is_all_or_nothing(version: str, backend: str) -> None:
    members = [workload_member(f"w{i}") for i in range(4)]
    plan, _ = plan_of(*TWO_NODES, workload_group("job", 4, version), *members, backend=backend)
    assert placed(plan) == set()
    (gang,) = plan.gangs
    assert gang.min_member == 4 and not gang.placed
    plan, _ = plan_of(*TWO_NODES, workload_group("job", 3, version), *members, backend=backend)
    assert len(placed(plan)) == 3 and plan.gangs[0].placed  # minCount 3: three of four run


def test_basic_policy_places_pod_by_pod() -> None:
    plan, _ = plan_of(*TWO_NODES, workload_group("job", None), *[workload_member(f"w{i}") for i in range(4)])
    assert len(placed(plan)) == 3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("source", sorted(MEMBERS))
def test_topology_constraint_keeps_the_group_in_one_domain(source: str, backend: str) -> None:
    """Rack r1 has two 4-CPU nodes, rack r2 one 8-CPU node: four 2-CPU pods fit across both racks
    in many ways, but within one rack only as 2 + 2 in r1 or 4 in r2."""
    nodes = (node("a").cpu("4").memory("8Gi").label(RACK, "r1"), node("b").cpu("4").memory("8Gi").label(RACK, "r1"),
             node("c").cpu("8").memory("8Gi").label(RACK, "r2"), node("d").cpu("6").memory("8Gi"))
    group = workload_group("job", 4, key=RACK) if source == "workload-api" else kai_group("job", 4, RACK)
    blocker = pod("blocker").cpu("4").on("c")  # r2 keeps 4 CPU: two pods; r1 takes all four
    plan, snap = plan_of(*nodes, blocker, group, *[MEMBERS[source](f"w{i}") for i in range(4)], backend=backend)
    racks = {n.name: n.labels.get(RACK) for n in snap.nodes}
    assert len(placed(plan)) == 4
    assert {racks[p.node] for p in plan.placements} == {"r1"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("source", sorted(MEMBERS))
def test_a_gang_whose_podgroup_is_missing_is_never_placed(source: str, backend: str) -> None:
    """The regression: a 4-pod gang whose PodGroup is not in the snapshot was placed pod by pod
    (three of four here); it waits, and says why."""
    plan, _ = plan_of(*TWO_NODES, *[MEMBERS[source](f"w{i}") for i in range(4)], pod("solo").cpu("1"),
                      backend=backend)
    assert placed(plan) == {"solo"}
    reasons = {u.name: u.reasons for u in plan.unplaced}
    want = ('waiting for pods\'s pod group "job" to appear in scheduling queue' if source == "workload-api"
            else "waiting for its PodGroup default/job (scheduling.run.ai), which is not in the snapshot")
    assert all(reasons[f"w{i}"] == (want,) for i in range(4)), reasons
    assert not any(u.left_to_default_scheduler for u in plan.unplaced)


@pytest.mark.parametrize("source", sorted(MEMBERS))
def test_a_podgroup_of_an_unknown_version_leaves_its_pods(source: str) -> None:
    group = workload_group("job", 1, "v1alpha3") if source == "workload-api" else kai_group("job", 1, version="v2")
    plan, _ = plan_of(*TWO_NODES, group, *[MEMBERS[source](f"w{i}") for i in range(2)])
    assert placed(plan) == set()
    (reason,) = plan.unplaced[0].reasons
    assert "a version kubeplace does not read" in reason and group["apiVersion"] in reason


def test_both_versions_listed_are_one_gang() -> None:
    """A server serving the Workload API in two versions lists each PodGroup twice."""
    snap = snapshot_of(*TWO_NODES, workload_group("job", 2, "v1alpha2"), workload_group("job", 2, "v1beta1"),
                       workload_member("w0"), workload_member("w1"))
    assert [(g.key.name, g.origin, g.min_member) for g in snap.pod_groups] == [("job", "scheduling.k8s.io", 2)]


@pytest.mark.parametrize(("spec", "field"), [
    ({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}}, "spec.schedulingPolicy"),
    ({"schedulingPolicy": {}}, "spec.schedulingPolicy"),
    ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "spec.schedulingPolicy.gang.minCount"),
    ({"schedulingPolicy": {"gang": {}}}, "spec.schedulingPolicy.gang.minCount"),
    ({"schedulingPolicy": {"basic": {}}, "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}},
     "spec.schedulingConstraints.topology"),
    ({"schedulingPolicy": {"basic": {}}, "schedulingConstraints": {"topology": [{"key": ""}]}},
     "spec.schedulingConstraints.topology[0].key"),
])
def test_invalid_workload_api_podgroups_name_the_field(spec: dict[str, Any], field: str) -> None:
    obj = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
           "metadata": {"name": "job", "namespace": "ml"}, "spec": spec}
    with pytest.raises(InputError) as caught:
        parse_pod_group(obj, "groups.yaml")
    assert caught.value.field == field and "PodGroup ml/job" in str(caught.value) and "groups.yaml" in str(caught.value)


@pytest.mark.parametrize("source", sorted(MEMBERS))
def test_the_verifier_refuses_a_member_of_an_unreadable_gang(source: str) -> None:
    snap = snapshot_of(*TWO_NODES, MEMBERS[source]("w0"))
    (violation,) = verify(snap, [("default", "w0", "n1")])
    assert violation.rule == "Coscheduling" and "default/job is not in the snapshot" in violation.detail
    snap = snapshot_of(*TWO_NODES, workload_group("job", 1, "v1alpha9"), kai_group("job", 1, version="v9"),
                       MEMBERS[source]("w0"))
    (violation,) = verify(snap, [("default", "w0", "n1")])
    assert "a version kubeplace does not read" in violation.detail


@pytest.mark.parametrize("source", sorted(MEMBERS))
def test_the_verifier_checks_the_topology_of_the_new_sources(source: str) -> None:
    nodes = (node("a").cpu("4").memory("8Gi").label(RACK, "r1"), node("c").cpu("8").memory("8Gi").label(RACK, "r2"))
    group = workload_group("job", 2, key=RACK) if source == "workload-api" else kai_group("job", 2, RACK)
    snap = snapshot_of(*nodes, group, MEMBERS[source]("w0"), MEMBERS[source]("w1"))
    (violation,) = verify(snap, [("default", "w0", "a"), ("default", "w1", "c")])
    assert violation.rule == "Coscheduling" and violation.name == "w1" and violation.detail.startswith("gang ")
