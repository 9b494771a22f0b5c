"""models/plugins/balance/: the balance profile's objective, a term per weighted resource; its
args validated per field."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.models.config import ConfigError
from kubeplace.models.config_load import parse_configuration
from kubeplace.models.framework import LoadBalanceTerm
from kubeplace.models.plugins.balance import RULE, Balance, BalanceArgs, ResourceWeight
from kubeplace.models.problem import Problem

ANY_PROBLEM = Problem.__new__(Problem)  # an objective's terms do not read the problem


def test_a_term_per_resource_with_a_positive_weight() -> None:
    args = BalanceArgs((ResourceWeight("cpu", 2), ResourceWeight("memory", 0), ResourceWeight("nvidia.com/gpu")))
    assert Balance(args).terms(ANY_PROBLEM) == [LoadBalanceTerm("cpu", 2), LoadBalanceTerm("nvidia.com/gpu", 1)]
    assert [r.name for r in BalanceArgs().resources] == ["cpu", "memory", "nvidia.com/gpu"]


def configure(plugin: str, args: dict[str, Any]) -> None:
    parse_configuration({
        "apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementConfiguration",
        "profiles": [{"schedulerName": "kubeplace", "pluginConfig": [{"name": plugin, "args": args}]}],
    })  # fmt: skip


def test_a_negative_weight_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"resources\[1\]\.weight: expected an integer >= 0, got -1"):
        configure("Balance", {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": -1}]})


def test_a_score_rule_off_by_default_with_no_verifier() -> None:
    assert (RULE.name, RULE.default, RULE.verify, RULE.needs_verifier) == ("Balance", False, None, False)
