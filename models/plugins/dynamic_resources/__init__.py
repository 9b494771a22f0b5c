"""DynamicResources: a pod's resource claims, allocated with the structured allocator's rules:
the filter and the constraint (``plugin``), the verifier's check over the plan and the devices
it allocates (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, FILTER
from kubeplace.models.plugins.dynamic_resources import verify
from kubeplace.models.plugins.dynamic_resources.plugin import NAME, DynamicResources, build
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, (FILTER, CONSTRAINT), None, build, verify=Verifier(plan=verify.check_plan), filter_order=13)

__all__ = ["NAME", "RULE", "DynamicResources", "build"]
