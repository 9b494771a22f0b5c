"""VolumeZone: a bound volume's zone and region labels must match the node's: the filter
(``plugin``), the verifier's check over the plan (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import FILTER
from kubeplace.models.plugins.volume_zone import verify
from kubeplace.models.plugins.volume_zone.plugin import NAME, VolumeZone, build
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, FILTER, None, build, verify=Verifier(plan=verify.check_plan), filter_order=10)

__all__ = ["NAME", "RULE", "VolumeZone", "build"]
