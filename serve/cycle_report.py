"""What one cycle of ``kubeplace serve`` decided (:class:`Decided`, planned and waiting to be
bound) and what it reports once its bindings are answered (:class:`CycleReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeplace.kube.objects import GangKey, Pod, Snapshot
from kubeplace.plan.plan import GangStatus, Placement, Unplaced
from kubeplace.serve.queue import Unit


@dataclass
class CycleReport:
    units: int = 0
    pods: int = 0
    bound: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unplaced: list[str] = field(default_factory=list)
    interrupted: bool = False
    seconds_snapshot: float = 0.0
    seconds_plan: float = 0.0
    """make_plan: aggregation, solve and the verifier."""
    seconds_solve: float = 0.0
    seconds_bind: float = 0.0


@dataclass
class Decided:
    """What a cycle planned, waiting to be bound."""

    report: CycleReport
    started: float
    units: list[Unit]
    snapshot: Snapshot
    steps: str = ""
    pods: dict[tuple[str, str], Pod] = field(default_factory=dict)
    gangs: dict[GangKey, GangStatus] = field(default_factory=dict)
    by_unit: dict[Unit, list[Placement]] = field(default_factory=dict)
    refused: dict[Unit, str] = field(default_factory=dict)
    unplaced: dict[Unit, list[Unplaced]] = field(default_factory=dict)
    nominated: set[Unit] = field(default_factory=set)
    """Units held back waiting for their victims to go (the others refused are the verifier's)."""
    proven: bool = False
    """The plan placed all it could (its placed weight is its bound)."""
