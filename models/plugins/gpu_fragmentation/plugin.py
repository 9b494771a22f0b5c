"""GPUFragmentation: keep the free GPU capacity in shapes the workload can use (FGD's measure,
``models.framework.FragmentationTerm``), the objective of the ``defrag`` profile."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubeplace.models.framework import FragmentationTerm, ObjectiveTerm, RunContext
from kubeplace.models.plugins.score_parts import ObjectiveWeightArgs
from kubeplace.models.problem import Problem

NAME = "GPUFragmentation"


@dataclass(frozen=True)
class GPUFragmentation:
    """Leave the free GPU capacity in shapes the workload can use (FGD's measure)."""

    args: ObjectiveWeightArgs
    name: str = NAME

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return [FragmentationTerm(self.args.weight)]


def build_fragmentation(args: ObjectiveWeightArgs, _ctx: RunContext) -> GPUFragmentation:
    return GPUFragmentation(args)
