"""TaintToleration's args: the score weight of the profile."""

from __future__ import annotations

from dataclasses import dataclass

from kubeplace.models.plugins.score_parts import check_weight


@dataclass(frozen=True)
class TaintTolerationArgs:
    weight: int = 3

    def validate(self) -> list[str]:
        return check_weight(self.weight)
