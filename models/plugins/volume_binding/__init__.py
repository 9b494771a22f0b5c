"""VolumeBinding: a pod's PersistentVolumeClaims, bound or to bind, as the kube-scheduler decides
them: the filter, the constraint and the volumes chosen after the plan (``plugin``), the free
static volumes and the rules that keep one to one claim (``pools``), the verifier's check over
the plan (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, FILTER
from kubeplace.models.plugins.volume_binding import verify
from kubeplace.models.plugins.volume_binding.plugin import NAME, VolumeBinding, build
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, (FILTER, CONSTRAINT), None, build, verify=Verifier(plan=verify.check_plan), filter_order=9)

__all__ = ["NAME", "RULE", "VolumeBinding", "build"]
