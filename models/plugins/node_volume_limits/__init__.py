"""NodeVolumeLimits: a node attaches at most its CSINode's count of a CSI driver's volumes: the
filter and the constraint (``plugin``), the verifier's check over the plan (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, FILTER
from kubeplace.models.plugins.node_volume_limits import verify
from kubeplace.models.plugins.node_volume_limits.plugin import NAME, NodeVolumeLimits, build
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, (FILTER, CONSTRAINT), None, build, verify=Verifier(plan=verify.check_plan), filter_order=8)

__all__ = ["NAME", "RULE", "NodeVolumeLimits", "build"]
