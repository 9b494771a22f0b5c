"""``rebalance --consolidate`` honours when Karpenter may disrupt: a NodePool's
``consolidateAfter`` (since its NodeClaims' last pod event, ``Never`` for none) and its budgets'
schedules, judged at an injected now."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from kubeplace.rebalance.cluster_state import ClusterState, state_of
from kubeplace.rebalance.consolidate import Consolidation, consolidate
from kubeplace.rebalance.movable import Rules
from kubeplace.rebalance.solve_moves import Settings
from tests.rebalance.test_consolidate import (
    CATALOGUE,
    CONFIG,
    FAST,
    PROFILE,
    drained,
    files,
    invoke,
    karpenter_node,
    node_pool,
    web,
)

NOW = datetime.datetime(2024, 1, 1, 12, 0, tzinfo=datetime.UTC)  # a Monday


def stamp(minutes_ago: float) -> str:
    return (NOW - datetime.timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_claim(node: str, initialized_ago: float | None = 60.0, pod_event_ago: float | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"nodeName": node, "conditions": []}
    if initialized_ago is not None:
        status["conditions"].append({"type": "Initialized", "status": "True",
                                     "lastTransitionTime": stamp(initialized_ago)})
    if pod_event_ago is not None:
        status["lastPodEventTime"] = stamp(pod_event_ago)
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": f"claim-{node}", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                     "requirements": []},
            "status": status}


def cluster(pool: dict[str, Any], claims: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Four large nodes (4 CPUs, 0.2/h) with one 1-CPU pod each: three of them can go."""
    return [*[karpenter_node(f"n{i}") for i in range(4)], *[web(f"w{i}", f"n{i}") for i in range(4)], pool,
            *(claims if claims is not None else [node_claim(f"n{i}") for i in range(4)])]


def run(objects: list[dict[str, Any]], now: datetime.datetime = NOW) -> Consolidation:
    state: ClusterState = state_of([(o, "test") for o in objects])
    return consolidate(state, CATALOGUE, Rules(), CONFIG, PROFILE, Settings(solver=FAST), now=now)


def test_a_node_within_consolidate_after_of_its_last_pod_event_is_not_a_candidate() -> None:
    claims = [node_claim("n0", pod_event_ago=2), *[node_claim(f"n{i}", pod_event_ago=10) for i in range(1, 4)]]
    result = run(cluster(node_pool(consolidate_after="5m"), claims))
    assert "n0" not in drained(result) and len(result.drain) == 3
    why = dict(result.kept)["n0"]
    assert "not consolidatable for another 180s" in why and "consolidateAfter 5m since its last pod event" in why
    # without a pod event, the time since it was initialized counts
    young = [node_claim("n0", initialized_ago=1), *[node_claim(f"n{i}") for i in range(1, 4)]]
    assert "since it was initialized" in dict(run(cluster(node_pool(consolidate_after="5m"), young)).kept)["n0"]
    # once consolidateAfter has passed, every node may go again
    assert len(run(cluster(node_pool(consolidate_after="5m"), claims), NOW + datetime.timedelta(minutes=3)).drain) == 3


def test_consolidate_after_never_keeps_every_node_of_the_pool() -> None:
    result = run(cluster(node_pool(consolidate_after="Never")))
    assert not result.drain
    assert all("never consolidates (consolidateAfter Never)" in why for _, why in result.kept)


def test_a_node_not_initialized_or_without_a_node_claim_waits() -> None:
    """Not initialized: not consolidatable yet; no NodeClaim: no Karpenter node to remove at all."""
    claims = [node_claim("n0", initialized_ago=None), *[node_claim(f"n{i}") for i in range(1, 3)]]
    result = run(cluster(node_pool(consolidate_after="1m"), claims))
    kept = dict(result.kept)
    assert "NodeClaim claim-n0 is not initialized" in kept["n0"] and "no NodeClaim owns it" in kept["n3"]
    assert drained(result) <= {"n1", "n2"}


@pytest.mark.parametrize(("budgets", "now", "removed"), [
    # Mondays 9:00 UTC for 4 hours nothing may go: active at 12:00, not at 13:00 (the window is (now - 4h, now])
    ([{"nodes": "0", "schedule": "0 9 * * mon", "duration": "4h"}], NOW, 0),
    ([{"nodes": "0", "schedule": "0 9 * * mon", "duration": "4h"}], NOW + datetime.timedelta(hours=1), 3),
    ([{"nodes": "0", "schedule": "0 9 * * tue", "duration": "4h"}], NOW, 3),
    # the most restrictive active budget wins; an inactive one bounds nothing
    ([{"nodes": "100%"}, {"nodes": "1", "schedule": "@daily", "duration": "12h30m"}], NOW, 1),
    ([{"nodes": "100%"}, {"nodes": "1", "schedule": "@daily", "duration": "11h"}], NOW, 3),
    # a percentage of the NodePool's 4 nodes, rounded up as Karpenter rounds it
    ([{"nodes": "30%", "schedule": "0 12 * * *", "duration": "10m"}], NOW, 2),
    ([{"nodes": "25%", "schedule": "0 12 * * *", "duration": "10m"}], NOW, 1),
    # reasons: an active budget for empty nodes does not bound under-used ones
    ([{"nodes": "0", "reasons": ["Empty"], "schedule": "0 12 * * *", "duration": "10m"}], NOW, 3),
    ([{"nodes": "0", "reasons": ["Underutilized"], "schedule": "0 12 * * *", "duration": "10m"}], NOW, 0),
])  # fmt: skip
def test_a_scheduled_budget_bounds_the_removals_only_while_active(budgets: list[dict[str, Any]],
                                                                  now: datetime.datetime, removed: int) -> None:
    assert len(run(cluster(node_pool(budgets=budgets)), now).drain) == removed


@pytest.mark.parametrize(("disruption", "field"), [
    ({"consolidateAfter": "0s", "budgets": [{"nodes": "1", "schedule": "0 0 * * 7", "duration": "1h"}]},
     "spec.disruption.budgets[0].schedule"),
    ({"consolidateAfter": "0s", "budgets": [{"nodes": "1", "schedule": "@daily", "duration": "1h30s"}]},
     "spec.disruption.budgets[0].duration"),
    ({"consolidateAfter": "5 minutes"}, "spec.disruption.consolidateAfter"),
    ({"consolidationPolicy": "WhenEmpty"}, "spec.disruption.consolidateAfter"),
])  # fmt: skip
def test_cli_an_invalid_schedule_or_duration_is_one_line_naming_file_object_and_field(
        tmp_path: Path, disruption: dict[str, Any], field: str) -> None:
    pool = node_pool()
    pool["spec"]["disruption"] = disruption
    path, prices = files(tmp_path, cluster(pool))
    result = invoke(path, "--catalogue", prices)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and f"{path}: NodePool default: {field}: " in result.stderr
