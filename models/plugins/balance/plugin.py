"""Balance: spread load, the objective of the ``balance`` profile: the sum over nodes and
resources of weight * (u_i - mu)^2 (``models.framework.LoadBalanceTerm``), after placing as many
pods as possible. ``ResourceWeight`` is also LoadAware's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kubeplace.kube.objects import GPU
from kubeplace.models.framework import LoadBalanceTerm, ObjectiveTerm, RunContext
from kubeplace.models.problem import Problem

NAME = "Balance"


@dataclass(frozen=True)
class ResourceWeight:
    name: str
    weight: int = 1


@dataclass(frozen=True)
class BalanceArgs:
    resources: tuple[ResourceWeight, ...] = field(default_factory=lambda: (
        ResourceWeight("cpu"), ResourceWeight("memory"), ResourceWeight(GPU)))

    def validate(self) -> list[str]:
        return [f"resources[{i}].weight: expected an integer >= 0, got {r.weight}"
                for i, r in enumerate(self.resources) if r.weight < 0]


@dataclass(frozen=True)
class Balance:
    args: BalanceArgs
    name: str = NAME

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return [LoadBalanceTerm(r.name, r.weight) for r in self.args.resources if r.weight > 0]


def build_balance(args: BalanceArgs, _ctx: RunContext) -> Balance:
    return Balance(args)
