"""GPUFragmentation: the ``defrag`` profile's objective score (``plugin``); a SCORE rule, no
verifier."""

from __future__ import annotations

from kubeplace.models.framework import SCORE
from kubeplace.models.plugins.gpu_fragmentation.plugin import NAME, GPUFragmentation, build_fragmentation
from kubeplace.models.plugins.score_parts import ObjectiveWeightArgs
from kubeplace.models.rules import rule

RULE = rule(NAME, SCORE, ObjectiveWeightArgs, build_fragmentation, default=False)

__all__ = ["NAME", "RULE", "GPUFragmentation", "build_fragmentation"]
