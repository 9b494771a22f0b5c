"""LoadAware: placement driven by measured load: the filter and score with their args
(``plugin``), the verifier's check over the plan (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import FILTER, SCORE
from kubeplace.models.plugins.load_aware import verify
from kubeplace.models.plugins.load_aware.plugin import (
    DAEMON_SET,
    NAME,
    LoadAware,
    LoadAwareArgs,
    build,
    check_shares,
    load_ratio,
)
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, (FILTER, SCORE), LoadAwareArgs, build, verify=Verifier(plan=verify.check_plan))

__all__ = ["DAEMON_SET", "NAME", "RULE", "LoadAware", "LoadAwareArgs", "build", "check_shares", "load_ratio"]
