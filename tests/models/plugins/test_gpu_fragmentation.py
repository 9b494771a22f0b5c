"""models/plugins/gpu_fragmentation/: the defrag profile's objective, FGD's fragmentation at the
args' weight."""

from __future__ import annotations

import pytest

from kubeplace.models.config import ConfigError
from kubeplace.models.framework import FragmentationTerm
from kubeplace.models.plugins.gpu_fragmentation import RULE, GPUFragmentation
from kubeplace.models.plugins.score_parts import ObjectiveWeightArgs
from tests.models.plugins.test_balance import ANY_PROBLEM, configure


def test_fragmentation_at_the_weight_of_the_args() -> None:
    assert GPUFragmentation(ObjectiveWeightArgs(2)).terms(ANY_PROBLEM) == [FragmentationTerm(2)]
    assert (RULE.name, RULE.default, RULE.needs_verifier) == ("GPUFragmentation", False, False)
    with pytest.raises(ConfigError, match="weight: expected an integer >= 1, got -2"):
        configure("GPUFragmentation", {"weight": -2})
