"""GPUModel's args: the node label holding a node's GPU model, the pod annotation listing the
models a pod accepts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPUModelArgs:
    nodeLabel: str = "nvidia.com/gpu.product"
    podAnnotation: str = "kubeplace.io/gpu-model"
