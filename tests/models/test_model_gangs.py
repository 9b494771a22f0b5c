"""Gangs: every PodGroup flavour, all or nothing, waiting, minResources, running members."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.gangs import parse_pod_group
from kubeplace.models.config import Configuration, Profile
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Plan
from kubeplace.plan.verify import verify
from kubeplace.solver.solve import SolverOptions
from tests.builders import PodBuilder, node, pod, snapshot_of


def pod_group(name: str, min_member: int, api: str = "scheduling.x-k8s.io/v1alpha1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": min_member, **spec}}


def plan_of(*objects: Any, backend: str = "cpsat") -> Plan:
    snap = snapshot_of(*objects)
    plan = make_plan(snap, Configuration(), Profile(), SolverOptions(backend=backend, time_limit=5, workers=1)).plan
    assert verify(snap, [(p.namespace, p.name, p.node) for p in plan.placements]) == []
    return plan


def placed(plan: Plan) -> set[str]:
    return {p.name for p in plan.placements}


MEMBERSHIP = {
    "scheduler-plugins": ("scheduling.x-k8s.io/v1alpha1", lambda b, g: b.label("scheduling.x-k8s.io/pod-group", g)),
    "older-sigs": ("scheduling.sigs.k8s.io/v1alpha1", lambda b, g: b.label("pod-group.scheduling.sigs.k8s.io", g)),
    "volcano": ("scheduling.volcano.sh/v1beta1", lambda b, g: b.annotation("scheduling.k8s.io/group-name", g)),
}


@pytest.mark.parametrize("flavour", sorted(MEMBERSHIP))
def test_each_podgroup_flavour_is_all_or_nothing(flavour: str) -> None:
    api, join = MEMBERSHIP[flavour]
    members = [join(pod(f"w{i}").cpu("2"), "job") for i in range(3)]
    plan = plan_of(node("n").cpu("4").memory("8Gi"), pod_group("job", 3, api), *members, pod("solo").cpu("1"))
    assert placed(plan) == {"solo"}  # 3 x 2 cpu never fit on 4 cpu; two would, but not as a gang
    (gang,) = plan.gangs
    assert not gang.placed and gang.min_member == 3
    reasons = {u.name: u.reasons for u in plan.unplaced}
    assert reasons["w0"][0].startswith("gang not placed")


def test_plain_labels_without_any_crd() -> None:
    def member(name: str) -> PodBuilder:
        return pod(name).cpu("1").label("kubeplace.io/gang", "g").annotation("kubeplace.io/gang-min-member", "2")
    plan = plan_of(node("n").cpu("4").memory("8Gi"), member("a"), member("b"))
    assert placed(plan) == {"a", "b"} and plan.gangs[0].placed


@pytest.mark.parametrize("backend", ["cpsat", "cbc"])
def test_mixed_shape_gang_placed_where_greedy_fails(backend: str) -> None:
    # 7,4,3,2,2 cpu on nodes of 10 and 8: largest-first best-fit strands one pod; the exact
    # model places all five, so the gang runs.
    join = MEMBERSHIP["scheduler-plugins"][1]
    members = [join(pod(f"m{i}").cpu(str(c)), "mixed") for i, c in enumerate((7, 4, 3, 2, 2))]
    plan = plan_of(node("a").cpu("10").memory("8Gi"), node("b").cpu("8").memory("8Gi"),
                   pod_group("mixed", 5), *members, backend=backend)
    assert placed(plan) == {f"m{i}" for i in range(5)} and plan.gangs[0].placed


def test_a_gang_waits_for_its_members() -> None:
    join = MEMBERSHIP["scheduler-plugins"][1]
    plan = plan_of(node("n").cpu("8").memory("8Gi"), pod_group("job", 4, scheduleTimeoutSeconds=30),
                   *[join(pod(f"w{i}").cpu("1"), "job") for i in range(2)])
    assert placed(plan) == set()
    assert plan.gangs[0].reason.startswith("gang waiting: 2 of minMember 4 pods exist") or \
        plan.gangs[0].reason.startswith("gang timed out")


def test_min_resources_must_be_met() -> None:
    join = MEMBERSHIP["scheduler-plugins"][1]
    plan = plan_of(node("n").cpu("8").memory("8Gi"), pod_group("job", 2, minResources={"cpu": "6"}),
                   *[join(pod(f"w{i}").cpu("2"), "job") for i in range(2)])
    assert placed(plan) == set()


def test_running_members_count_towards_min_member() -> None:
    join = MEMBERSHIP["scheduler-plugins"][1]
    plan = plan_of(node("n").cpu("8").memory("8Gi"), pod_group("job", 3),
                   join(pod("w0").cpu("1"), "job").on("n"), *[join(pod(f"w{i}").cpu("1"), "job") for i in (1, 2)])
    assert placed(plan) == {"w1", "w2"} and plan.gangs[0].running == 1


def test_gangs_are_listed_in_the_json_plan() -> None:
    join = MEMBERSHIP["volcano"][1]
    plan = plan_of(node("n").cpu("8").memory("8Gi"), pod_group("job", 2, "scheduling.volcano.sh/v1beta1"),
                   *[join(pod(f"w{i}").cpu("1"), "job") for i in range(2)])
    (entry,) = plan.to_dict()["gangs"]
    assert entry == {"namespace": "default", "name": "job", "minMember": 2, "members": ["w0", "w1"], "running": 0,
                     "placedMembers": 2, "placed": True}


def test_bad_min_member_is_a_clear_error() -> None:
    with pytest.raises(InputError, match=r"spec.minMember: got 0 \(expected an integer >= 1\)"):
        parse_pod_group(pod_group("x", 0), "f.yaml")
