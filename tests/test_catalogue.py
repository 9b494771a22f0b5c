"""Every scenario of ``fixtures/scenarios`` on every available backend.

Each scenario has a known optimal answer (see its ``expected.yaml``); every plan made here also
goes through the independent verifier, and all backends must agree on the optimum.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kubeplace.models import evaluate
from kubeplace.plan.pipeline import Planned
from kubeplace.solver.backends import available_backends
from kubeplace.solver.greedy import POLICIES, greedy
from tests.scenarios import (
    SCENARIOS_DIR,
    Scenario,
    backend_problem,
    load_scenario,
    plan_scenario,
    scenario_names,
    usable_backends,
    verify_planned,
)

NAMES = scenario_names()
BACKENDS = available_backends()
KNOWN_EXPECTATIONS = {
    "pods_placed", "pods_unplaced", "placed_weight", "placed", "unplaced", "left_to_default_scheduler",
    "not_planned", "pods_per_node", "nodes_receiving", "objective", "reason_contains", "reason_contains_any",
    "greedy_pods_placed", "victims", "preempted_for",
}
_PLANS: dict[tuple[str, str], Planned] = {}


def planned(name: str, backend: str) -> Planned:
    """The plan of scenario ``name`` on ``backend``, made once per session."""
    key = (name, backend)
    if key not in _PLANS:
        _PLANS[key] = plan_scenario(load_scenario(name), backend)
    return _PLANS[key]


def skip_unusable(backend: str) -> None:
    problem = backend_problem(backend)
    if problem is not None:
        pytest.skip(f"backend {backend} is listed as available but cannot solve here: {problem}")


def check_expectations(scenario: Scenario, result: Planned) -> None:
    plan, expect = result.plan, scenario.expect
    where = {f"{p.namespace}/{p.name}": p.node for p in plan.placements}
    unplaced = {f"{u.namespace}/{u.name}": u for u in plan.unplaced if not u.left_to_default_scheduler}
    left = {f"{u.namespace}/{u.name}" for u in plan.unplaced if u.left_to_default_scheduler}
    context = f"{scenario.name}: placements {where}, unplaced {sorted(unplaced)}, left {sorted(left)}"

    assert len(where) == len(plan.placements), f"{context}: a pod placed twice"
    assert plan.summary.pods_placed == expect["pods_placed"] == len(where), context
    if "pods_unplaced" in expect:
        assert len(unplaced) == expect["pods_unplaced"], context
    if "placed_weight" in expect:
        assert plan.summary.placed_weight == expect["placed_weight"], context
    for key, node in expect.get("placed", {}).items():
        assert where.get(key) == node, f"{context}: expected {key} on {node}"
    if "unplaced" in expect:
        assert set(unplaced) == set(expect["unplaced"]), context
    if "left_to_default_scheduler" in expect:
        assert left == set(expect["left_to_default_scheduler"]), context
    for key in expect.get("not_planned", []):
        assert key not in where and key not in unplaced and key not in left, f"{context}: {key} was planned"
    per_node = Counter(where.values())
    for node, count in expect.get("pods_per_node", {}).items():
        assert per_node[node] == count, f"{context}: expected {count} pods on {node}"
    if "nodes_receiving" in expect:
        assert len(per_node) == expect["nodes_receiving"], context
    if "objective" in expect:
        assert plan.summary.objective == pytest.approx(expect["objective"], abs=1e-6), context
    for key, text in expect.get("reason_contains", {}).items():
        assert key in unplaced, f"{context}: {key} should be unplaced"
        assert any(text in r for r in unplaced[key].reasons), f"{context}: {key} reasons {unplaced[key].reasons}"
    if "reason_contains_any" in expect:
        reasons = [r for u in unplaced.values() for r in u.reasons]
        assert any(expect["reason_contains_any"] in r for r in reasons), f"{context}: reasons {reasons}"
    victims = {v.key: list(v.for_pods) for v in plan.preemptions}
    if "victims" in expect:
        assert scenario.preempt and plan.summary.preemption is not None, context
        assert set(victims) == set(expect["victims"]), f"{context}: victims {sorted(victims)}"
    for victim, preemptors in expect.get("preempted_for", {}).items():
        assert victims.get(victim) == preemptors, f"{context}: {victim} evicted for {victims.get(victim)}"


def test_catalogue_is_complete() -> None:
    assert len(NAMES) >= 20, f"scenarios in {SCENARIOS_DIR}: {NAMES}"
    for name in NAMES:
        scenario = load_scenario(name)
        assert (scenario.folder / "cluster.yaml").is_file(), name
        assert scenario.description.strip(), name
        assert scenario.profile_name in (None, "balance", "binpack"), name
        assert "pods_placed" in scenario.expect, name
        assert set(scenario.expect) <= KNOWN_EXPECTATIONS, f"{name}: {set(scenario.expect) - KNOWN_EXPECTATIONS}"
        assert scenario.snapshot().pending, f"{name}: no pending pods"


def test_cbc_and_cpsat_are_there() -> None:
    """The catalogue is only meaningful with at least one CP-SAT and one MILP backend."""
    assert "cpsat" in BACKENDS and "cbc" in BACKENDS, BACKENDS


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
def test_scenario(name: str, backend: str) -> None:
    skip_unusable(backend)
    scenario = load_scenario(name)
    result = planned(name, backend)
    assert verify_planned(scenario, result) == [], f"{name} on {backend}"
    assert result.plan.summary.status == "optimal", f"{name} on {backend}: {result.plan.summary}"
    assert result.plan.summary.backend == backend
    check_expectations(scenario, result)
    if "greedy_pods_placed" in scenario.expect:
        problem = result.aggregation.problem
        best = max(evaluate.pods_placed(greedy(problem, policy)) for policy in POLICIES)
        assert best == scenario.expect["greedy_pods_placed"], name


@pytest.mark.parametrize("name", NAMES)
def test_backends_agree(name: str) -> None:
    backends = usable_backends()
    if len(backends) < 2:
        pytest.skip(f"fewer than two usable backends: {backends}")
    scenario = load_scenario(name)
    results: dict[str, Any] = {}
    for backend in backends:
        result = planned(name, backend)
        assert verify_planned(scenario, result) == [], f"{name} on {backend}"
        results[backend] = (result.plan.summary.placed_weight, result.plan.summary.objective)
    weights = {w for w, _ in results.values()}
    assert len(weights) == 1, f"{name}: placed weight differs across backends: {results}"
    objectives = [o for _, o in results.values()]
    assert max(objectives) - min(objectives) <= 1e-6, f"{name}: objective differs across backends: {results}"


RULE_SCENARIOS = [n for n in NAMES if load_scenario(n).rule_plugin]


@pytest.mark.parametrize("name", RULE_SCENARIOS)
def test_scenario_needs_its_rule(name: str) -> None:
    """With the plugin enforcing the scenario's rule disabled, the planner's answer changes and
    the verifier (which still knows the rule) refuses it: the scenario really tests that rule."""
    scenario = load_scenario(name)
    assert scenario.rule_plugin is not None
    ablated = plan_scenario(scenario, "cpsat", disabled=(scenario.rule_plugin,))
    assert verify_planned(scenario, ablated) != [], f"{name} without {scenario.rule_plugin}: {ablated.plan}"
    with pytest.raises(AssertionError):
        check_expectations(scenario, ablated)


PREFERENCE_SCENARIOS = [n for n in NAMES if load_scenario(n).preference_plugin]


@pytest.mark.parametrize("name", PREFERENCE_SCENARIOS)
def test_scenario_needs_its_preference(name: str) -> None:
    """With the score weight of the scenario's preference plugin at 0, the plan is still valid
    (a preference is no rule) but its expectations fail: the scenario really tests that preference."""
    scenario = load_scenario(name)
    assert scenario.preference_plugin is not None
    ablated = plan_scenario(scenario, "cpsat", unweighted=(scenario.preference_plugin,))
    assert verify_planned(scenario, ablated) == []
    with pytest.raises(AssertionError):
        check_expectations(scenario, ablated)
