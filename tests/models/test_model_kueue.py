"""Kueue-admitted workloads: pods sharing ``kueue.x-k8s.io/workload`` were admitted together and
their capacity is promised (with topology-aware scheduling, pinned to the nodes Kueue chose): they
are placed together, and no other pod takes a node a pending admitted pod was promised."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.gangs import gang_of
from kubeplace.kube.objects import GangKey
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Plan
from kubeplace.plan.verify import verify
from tests.builders import PodBuilder, node, pod, snapshot_of

BACKENDS = ["cpsat", "highs"]
HOST = "kubernetes.io/hostname"


def admitted(name: str, workload: str, host: str) -> PodBuilder:
    """A pod of an admitted Workload, ungated by Kueue's TAS with its node pinned."""
    return (pod(name).cpu("4").annotation("kueue.x-k8s.io/workload", workload).label("kueue.x-k8s.io/tas", "true")
            .label("kueue.x-k8s.io/podset", "main").selector(HOST, host))


def plan_of(*objects: Any, backend: str) -> Plan:
    snap = snapshot_of(*objects)
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(backend=backend, time_limit=5, workers=1)).plan
    assert verify(snap, [(p.namespace, p.name, p.node) for p in plan.placements]) == [] and plan.summary.verified
    return plan


NODES = [node(f"n{i}").cpu("4").memory("8Gi") for i in range(4)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_other_pod_takes_a_node_promised_to_an_admitted_workload(backend: str) -> None:
    """Four nodes, each promised to one pod of workload w; a pod of higher priority from another
    gang fits any node. Taking one would leave w at 3 of 4."""
    w = [admitted(f"w{i}", "job-w-1a2b3", f"n{i}") for i in range(4)]
    other = [pod(f"o{i}").cpu("4").priority(1000).label("kubeplace.io/gang", "other") for i in range(1)]
    plan = plan_of(*NODES, *w, *other, backend=backend)
    assert {p.name: p.node for p in plan.placements} == {f"w{i}": f"n{i}" for i in range(4)}
    assert [u.name for u in plan.unplaced] == ["o0"]
    assert {g.name: g.placed for g in plan.gangs} == {"job-w-1a2b3": True, "other": False}


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_admitted_workload_is_placed_whole_or_not_at_all(backend: str) -> None:
    """One pinned node is full: the rest of the workload waits, and the others use the room."""
    w = [admitted(f"w{i}", "job-w-1a2b3", f"n{i}") for i in range(4)]
    plan = plan_of(*NODES, pod("full").cpu("4").on("n3"), *w, pod("o0").cpu("4"), backend=backend)
    assert [p.name for p in plan.placements] == ["o0"]
    assert {g.name: (g.min_member, g.placed) for g in plan.gangs} == {"job-w-1a2b3": (4, False)}


def test_running_members_count_and_the_gang_is_the_workload() -> None:
    snap = snapshot_of(*NODES, admitted("w0", "wl", "n0").on("n0"), admitted("w1", "wl", "n1"))
    assert gang_of(snap.pending[0]) == GangKey("default", "wl")
    assert [(g.key.name, g.min_member, g.origin) for g in snap.pod_groups] == [("wl", 2, "kueue.x-k8s.io")]


def workload(name: str, hosts: list[str], podset: str = "main") -> dict[str, Any]:
    """An admitted Kueue Workload whose PodSet has one pod per host (topology-aware scheduling)."""
    assignment = {"levels": [HOST], "domains": [{"values": [h], "count": 1} for h in hosts]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"queueName": "team", "podSets": [{"name": podset, "count": len(hosts), "template": {}}]},
            "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": podset, "count": len(hosts), "topologyAssignment": assignment}]}}}


def gated(name: str, wl: str) -> PodBuilder:
    """A pod of an admitted Workload that Kueue has not ungated yet (no nodeSelector so far)."""
    return (pod(name).cpu("4").annotation("kueue.x-k8s.io/workload", wl).label("kueue.x-k8s.io/tas", "true")
            .label("kueue.x-k8s.io/podset", "main").gate("kueue.x-k8s.io/topology"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_room_promised_to_pods_kueue_still_gates_is_held(backend: str) -> None:
    """w0 runs on n0, w1 is ungated (pinned to n1), w2 and w3 still gated: n2 and n3 are theirs,
    not the high-priority pod's."""
    objects = [*NODES, workload("wl", ["n0", "n1", "n2", "n3"]), admitted("w0", "wl", "n0").on("n0"),
               admitted("w1", "wl", "n1"), gated("w2", "wl"), gated("w3", "wl"),
               pod("o0").cpu("4").priority(1000)]
    snap = snapshot_of(*objects)
    assert [(p.name, p.node_selector.get(HOST), p.reserved_for) for p in snap.reserved] == [
        ("w2.gated", "n2", "default/w2"), ("w3.gated", "n3", "default/w3")]
    plan = plan_of(*objects, backend=backend)
    assert {p.name: p.node for p in plan.placements} == {"w1": "n1"}
    assert {p.name: p.node for p in plan.reservations} == {"w2.gated": "n2", "w3.gated": "n3"}
    assert [u.name for u in plan.unplaced] == ["o0"]


def test_without_the_workload_object_gated_pods_hold_nothing() -> None:
    snap = snapshot_of(*NODES, admitted("w1", "wl", "n1"), gated("w2", "wl"))
    assert snap.reserved == ()


def test_a_bad_topology_assignment_names_its_field() -> None:
    bad = workload("wl", ["n0"])
    bad["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["domains"][0]["values"] = ["a", "b"]
    with pytest.raises(InputError) as caught:
        snapshot_of(*NODES, bad)
    assert caught.value.field == "status.admission.podSetAssignments[0].topologyAssignment.domains[0].values"
    assert "Workload wl" in str(caught.value) and "one value per level" in str(caught.value)
