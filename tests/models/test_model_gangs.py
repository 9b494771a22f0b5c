"""Gangs: every PodGroup flavour, all or nothing, waiting, minResources, running members."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.gangs import min_resources, parse_pod_group
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Plan
from kubeplace.plan.verify import verify
from tests.builders import PodBuilder, node, pod, snapshot_of


def pod_group(name: str, min_member: int, api: str = "scheduling.x-k8s.io/v1alpha1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": min_member, **spec}}


def plan_of(*objects: Any, backend: str = "cpsat") -> Plan:
    snap = snapshot_of(*objects)
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(backend=backend, time_limit=5, workers=1)).plan
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


def test_scheduler_plugins_min_resources_is_checked_against_the_cluster_not_summed_over_members() -> None:
    # PreFilter's CheckClusterResource: 6 CPU are free in the cluster, so the group is let through
    # although its two members request 4 together.
    join = MEMBERSHIP["scheduler-plugins"][1]
    plan = plan_of(node("n").cpu("8").memory("8Gi"), pod_group("job", 2, minResources={"cpu": "6"}),
                   *[join(pod(f"w{i}").cpu("2"), "job") for i in range(2)])
    assert placed(plan) == {"w0", "w1"} and plan.gangs[0].placed


def test_scheduler_plugins_min_resources_sums_free_room_over_nodes_own_pods_counted_free() -> None:
    # Two nodes of 4 CPU, one member runs on a (3 CPU): free 8 - 3 - 1 (another pod) + 3 (its own) = 7.
    join = MEMBERSHIP["scheduler-plugins"][1]
    objects = (node("a").cpu("4").memory("8Gi"), node("b").cpu("4").memory("8Gi"),
               join(pod("r").cpu("3"), "job").on("a"), pod("other").cpu("1").on("b"),
               join(pod("w").cpu("1"), "job"))
    assert placed(plan_of(*objects, pod_group("job", 2, minResources={"cpu": "7"}))) == {"w"}
    plan = plan_of(*objects, pod_group("job", 2, minResources={"cpu": "7001m"}))
    assert placed(plan) == set()
    assert plan.gangs[0].reason == ("PodGroup default/job minResources do not fit in the cluster's free resources: "
                                    "resource gap: cpu=1m")
    assert plan.unplaced[0].reasons[0] == plan.gangs[0].reason


def test_scheduler_plugins_also_asks_for_min_member_pod_slots() -> None:
    join = MEMBERSHIP["scheduler-plugins"][1]
    plan = plan_of(node("n").cpu("8").memory("8Gi").pods(1), pod_group("job", 2, minResources={"cpu": "1"}),
                   *[join(pod(f"w{i}").cpu("1"), "job") for i in range(2)])
    assert placed(plan) == set() and plan.gangs[0].reason.endswith("resource gap: pods=1")


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
    with pytest.raises(InputError, match=r"spec.minMember: 0 is out of range \(expected an integer from 1 to"):
        parse_pod_group(pod_group("x", 0), "f.yaml")


def test_running_count_is_every_running_member_even_beyond_min_member() -> None:
    join = MEMBERSHIP["scheduler-plugins"][1]
    running = [join(pod(f"r{i}").cpu("1"), "job").on("n") for i in range(3)]
    pending = [join(pod(f"w{i}").cpu("1"), "job") for i in range(2)]
    plan = plan_of(node("n").cpu("8").memory("8Gi"), pod_group("job", 2), *running, *pending)
    (gang,) = plan.gangs
    assert gang.running == 3 and gang.min_member == 2 and gang.placed and placed(plan) == {"w0", "w1"}


VOLCANO = "scheduling.volcano.sh/v1beta1"
VOLCANO_JOB_MIN_RESOURCES = {  # as Volcano's job controller writes them for 2 pods of 1500m, 1Gi, 1 GPU
    "count/pods": "2", "pods": "2", "cpu": "3", "requests.cpu": "3", "limits.cpu": "1500m",
    "memory": "2Gi", "requests.memory": "2Gi", "limits.memory": "4Gi",
    "nvidia.com/gpu": "2", "requests.nvidia.com/gpu": "2",
}


def volcano_member(name: str) -> PodBuilder:
    return MEMBERSHIP["volcano"][1](pod(name).cpu("1500m").memory("1Gi").gpu(1), "job")


def test_volcano_quota_style_min_resources_are_read_as_volcano_does() -> None:
    plan = plan_of(node("n").cpu("8").memory("16Gi").gpu(4),
                   pod_group("job", 2, VOLCANO, minResources=VOLCANO_JOB_MIN_RESOURCES),
                   volcano_member("w0"), volcano_member("w1"))
    assert placed(plan) == {"w0", "w1"} and plan.gangs[0].placed


@pytest.mark.parametrize(("minimum", "fits"), [("8", True), ("9", False)])
def test_requests_dot_name_is_the_plain_request(minimum: str, fits: bool) -> None:
    join = MEMBERSHIP["scheduler-plugins"][1]
    plan = plan_of(node("n").cpu("8").memory("8Gi"), pod_group("job", 2, minResources={"requests.cpu": minimum}),
                   *[join(pod(f"w{i}").cpu("2"), "job") for i in range(2)])
    assert bool(placed(plan)) is fits


def volcano_group(name: str, min_member: int, phase: str = "", **min_resources: str) -> dict[str, Any]:
    group = pod_group(name, min_member, VOLCANO, minResources=min_resources)
    return {**group, "status": {"phase": phase}} if phase else group


def spark(name: str, cpu: str) -> PodBuilder:
    return MEMBERSHIP["volcano"][1](pod(name).cpu(cpu).memory("1Gi"), "spark")


SPARK_MIN_RESOURCES = {"cpu": "9", "memory": "5Gi"}
"""As spark-operator writes them: the driver (1 CPU) and its 4 executors (2 CPU each), 1Gi each."""


def test_a_spark_driver_whose_min_resources_count_its_executors_is_placed() -> None:
    # Volcano enqueues the group (9 CPU within 1.2 x 16 idle) and places the driver: minMember 1.
    plan = plan_of(node("a").cpu("8").memory("8Gi"), node("b").cpu("8").memory("8Gi"),
                   volcano_group("spark", 1, "Pending", **SPARK_MIN_RESOURCES), spark("driver", "1"))
    assert placed(plan) == {"driver"} and plan.gangs[0].placed


def test_pending_executors_of_a_running_application_are_placed_individually() -> None:
    # minMember met by the running driver: the executors are placed one by one, as many as fit.
    plan = plan_of(node("a").cpu("6").memory("8Gi"), volcano_group("spark", 1, "Running", **SPARK_MIN_RESOURCES),
                   spark("driver", "1").on("a"), *[spark(f"exec-{i}", "2") for i in range(4)])
    assert len(placed(plan)) == 2 and plan.gangs[0].placed


@pytest.mark.parametrize(("phase", "admitted"), [("", False), ("Pending", False), ("Inqueue", True),
                                                 ("Running", True)])
def test_volcano_holds_a_group_back_only_while_the_whole_cluster_cannot_enqueue_it(phase: str, admitted: bool) -> None:
    # 1.2 x 16 CPU - 1 used = 18.2 idle: a minResources of 19 CPU is not enqueued; once enqueued it is
    # never checked again.
    plan = plan_of(node("a").cpu("8").memory("8Gi"), node("b").cpu("8").memory("8Gi"), pod("other").cpu("1").on("a"),
                   volcano_group("spark", 1, phase, cpu="19"), spark("driver", "1"))
    assert (placed(plan) == {"driver"}) is admitted
    if not admitted:
        assert plan.gangs[0].reason == ("PodGroup default/spark is not enqueued: resource in cluster is overused "
                                        "(minResources cpu=19000m over the idle room of the cluster)")


def test_volcano_enqueue_counts_the_min_resources_of_groups_already_inqueue() -> None:
    plan = plan_of(node("a").cpu("8").memory("8Gi"), volcano_group("spark", 1, cpu="5"), spark("driver", "1"),
                   {**volcano_group("other", 1, "Inqueue", cpu="5"), "metadata": {"name": "other",
                                                                                  "namespace": "default"}})
    assert placed(plan) == set()  # 5 + 5 > 9.6


def test_min_resources_quota_names() -> None:
    assert min_resources({"limits.cpu": "1500m", "count/pods": 3, "requests.cpu": "2500m", "cpu": "2",
                          "nvidia.com/gpu": "1500m", "requests.memory": "1Gi"}) == {
        "cpu": 2500, "nvidia.com/gpu": 2, "memory": 1 << 30}
    with pytest.raises(InputError, match=r"spec.minResources.limits.cpu: invalid quantity 'lots'"):
        min_resources({"limits.cpu": "lots"})


def test_min_member_annotation_below_one_is_refused() -> None:
    member = pod("a").label("kubeplace.io/gang", "g").annotation("kubeplace.io/gang-min-member", "-3")
    with pytest.raises(InputError, match=r"Pod default/a: metadata.annotations.kubeplace.io/gang-min-member: got '-3'"):
        snapshot_of(node("n").cpu("1"), member)
