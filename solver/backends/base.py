"""The contract every backend fulfils: solve a LinearModel within limits.

A backend imports its solver library lazily (inside ``solve``), so importing kubeplace
never loads OR-tools or PuLP, and declares whether it is usable on this machine.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kubeplace.models.linear import IntArray, LinearModel


class Status(enum.Enum):
    OPTIMAL = "optimal"
    FEASIBLE = "feasible"  # a solution, optimality not proved (time or gap limit)
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"  # no solution found within the limits
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)


@dataclass(frozen=True)
class Progress:
    """What a backend reports while it runs (new incumbent or bound)."""

    objective: float
    bound: float
    seconds: float


@dataclass(frozen=True)
class SolveSettings:
    time_limit: float = 10.0
    workers: int = 2
    relative_gap: float = 0.0
    seed: int = 0
    on_progress: Callable[[Progress], None] | None = None


@dataclass(frozen=True)
class BackendResult:
    status: Status
    values: IntArray | None  # one value per variable when status.has_solution
    objective: float | None
    bound: float | None
    seconds: float
    message: str = ""


class Backend(Protocol):
    name: str

    def available(self) -> bool:
        """True when the solver library (and binary) can be used here."""
        ...

    def solve(self, model: LinearModel, settings: SolveSettings) -> BackendResult:
        ...
