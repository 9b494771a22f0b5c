"""Typed cluster objects: the part of Nodes and Pods that placement reads.

Everything downstream of parsing works on these frozen dataclasses, never on raw
dicts. Quantities are already exact integers here: milli-CPU for ``cpu``, bytes for
``memory`` and ``ephemeral-storage``, plain counts for ``pods`` and extended
resources, and milli-GPU shares for GPU-sharing requests (see ``kube.resources``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubeplace.kube.volumes import Storage

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"


class SpecRule(enum.Enum):
    """Placement rules a pod spec may hold that only the plugin owning them interprets (each
    plugin says through ``unmodelled`` whether kubeplace models it); the value is the field."""

    REQUIRED_POD_AFFINITY = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    REQUIRED_POD_ANTI_AFFINITY = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    HARD_TOPOLOGY_SPREAD = "spec.topologySpreadConstraints[].whenUnsatisfiable: DoNotSchedule"
    RESOURCE_CLAIMS = "spec.resourceClaims"
    INLINE_DISKS = "spec.volumes[].gcePersistentDisk|awsElasticBlockStore|rbd|iscsi"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str  # "Equal" or "Exists"
    value: str
    effect: str  # "" tolerates every effect


@dataclass(frozen=True)
class Requirement:
    """One node selector requirement (matchExpressions or matchFields entry)."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class SelectorTerm:
    """Requirements ANDed; terms of a node selector are ORed."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True)
class PodAffinityTerm:
    """A required inter-pod (anti-)affinity term: pods matching ``selector`` in
    ``namespaces`` (empty: the owner's own; ``all_namespaces``: every one) within one
    ``topology_key`` domain."""

    selector: tuple[Requirement, ...]
    namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False
    topology_key: str = ""


@dataclass(frozen=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    ip: str = ""  # "" and "0.0.0.0" mean every address


@dataclass(frozen=True)
class PodVolume:
    """A pod volume backed by a PersistentVolumeClaim of the pod's namespace: a
    ``persistentVolumeClaim`` volume, or a generic ``ephemeral`` one, whose claim the ephemeral
    volume controller creates as ``<pod>-<volume>``, owned by the pod."""

    name: str
    claim: str
    ephemeral: bool = False


@dataclass(frozen=True)
class Node:
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allocatable: Mapping[str, int] = field(default_factory=dict)
    source: str = field(default="", compare=False)
    """Where it was read from, for messages; not part of equality (files and API agree)."""


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    priority: int = 0
    requests: Mapping[str, int] = field(default_factory=dict)
    """Effective requests per resource (init containers, sidecars, overhead applied);
    always includes ``pods: 1``."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[SelectorTerm, ...] | None = None
    """Required node affinity terms; None when the pod has none (matches every node)."""
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    """Required pod anti-affinity terms; they bind pods placed near this one once it runs."""
    phase: str = "Pending"
    deleting: bool = False
    scheduling_gates: tuple[str, ...] = ()
    spec_rules: frozenset[SpecRule] = frozenset()
    """Which of those rules the spec holds."""
    volumes: tuple[PodVolume, ...] = ()
    """The volumes backed by PersistentVolumeClaims, in spec order."""
    unmodelled: tuple[str, ...] = ()
    """Rules kubeplace does not model for this pod, as the profile's plugins say (empty as
    parsed: :meth:`models.framework.PluginSet.mark_unmodelled` fills it in for a run);
    non-empty means it is left to the default scheduler, with these reasons."""
    owner_kind: str = ""
    creation: str = ""
    source: str = field(default="", compare=False)
    """Where it was read from, for messages; not part of equality (files and API agree)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True, order=True)
class GangKey:
    """A gang's identity: its namespace and its name there (a PodGroup's, or the group name its
    member pods carry). Printed as ``namespace/name``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


DEFAULT_GANG_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class PodGroup:
    """A gang as declared: a PodGroup object (``kube.gangs`` reads every flavour) or, for a
    CRD-free gang, the labels and annotations of its pods."""

    namespace: str
    name: str
    min_member: int
    """The PodGroup's minMember: members that must run together (running ones count)."""
    min_resources: Mapping[str, int] = field(default_factory=dict)
    """The requests its running and placed members must reach together, per resource."""
    timeout_seconds: int = DEFAULT_GANG_TIMEOUT_SECONDS
    created: str = ""
    origin: str = ""  # the API group, or "label" for the CRD-free form
    topology_key: str = ""
    """A node label key: all members on nodes with one value of it ("" = anywhere)."""
    preferred_topology_key: str = ""
    """A node label key: members on as few of its values as they can ("" = no preference)."""

    @property
    def key(self) -> GangKey:
        return GangKey(self.namespace, self.name)


@dataclass(frozen=True)
class Snapshot:
    """Everything one planning run sees, taken at one moment."""

    nodes: tuple[Node, ...]
    pending: tuple[Pod, ...]
    """Pods that are ours to place: unbound, not terminating, ungated, our scheduler name."""
    bound: tuple[Pod, ...]
    """Pods with a node, not finished: they use capacity."""
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    pod_groups: tuple[PodGroup, ...] = ()
    """Gangs (PodGroup objects, or declared by pod labels) the pending pods may belong to."""
    source: str = field(default="", compare=False)
    skipped_kinds: Mapping[str, int] = field(default_factory=dict, compare=False)
    """Objects of kinds placement does not read, counted per ``Kind.group`` (``Kind`` for core)."""
    storage: Storage = field(default_factory=lambda: _no_storage())
    """PersistentVolumeClaims, PersistentVolumes, StorageClasses and the CSI objects (``kube.volumes``)."""


def _no_storage() -> Storage:
    from kubeplace.kube.volumes import Storage  # kube.volumes builds on this module's types

    return Storage()
