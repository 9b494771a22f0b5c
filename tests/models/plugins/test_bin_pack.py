"""models/plugins/bin_pack/: the binpack profile's objective, nodes in use at the args' weight."""

from __future__ import annotations

import pytest

from kubeplace.models.config import ConfigError
from kubeplace.models.framework import NodesUsedTerm
from kubeplace.models.plugins.bin_pack import RULE, BinPack
from kubeplace.models.plugins.score_parts import ObjectiveWeightArgs
from tests.models.plugins.test_balance import ANY_PROBLEM, configure


def test_nodes_in_use_at_the_weight_of_the_args() -> None:
    assert BinPack(ObjectiveWeightArgs(3)).terms(ANY_PROBLEM) == [NodesUsedTerm(3)]
    assert (RULE.name, RULE.default, RULE.needs_verifier) == ("BinPack", False, False)
    with pytest.raises(ConfigError, match="weight: expected an integer >= 1, got 0"):
        configure("BinPack", {"weight": 0})
