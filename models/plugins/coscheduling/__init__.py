"""Coscheduling: a gang's pods are placed together or not at all, within one domain of its
topology key (the constraint, ``plugin``), and the verifier's check over the plan (``verify``),
run where the profile enables the rule."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT
from kubeplace.models.plugins.coscheduling import verify
from kubeplace.models.plugins.coscheduling.plugin import NAME, Coscheduling, Running, build
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, CONSTRAINT, None, build, verify=Verifier(plan=verify.check_plan))

__all__ = ["NAME", "RULE", "Coscheduling", "Running", "build"]
