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
    """The FILTER and CONSTRAINT rules without a verifier check."""
    return [f"{r.name}: no verifier" for r in rules if r.needs_verifier and r.verify is None]


def test_every_filter_and_constraint_rule_declares_a_verifier() -> None:
    assert missing_verifiers(RULES) == []


@pytest.mark.parametrize("name", [r.name for r in RULES if r.needs_verifier])
def test_a_rule_whose_verifier_is_removed_is_caught(name: str) -> None:
    without = tuple(replace(r, verify=None) if r.name == name else r for r in RULES)
    assert missing_verifiers(without) == [f"{name}: no verifier"]


def test_every_rule_lives_in_its_folder_with_its_checks() -> None:
    """The plugin, the verifier's checks and the emulation's check of a rule come from its folder
    ``models/plugins/<rule>/``: nothing of a rule lives in plan/ or solver/."""
    for r in RULES:
        folder = r.factory.build.__module__.split(".")[:4]
        assert folder[:3] == ["kubeplace", "models", "plugins"] and len(folder) == 4, r.name
        assert (CHECKOUT / "models" / "plugins" / folder[3]).is_dir(), r.name
        checks = [getattr(r.verify, f) for f in ("pair", "node", "plan")] if r.verify else []
        if r.verify is not None and r.verify.replay is not None:
            checks += [r.verify.replay.applies, r.verify.replay.start]
        for check in [c for c in checks if c is not None] + [r.emulate]:
            if check is not None:
                assert check.__module__.split(".")[:4] == folder, (r.name, check.__module__)


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
