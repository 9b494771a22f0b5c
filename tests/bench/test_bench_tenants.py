"""The cluster bench's tenants scenario, planned offline with the bench's kubeplace configuration."""

from __future__ import annotations

import copy

from kubeplace.kube.parse import build_snapshot
from kubeplace.models.config import SolverSettings
from kubeplace.models.config_load import parse_configuration
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace_bench.cluster import KUBEPLACE, KUBEPLACE_CONFIG
from kubeplace_bench.cluster_scenarios import tenants


def test_the_bench_trusts_its_own_pods_tenant_label() -> None:
    scenario = tenants(seed=1)
    pods = []
    for template in scenario.pods:
        body = copy.deepcopy(template)
        body["metadata"]["namespace"] = "bench-kubeplace"  # untenanted, as the runner's
        body["spec"]["schedulerName"] = KUBEPLACE
        pods.append(body)
    snapshot = build_snapshot([(o, "bench") for o in (*scenario.nodes, *pods)], scheduler_name=KUBEPLACE)
    config = parse_configuration(KUBEPLACE_CONFIG)
    plan = make_plan(snapshot, config, config.profiles[0], SolverSettings(time_limit=5, workers=1)).plan
    assert verify_plan(snapshot, plan.placements, config, config.profiles[0]) == []
    tenant_of = {p.name: p.name.rsplit("-", 1)[-1] for p in snapshot.pending}
    on_tenant_nodes = [(tenant_of[p.name], p.node) for p in plan.placements if p.node.startswith("ten-")]
    assert on_tenant_nodes and all(node.startswith(f"ten-{t}-") for t, node in on_tenant_nodes)
