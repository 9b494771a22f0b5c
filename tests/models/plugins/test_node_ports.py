"""models/plugins/node_ports/: one definition of a host port conflict, the kube-scheduler's
(``kube-scheduler/framework/types.go`` HostPortInfo.CheckConflict: ``0.0.0.0`` or no IP is every
address, ``::`` is one address), shared by the filter, the constraint, the verifier's per-node
check and the emulation."""

from __future__ import annotations

import pytest

from kubeplace.kube.objects import HostPort, Node, Pod, Snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.framework import RunContext
from kubeplace.models.plugins import node_ports
from kubeplace.models.plugins.node_ports import emulate, verify
from kubeplace.plan.checks import verify_plan as checked_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.verify import verify as verify_plan
from kubeplace.solver.emulate.node_state import Cluster
from kubeplace.solver.emulate.scheduler import emulate as emulate_scheduler

CAPACITY = {"cpu": 1000, "pods": 10}
KUBE_SCHEDULER = [  # (port the node's pod holds, port the new pod asks, CheckConflict's answer)
    (HostPort(80, "TCP", "0.0.0.0"), HostPort(80, "TCP", "::"), True),
    (HostPort(80, "TCP", ""), HostPort(80, "TCP", "::"), True),
    (HostPort(80, "TCP", "::"), HostPort(80, "TCP", "::"), True),
    (HostPort(80, "TCP", "::"), HostPort(80, "TCP", "0.0.0.0"), True),
    (HostPort(80, "TCP", "::"), HostPort(80, "TCP", ""), True),
    (HostPort(80, "TCP", "::"), HostPort(80, "TCP", "10.0.0.1"), False),
    (HostPort(80, "TCP", "10.0.0.1"), HostPort(80, "TCP", "::"), False),
    (HostPort(80, "TCP", "::"), HostPort(80, "TCP", "::1"), False),
    (HostPort(80, "UDP", "::"), HostPort(80, "TCP", "::"), False),
    (HostPort(80, "TCP", "::"), HostPort(81, "TCP", "::"), False),
]


def _cluster(held: HostPort) -> Snapshot:
    running = Pod("default", "running", node_name="n1", host_ports=(held,))
    return Snapshot(nodes=(Node("n1", allocatable=CAPACITY),), pending=(), bound=(running,))


@pytest.mark.parametrize(("held", "asked", "conflict"), KUBE_SCHEDULER)
def test_the_filter_the_verifier_and_the_emulation_give_the_kube_schedulers_answer(
        held: HostPort, asked: HostPort, conflict: bool) -> None:
    snapshot = _cluster(held)
    pod = Pod("default", "p", host_ports=(asked,))
    [node] = snapshot.nodes
    assert node_ports.build(None, RunContext(snapshot)).filter(pod, [node]).tolist() == [not conflict]
    assert bool(list(verify.check_node(pod, 1, node, snapshot.bound))) == conflict
    assert emulate.admits(pod, Cluster(snapshot, (pod,))).tolist() == [not conflict]


@pytest.mark.parametrize(("held", "asked", "conflict"), KUBE_SCHEDULER)
def test_two_pending_pods_share_a_node_unless_their_ports_conflict(held: HostPort, asked: HostPort,
                                                                   conflict: bool) -> None:
    """The constraint: two pending pods of different classes, one node with room for both."""
    first, second = Pod("default", "a", host_ports=(held,)), Pod("default", "b", host_ports=(asked,))
    snapshot = Snapshot(nodes=(Node("n1", allocatable=CAPACITY),), pending=(first, second), bound=())
    assert len(emulate_scheduler(snapshot).placements) == (1 if conflict else 2)
    assert bool(verify_plan(snapshot, [("default", "a", "n1"), ("default", "b", "n1")])) == conflict
    config, profile = Configuration(), Profile()
    planned = make_plan(snapshot, config, profile, SolverSettings(backend="cpsat", time_limit=5, workers=1))
    assert checked_plan(snapshot, planned.plan.placements, config, profile) == []
    assert len(planned.plan.placements) == (1 if conflict else 2)


def test_a_plan_on_a_taken_port_names_the_other_pod() -> None:
    snapshot = _cluster(HostPort(80, "TCP", "0.0.0.0"))
    snapshot = Snapshot(snapshot.nodes, (Pod("default", "p", host_ports=(HostPort(80, "TCP", "::"),)),),
                        snapshot.bound)
    [violation] = verify_plan(snapshot, [("default", "p", "n1")])
    assert (violation.rule, violation.detail) == ("NodePorts", "host port TCP/80 already used by default/running")
