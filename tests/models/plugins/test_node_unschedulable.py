"""models/plugins/node_unschedulable/: the filter and the independent verifier check agree on
cordoned nodes, and a plan onto a cordoned node is refused."""

from __future__ import annotations

import pytest

from kubeplace.kube.objects import NO_EXECUTE, NO_SCHEDULE, Node, Pod, Snapshot, Toleration
from kubeplace.models.plugins import node_unschedulable
from kubeplace.models.plugins.node_unschedulable import verify
from kubeplace.plan.verify import verify as verify_plan

NODES = [Node("open", allocatable={"cpu": 1000, "pods": 10}),
         Node("cordoned", unschedulable=True, allocatable={"cpu": 1000, "pods": 10})]


@pytest.mark.parametrize("tolerations", [
    (), (Toleration("node.kubernetes.io/unschedulable", "Exists", "", NO_SCHEDULE),),
    (Toleration("node.kubernetes.io/unschedulable", "Exists", "", NO_EXECUTE),), (Toleration("", "Exists", "", ""),),
    (Toleration("node.kubernetes.io/unschedulable", "Equal", "", ""),)])
def test_the_filter_and_the_verifier_check_agree(tolerations: tuple[Toleration, ...]) -> None:
    pod = Pod("default", "p", tolerations=tolerations)
    admitted = node_unschedulable.NodeUnschedulable().filter(pod, NODES).tolist()
    assert admitted == [not list(verify.check_pair(pod, n, Snapshot((), (), ()), None)) for n in NODES]


def test_a_plan_onto_a_cordoned_node_is_refused_by_the_rules_check() -> None:
    snapshot = Snapshot(nodes=tuple(NODES), pending=(Pod("default", "p", requests={"cpu": 100}),), bound=())
    [violation] = verify_plan(snapshot, [("default", "p", "cordoned")])
    assert (violation.rule, violation.detail) == ("NodeUnschedulable", "node is unschedulable (cordoned)")
