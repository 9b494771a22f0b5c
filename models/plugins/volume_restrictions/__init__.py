"""VolumeRestrictions: a ReadWriteOncePod claim is used by one pod at a time: the filter
(``plugin``), the verifier's check over the plan (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import FILTER
from kubeplace.models.plugins.volume_restrictions import verify
from kubeplace.models.plugins.volume_restrictions.plugin import INLINE_DISKS, NAME, VolumeRestrictions, build
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, FILTER, None, build, verify=Verifier(plan=verify.check_plan), filter_order=7)

__all__ = ["INLINE_DISKS", "NAME", "RULE", "VolumeRestrictions", "build"]
