"""Which resource names carry GPU requests: the internal GPU conventions, one frozen type.

The configuration file's ``gpu`` section (``models.config_v1alpha1.GPU``, camelCase, as written)
is converted to :class:`GpuConventions` once, in ``models.config_load``; from there on the model
(``models.gpu``), the solver, ``serve``, ``rebalance`` and the verifier (``plan.verify_gpu``) read
only this type. It lives in ``kube`` so that the verifier, which on purpose shares no code with
``models``, reads the very same settings.

The conventions of the GPU-sharing stacks (see ``models.gpu`` for how a need is read from them):

- ``device_resource`` (default ``nvidia.com/gpu``, :data:`kubeplace.kube.objects.GPU`): whole
  devices (HAMi: vGPU slots);
- ``percent_per_device`` (HAMi): percent of each of the ``device_resource`` devices asked for;
- ``percent_of_gpus`` (Koordinator): percent of GPUs without a device count; 100 and over are
  whole GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubeplace.kube.objects import GPU

HAMI_CORES = "nvidia.com/gpucores"
HAMI_MEMORY = "nvidia.com/gpumem-percentage"
KOORD_CORE = "koordinator.sh/gpu-core"
KOORD_MEMORY = "koordinator.sh/gpu-memory-ratio"


@dataclass(frozen=True)
class GpuConventions:
    """Which resource names carry GPU needs (configurable per cluster: the file's ``gpu``)."""

    device_resource: str = GPU
    """Counts devices; the node label ``<it>.count`` counts the physical devices behind the
    slots, ``<it>.replicas`` > 1 says every slot is a time slice."""
    percent_per_device: tuple[str, ...] = (HAMI_CORES, HAMI_MEMORY)
    """Percent of each of ``device_resource`` devices (HAMi)."""
    percent_of_gpus: tuple[str, ...] = (KOORD_CORE, KOORD_MEMORY)
    """Percent of GPUs without a device count (Koordinator); >= 100 means whole GPUs."""

    @property
    def share_resources(self) -> tuple[str, ...]:
        return self.percent_per_device + self.percent_of_gpus

    @property
    def count_label(self) -> str:
        """GPU Feature Discovery's node label counting the physical devices behind ``device_resource``."""
        return f"{self.device_resource}.count"

    @property
    def replicas_label(self) -> str:
        """GPU Feature Discovery's label for time-slicing: each device handed out this many times."""
        return f"{self.device_resource}.replicas"


DEFAULT_CONVENTIONS = GpuConventions()
