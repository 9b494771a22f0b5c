"""NodeUnschedulable: cordoned nodes take only pods tolerating the unschedulable taint (the
filter in ``plugin``, the verifier check in ``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import FILTER
from kubeplace.models.plugins.node_unschedulable import verify
from kubeplace.models.plugins.node_unschedulable.plugin import NAME, UNSCHEDULABLE_TAINT, NodeUnschedulable, build
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, FILTER, None, build, verify=Verifier(pair=verify.check_pair), filter_order=1, verified_always=True)

__all__ = ["NAME", "RULE", "UNSCHEDULABLE_TAINT", "NodeUnschedulable", "build"]
