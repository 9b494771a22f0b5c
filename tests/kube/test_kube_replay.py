"""kube.replay: the walk over a plan that the replayed rules share (placements it cannot replay
are left to the verifier's other checks, in the plan's order)."""

from __future__ import annotations

from kubeplace.plan.verify import replay_plan
from tests.builders import snapshot_of
from tests.models.plugins.test_topology_spread import ZONES, c, spread


def test_unknown_and_duplicate_placements_are_left_to_verify() -> None:
    snap = snapshot_of(*ZONES, spread(c(1, "zone")))
    plan = [("default", "p", "node-a"), ("default", "p", "node-x"), ("default", "ghost", "node-a"),
            ("default", "p", "nowhere")]
    result = replay_plan(snap, plan)
    assert result.violations == () and result.order == tuple(plan)
