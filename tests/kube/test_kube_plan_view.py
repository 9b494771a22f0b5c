"""kube.plan_view: the plan as the rules' checks over the whole plan read it, indexed once."""

from __future__ import annotations

from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.kube.plan_view import Placed, PlanView


def test_the_placed_and_the_bound_pods_by_node_in_plan_order() -> None:
    n1, n2 = Node("n1"), Node("n2")
    a, b, c = Pod("default", "a"), Pod("default", "b", copies=3), Pod("default", "c")
    running = Pod("default", "running", node_name="n2")
    view = PlanView(Snapshot((n1, n2), (a, b, c), (running,)), (Placed(b, n1, 2), Placed(a, n2), Placed(c, n1),
                                                                 Placed(b, n2)))
    assert view.by_node == {"n1": ((b, 2), (c, 1)), "n2": ((a, 1), (b, 1))}
    assert view.bound_by_node == {"n2": (running,)}
    assert view.volume_choices is None and view.claim_allocations is None
