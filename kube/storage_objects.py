"""Typed storage objects: PersistentVolumeClaims, PersistentVolumes, StorageClasses, the CSI
objects the kube-scheduler's volume plugins read, and how a placed pod's claim gets its volume.

Parsed in ``kube.storage`` as the API server validates and defaults them: sizes in bytes, a
StorageClass without volumeBindingMode Immediate, a claim or volume without volumeMode
Filesystem. A snapshot holds them in one :class:`Storage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kubeplace.kube.node_selector import Requirement, SelectorTerm

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
"""Set on a claim by the scheduler to have it provisioned for that node."""
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
"""Set on a claim by the PV controller once it is bound: a claim is bound when it has this and a volume name."""
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
IMMEDIATE, WAIT_FOR_FIRST_CONSUMER = "Immediate", "WaitForFirstConsumer"
FILESYSTEM, BLOCK = "Filesystem", "Block"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
AVAILABLE, LOST = "Available", "Lost"


@dataclass(frozen=True)
class ClaimRef:
    """A PersistentVolume's ``spec.claimRef``: the claim it is (being) bound to."""

    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    storage_class: str = ""
    """The beta annotation's class if set, else ``spec.storageClassName`` ("" = none)."""
    access_modes: tuple[str, ...] = ()
    volume_mode: str = FILESYSTEM
    request: int = 0
    """``spec.resources.requests.storage`` in bytes (0 when not given)."""
    selector: tuple[Requirement, ...] | None = None
    """``spec.selector`` (None: no selector) that a static volume's labels must match."""
    volume_name: str = ""
    attributes_class: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    phase: str = "Pending"
    deleting: bool = False
    owner_uid: str | None = None
    """The uid of the claim's controller (the pod, for a generic ephemeral volume's claim); None
    when it has no controller."""
    source: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """Fully bound, as the PV controller leaves it: a volume name and the bind-completed mark."""
        return bool(self.volume_name) and ANN_BIND_COMPLETED in self.annotations

    @property
    def selected_node(self) -> str | None:
        """The node it is being provisioned for, or None."""
        return self.annotations.get(ANN_SELECTED_NODE)


@dataclass(frozen=True)
class PersistentVolume:
    name: str
    uid: str = ""
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    storage_class: str = ""
    capacity: int = 0
    """``spec.capacity.storage`` in bytes."""
    access_modes: tuple[str, ...] = ()
    volume_mode: str = FILESYSTEM
    node_affinity: tuple[SelectorTerm, ...] | None = None
    """``spec.nodeAffinity.required`` terms (ORed); None: no constraint."""
    claim_ref: ClaimRef | None = None
    attributes_class: str = ""
    phase: str = "Pending"
    deleting: bool = False
    csi_driver: str = ""
    csi_handle: str = ""
    migrated: tuple[str, str] = ("", "")
    """An in-tree source's (CSI driver, volume handle) as the kube-scheduler counts it against the
    driver's volume limit (``kube.storage.IN_TREE_DRIVERS``); ("", "") for a CSI source or one not
    counted."""
    source: str = field(default="", compare=False)


@dataclass(frozen=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: str = IMMEDIATE
    allowed_topologies: tuple[SelectorTerm, ...] = ()
    """Terms (ORed) of ``key In values`` requirements; empty: every node."""
    source: str = field(default="", compare=False)


@dataclass(frozen=True)
class CSINodeDriver:
    name: str
    topology_keys: tuple[str, ...] = ()
    allocatable_count: int | None = None
    """Volumes of this driver the node can attach (None: no limit)."""


@dataclass(frozen=True)
class CSINode:
    name: str
    drivers: tuple[CSINodeDriver, ...] = ()
    source: str = field(default="", compare=False)

    def driver(self, name: str) -> CSINodeDriver | None:
        return next((d for d in self.drivers if d.name == name), None)


@dataclass(frozen=True)
class CSIDriver:
    name: str
    storage_capacity: bool = False
    """The driver publishes CSIStorageCapacity objects, which then limit provisioning."""
    source: str = field(default="", compare=False)


@dataclass(frozen=True)
class StorageCapacity:
    """A CSIStorageCapacity: how big a volume of ``storage_class`` can be provisioned on the
    nodes ``node_topology`` selects (None: no node)."""

    namespace: str
    name: str
    storage_class: str
    node_topology: tuple[Requirement, ...] | None = None
    capacity: int | None = None
    maximum_volume_size: int | None = None
    source: str = field(default="", compare=False)

    @property
    def limit(self) -> int | None:
        """The largest volume it allows: maximumVolumeSize if given, else capacity."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity


@dataclass(frozen=True)
class VolumeAttachment:
    name: str
    node: str
    attacher: str
    volume: str = ""
    """The PersistentVolume attached ("" for an inline volume)."""
    source: str = field(default="", compare=False)


@dataclass(frozen=True)
class ClaimChoice:
    """How a placed pod's unbound WaitForFirstConsumer claim gets its volume: bound to the static
    volume ``volume``, or ("") provisioned for the pod's node."""

    claim: str
    volume: str = ""


@dataclass(frozen=True)
class Storage:
    """The storage objects of a snapshot, by name (claims by ``namespace/name``)."""

    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    classes: Mapping[str, StorageClass] = field(default_factory=dict)
    csi_nodes: Mapping[str, CSINode] = field(default_factory=dict)
    csi_drivers: Mapping[str, CSIDriver] = field(default_factory=dict)
    capacities: tuple[StorageCapacity, ...] = ()
    attachments: tuple[VolumeAttachment, ...] = ()

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.claims.get(f"{namespace}/{name}")
