"""InterPodAffinity's args: the kube-scheduler's InterPodAffinityArgs, and the score weight."""

from __future__ import annotations

from dataclasses import dataclass

from kubeplace.models.plugins.score_parts import check_weight


@dataclass(frozen=True)
class InterPodAffinityArgs:
    """The kube-scheduler's InterPodAffinityArgs, and the score weight."""

    weight: int = 2
    hardPodAffinityWeight: int = 1
    ignorePreferredTermsOfExistingPods: bool = False

    def validate(self) -> list[str]:
        bad = check_weight(self.weight)
        if not 0 <= self.hardPodAffinityWeight <= 100:
            bad.append(f"hardPodAffinityWeight: expected an integer from 0 to 100, got {self.hardPodAffinityWeight}")
        return bad
