"""GPUModel: a pod's accepted GPU models (annotation) must include the node's model label: the
filter (``plugin``), its args (``args``), the verifier check (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import FILTER
from kubeplace.models.plugins.gpu_model import verify
from kubeplace.models.plugins.gpu_model.args import GPUModelArgs
from kubeplace.models.plugins.gpu_model.plugin import NAME, GPUModel, build
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, FILTER, GPUModelArgs, build, verify=Verifier(pair=verify.check_pair))

__all__ = ["NAME", "RULE", "GPUModel", "GPUModelArgs", "build"]
