"""InterPodAffinity: required pod affinity and anti-affinity as three filters and the rules
between pending pods (``plugin``), the preferred terms' score (``score``), the kube-scheduler's
InterPodAffinityArgs (``args``), the verifier check in the plan's replay (``verify``), the
emulation's filter (``emulate``)."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, FILTER, SCORE
from kubeplace.models.plugins.inter_pod_affinity import emulate, verify
from kubeplace.models.plugins.inter_pod_affinity.args import InterPodAffinityArgs
from kubeplace.models.plugins.inter_pod_affinity.plugin import (
    AFFINITY_MISMATCH,
    ANTI_AFFINITY_MISMATCH,
    EXISTING_ANTI_AFFINITY_MISMATCH,
    NAME,
    build,
)
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, (FILTER, CONSTRAINT, SCORE), InterPodAffinityArgs, build,
            verify=Verifier(replay=verify.CHECK), emulate=emulate.admits,
            filter_order=12)

__all__ = ["AFFINITY_MISMATCH", "ANTI_AFFINITY_MISMATCH", "EXISTING_ANTI_AFFINITY_MISMATCH", "NAME", "RULE",
           "InterPodAffinityArgs", "build"]
