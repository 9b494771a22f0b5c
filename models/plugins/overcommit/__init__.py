"""Overcommit: how full nodes may be filled by requests, by node label and measured load: the
constraint with its args (``plugin``), the verifier's check over the plan (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT
from kubeplace.models.plugins.overcommit import verify
from kubeplace.models.plugins.overcommit.plugin import NAME, Overcommit, OvercommitArgs, build, label_matches
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, CONSTRAINT, OvercommitArgs, build, verify=Verifier(plan=verify.check_plan))

__all__ = ["NAME", "RULE", "Overcommit", "OvercommitArgs", "build", "label_matches"]
