"""Score plugins: the second lexicographic goal, after placing as many pods as possible.

``Balance`` spreads load: sum over nodes and resources of weight * (u_i - mu)^2.
``BinPack`` packs: fewest nodes in use (for GPU clusters and scale-down).
``GPUFragmentation`` keeps free GPU capacity usable by the workload's shapes (profile ``defrag``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kubeplace.kube.objects import GPU
from kubeplace.models.framework import FragmentationTerm, LoadBalanceTerm, NodesUsedTerm, ObjectiveTerm, RunContext
from kubeplace.models.problem import Problem


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
    name: str = "Balance"

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return [LoadBalanceTerm(r.name, r.weight) for r in self.args.resources if r.weight > 0]


@dataclass(frozen=True)
class BinPackArgs:
    weight: int = 1

    def validate(self) -> list[str]:
        return [] if self.weight >= 1 else [f"weight: expected an integer >= 1, got {self.weight}"]


@dataclass(frozen=True)
class BinPack:
    args: BinPackArgs
    name: str = "BinPack"

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return [NodesUsedTerm(self.args.weight)]


def build_balance(args: BalanceArgs, _ctx: RunContext) -> Balance:
    return Balance(args)


def build_binpack(args: BinPackArgs, _ctx: RunContext) -> BinPack:
    return BinPack(args)


@dataclass(frozen=True)
class GPUFragmentationArgs:
    weight: int = 1

    def validate(self) -> list[str]:
        return [] if self.weight >= 1 else [f"weight: expected an integer >= 1, got {self.weight}"]


@dataclass(frozen=True)
class GPUFragmentation:
    """Leave the free GPU capacity in shapes the workload can use (FGD's measure)."""

    args: GPUFragmentationArgs
    name: str = "GPUFragmentation"

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return [FragmentationTerm(self.args.weight)]


def build_fragmentation(args: GPUFragmentationArgs, _ctx: RunContext) -> GPUFragmentation:
    return GPUFragmentation(args)
