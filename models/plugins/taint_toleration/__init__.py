"""TaintToleration: the filter (every NoSchedule / NoExecute taint tolerated, ``plugin``), the
PreferNoSchedule score (``score``, weight in ``args``), the verifier check (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, FILTER, SCORE
from kubeplace.models.plugins.taint_toleration import verify
from kubeplace.models.plugins.taint_toleration.args import TaintTolerationArgs
from kubeplace.models.plugins.taint_toleration.plugin import NAME, TaintToleration, build, hard_taints, tolerates
from kubeplace.models.plugins.taint_toleration.score import build_taint_toleration
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, (FILTER, CONSTRAINT, SCORE), TaintTolerationArgs, build_taint_toleration,
            verify=Verifier(pair=verify.check_pair), filter_order=3, verified_always=True)

__all__ = ["NAME", "RULE", "TaintToleration", "TaintTolerationArgs", "build", "hard_taints", "tolerates"]
