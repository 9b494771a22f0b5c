"""PodTopologySpread: DoNotSchedule constraints as a filter (the missing key) and constraints
over classes and domains (``plugin``), ScheduleAnyway constraints as a score (``score``), the
kube-scheduler's PodTopologySpreadArgs (``args``), the verifier check in the plan's replay
(``verify``), the emulation's filter (``emulate``)."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, FILTER, SCORE
from kubeplace.models.plugins.topology_spread import emulate, verify
from kubeplace.models.plugins.topology_spread.args import DefaultConstraint, PodTopologySpreadArgs
from kubeplace.models.plugins.topology_spread.plugin import NAME, SPREAD_MISMATCH, SPREAD_MISSING_LABEL
from kubeplace.models.plugins.topology_spread.score import build
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, (FILTER, CONSTRAINT, SCORE), PodTopologySpreadArgs, build,
            verify=Verifier(replay=verify.CHECK), emulate=emulate.admits,
            filter_order=11)

__all__ = ["NAME", "RULE", "SPREAD_MISMATCH", "SPREAD_MISSING_LABEL", "DefaultConstraint", "PodTopologySpreadArgs",
           "build"]
