"""Room held for a nominated pod: the kube-scheduler adds the pods nominated to a node with a
priority at least the pod's before it filters the node (RunFilterPluginsWithNominatedPods), so
a pod of lower or equal priority does not take the room a preemptor waits for while its victim
terminates; one of higher priority may. Model, verifier and emulation agree."""

from __future__ import annotations

import pytest

from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.verify import verify
from kubeplace.solver.emulate.scheduler import emulate
from tests.builders import PodBuilder, node, pod, snapshot_of


def cluster(*pending: PodBuilder) -> Snapshot:
    """One node of 4 CPUs: a victim of 3 terminating, and the preemptor (priority 100, another
    scheduler's) nominated there for its 3 CPUs."""
    return snapshot_of(
        node("n1").cpu("4").memory("8Gi"), node("n2").cpu("4").memory("8Gi").taint("other"),
        pod("victim").cpu("3").on("n1").deleting(),
        pod("preemptor").cpu("3").priority(100).scheduler("default-scheduler").status("nominatedNodeName", "n1"),
        *pending,
    )


def placed(snap: Snapshot, backend: str) -> dict[str, str]:
    config, profile = Configuration(), Profile()
    result = make_plan(snap, config, profile, SolverSettings(backend=backend, time_limit=5, workers=1))
    assert verify_plan(snap, result.plan.placements, config, profile) == []
    return {p.name: p.node for p in result.plan.placements}


def test_the_preemptor_is_read_as_nominated_not_pending() -> None:
    snap = cluster(pod("low").cpu("1").priority(10))
    assert [p.name for p in snap.nominated] == ["preemptor"] and [p.name for p in snap.pending] == ["low"]


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
@pytest.mark.parametrize(("priority", "where"), [(10, {}), (100, {}), (1000, {"p": "n1"})],
                         ids=["lower-kept-out", "equal-kept-out", "higher-takes-it"])
def test_the_room_is_kept_from_lower_and_equal_priority_and_given_to_higher(
        backend: str, priority: int, where: dict[str, str]) -> None:
    snap = cluster(pod("p").cpu("1").priority(priority))
    assert placed(snap, backend) == where


def test_a_node_with_room_beside_the_held_room_still_takes_lower_pods() -> None:
    snap = snapshot_of(node("n1").cpu("8").memory("8Gi"), pod("victim").cpu("3").on("n1").deleting(),
                       pod("preemptor").cpu("3").priority(100).scheduler("default-scheduler")
                       .status("nominatedNodeName", "n1"),
                       pod("low-a").cpu("1").priority(10), pod("low-b").cpu("1").priority(10),
                       pod("low-c").cpu("1").priority(10))
    assert placed(snap, "cpsat") == {"low-a": "n1", "low-b": "n1"}


def test_the_verifier_refuses_a_lower_pod_in_the_held_room() -> None:
    snap = cluster(pod("low").cpu("1").priority(10), pod("high").cpu("1").priority(1000))
    assert verify(snap, [("default", "high", "n1")]) == []
    [violation] = verify(snap, [("default", "low", "n1")])
    assert (violation.name, violation.rule) == ("low", "NodeResourcesFit")
    assert "the room of default/preemptor (nominated, priority >= 10) is held" in violation.detail


@pytest.mark.parametrize(("priority", "placements"), [(10, ()), (1000, (("default", "p", "n1"),))])
def test_the_emulated_kube_scheduler_keeps_the_room_too(priority: int, placements: tuple[object, ...]) -> None:
    assert emulate(cluster(pod("p").cpu("1").priority(priority))).placements == placements


def test_the_host_ports_of_a_nominated_pod_are_held_too() -> None:
    def snap(priority: int) -> Snapshot:
        return snapshot_of(node("n1").cpu("8").memory("8Gi"), node("n2").cpu("8").memory("8Gi"),
                           pod("preemptor").cpu("1").host_port(9100).priority(100).scheduler("default-scheduler")
                           .status("nominatedNodeName", "n1"),
                           pod("p").cpu("1").host_port(9100).priority(priority))

    assert placed(snap(10), "cpsat") == {"p": "n2"}
    assert emulate(snap(10)).placements == (("default", "p", "n2"),)
    assert [v.rule for v in verify(snap(10), [("default", "p", "n1")])] == ["NodePorts"]
    assert verify(snap(1000), [("default", "p", "n1")]) == []
