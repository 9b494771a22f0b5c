"""GangTopologyPreference: fewest domains of a gang's preferred topology key (``plugin``); a SCORE
rule, no verifier."""

from __future__ import annotations

from kubeplace.models.framework import SCORE
from kubeplace.models.plugins.gang_topology_preference.plugin import (
    GANG_DOMAIN_WEIGHT,
    NAME,
    GangTopologyPreference,
    build_preference,
)
from kubeplace.models.rules import rule

RULE = rule(NAME, SCORE, None, build_preference)

__all__ = ["GANG_DOMAIN_WEIGHT", "NAME", "RULE", "GangTopologyPreference", "build_preference"]
