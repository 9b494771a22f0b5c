"""TaintToleration's args: the score weight of the profile."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaintTolerationArgs:
    weight: int = 3

    def validate(self) -> list[str]:
        return [] if 0 <= self.weight <= 100 else [f"weight: expected an integer from 0 to 100, got {self.weight}"]
