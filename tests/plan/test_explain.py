"""Why a pod is not placed: the true reason, in the kube-scheduler's words, counted as it counts.

The kube-scheduler counts a node under the first filter of its default profile that rejects it
(NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, ...,
InterPodAffinity; out-of-tree filters after), every reason of that filter once, and sorts the
"count reason" strings (framework FitError.Error).
"""

from __future__ import annotations

from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.pipeline import make_plan
from tests.builders import node, pod, snapshot_of


def reasons(snap: Snapshot, name: str) -> tuple[str, ...]:
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1)).plan
    return next(u.reasons for u in plan.unplaced if u.name == name)


def share_node(name: str, devices: int) -> object:
    return (node(name).cpu("8").memory("8Gi").gpu(devices)
            .allocatable("koordinator.sh/gpu-core", str(100 * devices)))


def test_no_device_with_enough_free_share() -> None:
    # 70% of the node's GPU share is free, but as 35% on each of two devices
    snap = snapshot_of(share_node("g", 2),
                       *(pod(f"u{i}", "sys").scheduler("x").request("koordinator.sh/gpu-core", "65").on("g")
                         for i in range(2)),
                       pod("half").cpu("1").request("koordinator.sh/gpu-core", "50"))
    assert reasons(snap, "half") == ("0/1 nodes are available: 1 Insufficient GPU devices.",)


def test_taints_count_before_node_affinity() -> None:
    snap = snapshot_of(node("n").cpu("8").taint("dedicated", "x"), pod("p").cpu("1").selector("zone", "a"))
    assert reasons(snap, "p") == ("0/1 nodes are available: 1 node(s) had untolerated taint.",)


def test_resources_count_before_inter_pod_anti_affinity() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    snap = snapshot_of(node("n").cpu("1"), pod("guard", "default").scheduler("x").spec("affinity", anti).on("n"),
                       pod("web").cpu("2").label("app", "web"))
    assert reasons(snap, "web") == ("0/1 nodes are available: 1 Insufficient cpu.",)


def test_host_ports_taken_by_the_plan() -> None:
    snap = snapshot_of(node("n").cpu("8"), pod("a").cpu("1").host_port(80), pod("b").cpu("1").host_port(80))
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1)).plan
    assert plan.summary.pods_placed == 1
    assert plan.unplaced[0].reasons == (
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports.",)


def test_reasons_sorted_as_the_scheduler_sorts_them() -> None:
    snap = snapshot_of(*(node(f"small{i}").cpu("1") for i in range(2)),
                       *(node(f"tainted{i}").cpu("8").taint("dedicated", "x") for i in range(10)),
                       pod("p").cpu("2"))
    assert reasons(snap, "p") == (
        "0/12 nodes are available: 10 node(s) had untolerated taint, 2 Insufficient cpu.",)


def test_too_many_pods() -> None:
    snap = snapshot_of(node("n").cpu("8").pods(1), pod("r", "sys").scheduler("x").on("n"), pod("p").cpu("1"))
    assert reasons(snap, "p") == ("0/1 nodes are available: 1 Too many pods.",)
