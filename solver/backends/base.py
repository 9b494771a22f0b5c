"""The contract every backend fulfils: solve a LinearModel within limits.

A backend imports its solver library lazily (inside ``solve``), so importing kubeplace
never loads OR-tools or PuLP, and declares whether it is usable on this machine.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kubeplace.models.config import SolverSettings
from kubeplace.models.linear import IntArray, LinearModel
from kubeplace.solver.budget import Budget


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

    def solve(self, model: LinearModel, settings: SolverSettings, budget: Budget,
              on_progress: Callable[[Progress], None] | None = None) -> BackendResult:
        """Within ``budget`` (this call's part of the run's; what is ``left()`` when the call
        starts is the one number the library is given, building the model included), with
        ``settings``' workers, gap and seed; ``on_progress`` hears of every new incumbent or bound."""
        ...
