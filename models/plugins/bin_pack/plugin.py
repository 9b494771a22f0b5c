"""BinPack: pack, the objective of the ``binpack`` profile: fewest nodes in use
(``models.framework.NodesUsedTerm``; for GPU clusters and scale-down), after placing as many pods
as possible."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubeplace.models.framework import NodesUsedTerm, ObjectiveTerm, RunContext
from kubeplace.models.plugins.score_parts import ObjectiveWeightArgs
from kubeplace.models.problem import Problem

NAME = "BinPack"


@dataclass(frozen=True)
class BinPack:
    args: ObjectiveWeightArgs
    name: str = NAME

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return [NodesUsedTerm(self.args.weight)]


def build_binpack(args: ObjectiveWeightArgs, _ctx: RunContext) -> BinPack:
    return BinPack(args)
