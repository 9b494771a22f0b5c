"""jobset-racks offline, both waves as the bench runner makes them: the leaders alone (their Jobs
in the snapshot), then the followers of the placed leaders, pinned to their leader's rack. Planned
with room reserved for the followers, every pod is placed; without, a 4-pod job's leader may take
a 2-node rack and strand half its job."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubeplace.kube.parse import build_snapshot
from kubeplace.models.config import SolverSettings
from kubeplace.models.config_load import parse_configuration
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan, with_stand_ins
from kubeplace.plan.plan import Plan
from kubeplace_bench.cluster import KUBEPLACE, KUBEPLACE_CONFIG
from kubeplace_bench.cluster_rules import RACK, RULE_SCENARIOS
from kubeplace_bench.cluster_scenarios import Scenario

Manifest = dict[str, Any]
NAMESPACE = "bench-kubeplace"


def _ours(template: Manifest, node: str = "") -> Manifest:
    body = copy.deepcopy(template)
    body["metadata"]["namespace"] = NAMESPACE
    body["spec"]["schedulerName"] = KUBEPLACE
    if node:
        body["spec"]["nodeName"] = node
    return body


def _plan(scenario: Scenario, pods: list[Manifest], backend: str) -> tuple[Plan, int]:
    objects = [*scenario.nodes, *(_ours(o) for o in scenario.objects), *pods]
    snapshot = build_snapshot([(o, "bench") for o in objects], scheduler_name=KUBEPLACE)
    config = parse_configuration(KUBEPLACE_CONFIG)
    settings = SolverSettings(time_limit=10, workers=1, seed=0, backend=backend)
    planned = make_plan(snapshot, config, config.profiles[0], settings)
    assert planned.violations == () and planned.plan.summary.verified
    assert verify_plan(snapshot, planned.plan.placements, config, config.profiles[0]) == []
    assert verify_plan(with_stand_ins(snapshot), (*planned.plan.placements, *planned.plan.reservations), config,
                       config.profiles[0]) == []
    return planned.plan, sum(p.copies for p in snapshot.reserved)


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_jobset_leaders_go_where_their_whole_job_fits(backend: str) -> None:
    scenario = RULE_SCENARIOS["jobset-racks"](0)
    rack = {n["metadata"]["name"]: n["metadata"]["labels"][RACK] for n in scenario.nodes}
    rack_size: dict[str, int] = {}
    for name in rack.values():
        rack_size[name] = rack_size.get(name, 0) + 1
    leaders = [_ours(p) for p in scenario.pods]
    plan, stand_ins = _plan(scenario, leaders, backend)
    where = {p.name: p.node for p in plan.placements}
    assert len(where) == len(scenario.pods)  # every leader, each with its followers' room held
    job_fits = {g.leader: rack_size[rack[where[g.leader]]] >= 1 + len(g.pods) for g in scenario.followers}
    assert all(job_fits.values()), job_fits  # (without the room held, the 4-pod jobs took 2-node racks)
    assert stand_ins == sum(len(f.pods) for f in scenario.followers)
    assert sum(r.count for r in plan.reservations) == stand_ins
    for group in scenario.followers:  # the room held is in the leader's rack, whole
        held = [r for r in plan.reservations if r.name == f"{group.leader}.followers"]
        assert sum(r.count for r in held) == len(group.pods)
        assert {rack[r.node] for r in held} == {rack[where[group.leader]]}
    assert len({rack[n] for n in where.values()}) == len(where)  # one job per rack

    # The second wave: leaders bound, followers created pinned to their leader's rack.
    bound = [_ours(p, where[p["metadata"]["name"]]) for p in scenario.pods]
    followers = []
    for group in scenario.followers:
        for template in group.pods:
            body = _ours(template)
            body["spec"]["nodeSelector"] = {RACK: rack[where[group.leader]]}
            followers.append(body)
    plan, stand_ins = _plan(scenario, [*bound, *followers], backend)
    assert stand_ins == 0 and plan.reservations == ()
    assert len(plan.placements) == len(followers) and not plan.unplaced
    assert scenario.expected is not None
    assert len(scenario.pods) + len(followers) == scenario.expected.kubeplace == scenario.workload_pods
