"""BinPack: the ``binpack`` profile's objective score (``plugin``); a SCORE rule, no verifier."""

from __future__ import annotations

from kubeplace.models.framework import SCORE
from kubeplace.models.plugins.bin_pack.plugin import NAME, BinPack, build_binpack
from kubeplace.models.plugins.score_parts import ObjectiveWeightArgs
from kubeplace.models.rules import rule

RULE = rule(NAME, SCORE, ObjectiveWeightArgs, build_binpack, default=False)

__all__ = ["NAME", "RULE", "BinPack", "build_binpack"]
