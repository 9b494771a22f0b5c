"""``kubeplace bench cluster``'s runner on the real control plane: one tiny fragmented-GPU scenario."""

from __future__ import annotations

import pytest
from kubernetes import client

from kubeplace_bench.cluster import COPIES, Settings, run_scenarios, table
from kubeplace_bench.cluster_rules import RULE_SCENARIOS
from kubeplace_bench.cluster_scenarios import Scenario, node, pod

from . import controlplane as cp

pytestmark = pytest.mark.e2e


def _tiny() -> Scenario:
    """2 nodes x 4 GPUs; four 1-GPU pods, then one 4-GPU pod. Spread one at a time, the 1-GPU pods
    leave 2 free GPUs per node; packed, they leave one node whole for the 4-GPU pod."""
    nodes = (node("bench-e2e-0", 16, 64, gpus=4), node("bench-e2e-1", 16, 64, gpus=4))
    pods = (*(pod(i, "gpu1", 1000, 2048, gpus=1) for i in range(4)), pod(4, "gpu4", 4000, 8192, gpus=4))
    return Scenario("tiny-gpu", "2 nodes x 4 GPUs; 4 1-GPU pods, then a 4-GPU pod", nodes, pods)


def test_runner_places_both_copies_and_cleans_up(control_plane: cp.ControlPlane, admin_api: client.ApiClient) -> None:
    doc = run_scenarios(control_plane, [_tiny()], Settings(seed=1, time_limit=5, settle=3, timeout=120))

    result = doc["scenarios"]["tiny-gpu"]
    default, kubeplace = result["kube-scheduler"], result["kubeplace"]
    assert (default["placed"], default["pending"], default["gpus_placed"]) == (4, 1, 4)
    assert (kubeplace["placed"], kubeplace["pending"], kubeplace["gpus_placed"]) == (5, 0, 8)
    assert default["free_gpus"] == 4 and kubeplace["free_gpus"] == 0
    assert default["gpu_fragmentation"] > 0 == kubeplace["gpu_fragmentation"]
    for m in (default, kubeplace):
        assert m["wall_seconds"] == pytest.approx(m["create_seconds"] + m["place_seconds"], abs=0.02)
    assert "tiny-gpu" in table(doc) and all(label in table(doc) for label in COPIES)

    core = client.CoreV1Api(admin_api)
    assert not [n.metadata.name for n in core.list_node().items if n.metadata.name.startswith("bench-e2e-")]
    for _, namespace in COPIES.values():
        assert core.list_namespaced_pod(namespace).items == []


@pytest.mark.timeout(300)
def test_rule_scenarios_place_what_they_expect(control_plane: cp.ControlPlane) -> None:
    """The scenarios for the inter-pod rules on the real kube-scheduler: one at a time it strands the
    domains each scenario says it strands; kubeplace places every pod."""
    scenarios = [build(0) for build in RULE_SCENARIOS.values()]
    doc = run_scenarios(control_plane, scenarios, Settings(seed=0, time_limit=5, settle=3, timeout=120))
    for scenario in scenarios:
        expected, result = scenario.expected, doc["scenarios"][scenario.name]
        assert expected is not None
        default, kubeplace = result["kube-scheduler"], result["kubeplace"]
        assert (default["pods"], default["placed"], default["left"]) == (
            scenario.workload_pods, expected.kube_scheduler, 0), scenario.name
        # Every pod: the model holds the rules, and a JobSet leader's followers that do not exist
        # yet have their room held in its rack (kube.followers).
        assert kubeplace["placed"] == expected.kubeplace, scenario.name
        assert kubeplace["left"] == 0, scenario.name  # no pod left to the default scheduler for these rules
    assert "expected placed: kube-scheduler" in table(doc)


def test_a_preemption_scenario_side_by_side(control_plane: cp.ControlPlane) -> None:
    """preempt-many shrunk to two nodes: kubeplace evicts only the two pods of priority 100 it needs,
    the kube-scheduler at least as many; both bind both preemptors and waste nothing."""
    from kubeplace_bench.cluster_preempt import PRIORITY_CLASSES, pending, running

    nodes = (node("bench-e2e-p0", 4, 16), node("bench-e2e-p1", 4, 16))
    older = (running(0, "p100s", "bench-e2e-p0", 2000, 100), running(1, "p300s", "bench-e2e-p0", 2000, 300))
    younger = (running(2, "p100b", "bench-e2e-p1", 4000, 100),)
    scenario = Scenario("tiny-preempt", "2 nodes; a 2-CPU and a 4-CPU preemptor", nodes,
                        (pending(0, "small", 2000, 1000), pending(1, "big", 4000, 1000)),
                        background=(older, younger), priority_classes=PRIORITY_CLASSES)
    doc = run_scenarios(control_plane, [scenario], Settings(seed=1, time_limit=5, settle=3, timeout=180))
    result = doc["scenarios"]["tiny-preempt"]
    default, kubeplace = result["kube-scheduler"], result["kubeplace"]
    assert kubeplace["victim_priorities"] == {"100": 2} and kubeplace["preemptors_bound"] == 2
    assert kubeplace["wasted_evictions"] == 0 == default["wasted_evictions"]
    assert default["preemptors_bound"] == 2 and default["victims"] >= kubeplace["victims"]
    assert "tiny-preempt" in table(doc) and "wasted evictions" in table(doc)
