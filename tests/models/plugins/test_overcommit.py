"""models/plugins/overcommit/: the verifier's check over the plan counts every copy a stand-in
places, reads the profile's args, and lets a labelled node whose measured load is low be filled
to all of its allocatable."""

from __future__ import annotations

from kubeplace.kube.objects import Node, NodeMetrics, Pod, Snapshot
from kubeplace.kube.plan_view import Placed, PlanView
from kubeplace.models.plugins.overcommit import OvercommitArgs, verify

ARGS = OvercommitArgs(headroom=0.5)
PLAIN = Node("plain", allocatable={"cpu": 4000, "memory": 8000})
LABELLED = Node("labelled", labels={"overcommit": "true"}, allocatable={"cpu": 4000, "memory": 8000})


def snapshot(*metrics: NodeMetrics) -> Snapshot:
    running = Pod("default", "running", node_name="plain", requests={"cpu": 1000})
    return Snapshot((PLAIN, LABELLED), (), (running,), node_metrics={m.node: m for m in metrics})


def on(snapshot: Snapshot, node: Node, pod: Pod, count: int = 1) -> PlanView:
    """The plan that places ``count`` copies of ``pod`` on ``node``."""
    return PlanView(snapshot, (Placed(pod, node, count),))


def test_copies_of_a_stand_in_count_against_the_headroom() -> None:
    stand_in = Pod("default", "followers", requests={"cpu": 500}, copies=4)
    assert list(verify.check_plan(on(snapshot(), PLAIN, stand_in, 2), ARGS)) == []  # 1000m + 2 x 500m
    [(namespace, name, node, detail)] = verify.check_plan(on(snapshot(), PLAIN, stand_in, 3), ARGS)
    assert (namespace, name, node) == ("default", "followers", "plain")
    assert detail == "cpu requests 2500m above 0.5 of allocatable 4000m (headroom 2000m)"


def test_a_labelled_node_measured_cool_is_filled_to_its_allocatable() -> None:
    big = Pod("default", "big", requests={"cpu": 4000})
    assert list(verify.check_plan(on(snapshot(NodeMetrics("labelled", {"cpu": 100, "memory": 100}, 0.0)),
                                     LABELLED, big), ARGS)) == []
    assert len(list(verify.check_plan(on(snapshot(), LABELLED, big), ARGS))) == 1  # no metrics: ordinary
    assert list(verify.check_plan(on(snapshot(), LABELLED, big), OvercommitArgs())) == []  # headroom 1
