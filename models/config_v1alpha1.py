"""PlacementConfiguration ``kubeplace.io/v1alpha1``: the external, versioned file shape.

These types are the file as written (camelCase), with its defaults; nothing but
:mod:`models.config_load` reads them, which validates them and converts them to the internal
types of :mod:`models.config`::

    apiVersion: kubeplace.io/v1alpha1
    kind: PlacementConfiguration
    profiles:
      - schedulerName: kubeplace
        objective: balance            # or binpack, defrag
        placementWeight: pods         # or gpu
        plugins:
          enabled: [NodeLabelMatch]   # added to the defaults
          disabled: [Tenant]          # removed; "*" removes every default plugin
        pluginConfig:
          - name: Balance
            args: {resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]}
    userPlugins:
      - name: NodeLabelMatch
        import: examples.plugins.node_label_match:FACTORY
    solver: {backend: cpsat, timeLimitSeconds: 10, workers: 2, relativeGap: 0, seed: 0}
    gpu: {deviceResource: nvidia.com/gpu}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NewType

from kubeplace.kube.gpu_conventions import HAMI_CORES, HAMI_MEMORY, KOORD_CORE, KOORD_MEMORY
from kubeplace.kube.objects import GPU as GPU_RESOURCE

API_VERSION = "kubeplace.io/v1alpha1"
KIND = "PlacementConfiguration"


@dataclass(frozen=True)
class Solver:
    backend: str = "cpsat"
    timeLimitSeconds: float = 10.0
    workers: int = 2
    relativeGap: float = 0.0
    seed: int = 0


@dataclass(frozen=True)
class GPU:
    """Which resource names carry GPU requests: the file's spelling of
    :class:`kubeplace.kube.gpu_conventions.GpuConventions` (``deviceResource`` is its
    ``device_resource``, ``percentPerDevice`` its ``percent_per_device``, ``percentOfGpus`` its
    ``percent_of_gpus``)."""

    deviceResource: str = GPU_RESOURCE
    percentPerDevice: tuple[str, ...] = (HAMI_CORES, HAMI_MEMORY)
    percentOfGpus: tuple[str, ...] = (KOORD_CORE, KOORD_MEMORY)


PluginName = NewType("PluginName", str)
"""A plugin's name; written ``X`` or ``{name: X}``, as in the kube-scheduler's configuration."""


@dataclass(frozen=True)
class Plugins:
    enabled: tuple[PluginName, ...] = ()
    disabled: tuple[PluginName, ...] = ()


@dataclass(frozen=True)
class PluginConfig:
    name: PluginName = PluginName("")
    args: Mapping[str, Any] = field(default_factory=dict)
    """Decoded into the plugin's own args type once the plugin is known."""


@dataclass(frozen=True)
class Profile:
    schedulerName: str = "kubeplace"
    objective: str = "balance"
    placementWeight: str = "pods"
    plugins: Plugins = field(default_factory=Plugins)
    pluginConfig: tuple[PluginConfig, ...] = ()


@dataclass(frozen=True)
class UserPlugin:
    name: str = ""
    import_: str = ""
    """``import`` in the file: ``package.module:ATTRIBUTE``."""


@dataclass(frozen=True)
class PlacementConfiguration:
    apiVersion: str = ""
    """Required: API_VERSION."""
    kind: str = ""
    """Required: KIND."""
    profiles: tuple[Profile, ...] = (Profile(),)
    userPlugins: tuple[UserPlugin, ...] = ()
    solver: Solver = field(default_factory=Solver)
    gpu: GPU = field(default_factory=GPU)
