"""The rule registry (models.plugins.RULES, models.rules): every rule that refuses placements has
its own verifier check, each rule has one name and one place in the filter order, and the
registry is what the profiles, the verifier and the explanations read."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kubeplace.models.framework import CONSTRAINT, FILTER
from kubeplace.models.plugins import DEFAULT_PLUGINS, RULES, in_tree_registry
from kubeplace.models.rules import InTreeRule, Verifier
from kubeplace.plan.explain import SCHEDULER_FILTERS
from kubeplace.plan.verify import rule_checks

CHECKOUT = Path(__file__).resolve().parents[2]


def missing_verifiers(rules: tuple[InTreeRule, ...]) -> list[str]:
    """The FILTER and CONSTRAINT rules without a verifier check, or whose check is said to be in a
    plan module that does not name the rule."""
    out = []
    for r in rules:
        if not r.needs_verifier:
            continue
        if r.verify is None:
            out.append(f"{r.name}: no verifier")
        elif r.verify.in_plan and r.name not in (CHECKOUT / r.verify.in_plan).read_text():
            out.append(f"{r.name}: {r.verify.in_plan} does not check it")
    return out


def test_every_filter_and_constraint_rule_declares_a_verifier() -> None:
    assert missing_verifiers(RULES) == []


@pytest.mark.parametrize("name", [r.name for r in RULES if r.needs_verifier])
def test_a_rule_whose_verifier_is_removed_is_caught(name: str) -> None:
    without = tuple(replace(r, verify=None) if r.name == name else r for r in RULES)
    assert missing_verifiers(without) == [f"{name}: no verifier"]


def test_a_verifier_said_to_be_in_a_plan_module_must_be_there() -> None:
    ports = next(r for r in RULES if r.name == "NodePorts")
    moved = replace(ports, verify=Verifier(in_plan="plan/verify_gpu.py"))
    assert missing_verifiers((moved,)) == ["NodePorts: plan/verify_gpu.py does not check it"]


def test_a_verifier_checks_something() -> None:
    with pytest.raises(ValueError, match="needs a pair, node or plan check"):
        Verifier()


def test_score_only_rules_need_no_verifier() -> None:
    assert {r.name for r in RULES if not r.needs_verifier} == {
        "GangTopologyPreference", "Balance", "BinPack", "GPUFragmentation"}
    assert all(FILTER in r.factory.points or CONSTRAINT in r.factory.points for r in RULES if r.needs_verifier)


def test_the_registry_is_the_rules_one_name_each() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert list(in_tree_registry()) == names
    assert tuple(n for n in names if n not in ("Balance", "BinPack", "GPUFragmentation")) == DEFAULT_PLUGINS


def test_the_filter_order_is_the_kube_schedulers_derived_from_the_rules() -> None:
    assert SCHEDULER_FILTERS == (
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
        "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
        "InterPodAffinity", "DynamicResources")
    orders = [r.filter_order for r in RULES if r.filter_order is not None]
    assert len(orders) == len(set(orders))


def test_the_verifier_runs_the_enabled_rules_with_the_profiles_args() -> None:
    checks = rule_checks({"NodePorts", "Tenant", "BinPack"})
    assert [c.name for c in checks] == ["NodeUnschedulable", "NodeAffinity", "TaintToleration", "NodePorts", "Tenant"]
    assert {c.name for c in rule_checks(set())} == {r.name for r in RULES if r.verified_always}
    assert [c.name for c in rule_checks()] == [r.name for r in RULES if r.verify is not None]
