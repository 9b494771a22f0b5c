"""GangTopologyPreference: a gang with a preferred topology key (``Gang.preferred``, set by
Coscheduling) should use as few of its domains as it can; a SCORE rule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubeplace.models.framework import GangDomainsTerm, ObjectiveTerm, RunContext
from kubeplace.models.problem import Problem

NAME = "GangTopologyPreference"
GANG_DOMAIN_WEIGHT = 10
"""Cost of one more preferred-key domain per gang, in balance units (one node at the
largest deviation of one resource costs 1): fewer domains win over balance in all but
very uneven clusters, yet a gang that only fits across domains is still placed."""


@dataclass(frozen=True)
class GangTopologyPreference:
    """Score: a gang with a preferred topology key (``Gang.preferred``, set by Coscheduling)
    should use as few of its domains as it can."""

    name: str = NAME

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return (GangDomainsTerm(GANG_DOMAIN_WEIGHT),) if any(g.preferred is not None for g in problem.gangs) else ()


def build_preference(_args: None, _ctx: RunContext) -> GangTopologyPreference:
    return GangTopologyPreference()
