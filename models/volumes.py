"""A pending pod's claims as the kube-scheduler's volume plugins see them, and the claim/volume
rules they share (pkg/scheduler/framework/plugins/volumebinding, component-helpers storage/volume).

:func:`resolve` is VolumeBinding's PreFilter: it rejects the pod (a claim missing, lost, being
deleted, an ephemeral claim not owned by the pod, an unbound claim of Immediate binding mode) or
sorts its claims into bound ones and delayed ones (unbound, of a WaitForFirstConsumer class). The
rest is per node: whether a bound claim's volume can be used there, whether a delayed claim can
take a static volume there (:func:`static_match`, :func:`reaches`) or be provisioned for it
(:func:`provisioning`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubeplace.kube.objects import Node, Pod
from kubeplace.kube.selectors import matches, term_matches, terms_match
from kubeplace.kube.storage_objects import (
    AVAILABLE,
    LOST,
    NO_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
    Storage,
)

NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
"""The kube-scheduler's reasons (volumebinding/binder.go, volume_binding.go), in the order a node lists them."""


Shape = tuple[str, int, tuple[str, ...], str, object, str]
"""What makes two claims match the same static volumes: class, request, access modes, volume
mode, selector, attributes class."""


def shape(claim: PersistentVolumeClaim) -> Shape:
    return (claim.storage_class, claim.request, tuple(sorted(set(claim.access_modes))), claim.volume_mode,
            claim.selector, claim.attributes_class)


def not_found(kind: str, name: str) -> str:
    """The API server's NotFound text, as the kube-scheduler passes it on."""
    return f'{kind} "{name}" not found'


@dataclass(frozen=True)
class PodClaims:
    """A pending pod's claims after VolumeBinding's PreFilter."""

    rejection: str = ""
    """Why the pod is rejected on every node ("" when it is not)."""
    bound: tuple[tuple[PersistentVolumeClaim, PersistentVolume | None], ...] = ()
    """Bound claims with their volume (None: the volume does not exist)."""
    delayed: tuple[PersistentVolumeClaim, ...] = ()
    """Unbound claims of WaitForFirstConsumer classes, by increasing request (the order the
    kube-scheduler matches them in)."""


def resolve(pod: Pod, storage: Storage) -> PodClaims:
    """VolumeBinding's PreFilter (``podHasPVCs``, then ``GetPodVolumeClaims``)."""
    claims: list[PersistentVolumeClaim] = []
    for volume in pod.volumes:
        claim = storage.claim(pod.namespace, volume.claim)
        if claim is None:
            if volume.ephemeral:
                return PodClaims(f'waiting for ephemeral volume controller to create the persistentvolumeclaim '
                                 f'"{volume.claim}"')
            return PodClaims(not_found("persistentvolumeclaim", volume.claim))
        if claim.phase == LOST:
            return PodClaims(f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume '
                             f'"{claim.volume_name}"')
        if claim.deleting:
            return PodClaims(f'persistentvolumeclaim "{claim.name}" is being deleted')
        if volume.ephemeral and (claim.owner_uid is None or claim.owner_uid != pod.uid):
            return PodClaims(f"PVC {claim.key} was not created for pod {pod.key} (pod is not owner)")
        claims.append(claim)
    bound, delayed, immediate = [], [], False
    for claim in claims:
        if claim.bound:
            bound.append((claim, storage.volumes.get(claim.volume_name)))
        elif delays_binding(claim, storage) and not claim.volume_name:
            delayed.append(claim)
        else:
            immediate = True  # prebound claims (a volume name, not yet bound) count as immediate too
    if immediate:
        return PodClaims(UNBOUND_IMMEDIATE)
    return PodClaims("", tuple(bound), tuple(sorted(delayed, key=lambda c: c.request)))


def delays_binding(claim: PersistentVolumeClaim, storage: Storage) -> bool:
    """Its class exists and binds WaitForFirstConsumer (a claim without class, or of a class that
    does not exist, is bound immediately by the PV controller)."""
    storage_class = storage.classes.get(claim.storage_class) if claim.storage_class else None
    return storage_class is not None and storage_class.binding_mode == WAIT_FOR_FIRST_CONSUMER


def reaches(volume: PersistentVolume, node: Node) -> bool:
    """The volume's node affinity admits the node; matched on labels only, as CheckNodeAffinity
    does (a ``metadata.name`` field requirement sees an empty name)."""
    return terms_match(volume.node_affinity, node.labels, "")


def prebound_to(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """The volume's claimRef names the claim (and its uid, when the ref has one)."""
    ref = volume.claim_ref
    return (ref is not None and (ref.namespace, ref.name) == (claim.namespace, claim.name)
            and ref.uid in ("", claim.uid))


def fits(claim: PersistentVolumeClaim, volume: PersistentVolume) -> bool:
    """The checks FindMatchingVolume makes of every volume, pre-bound or not: big enough, the
    same volume mode and attributes class, not being deleted."""
    return (volume.capacity >= claim.request and volume.volume_mode == claim.volume_mode
            and volume.attributes_class == claim.attributes_class and not volume.deleting)


def static_match(claim: PersistentVolumeClaim, volume: PersistentVolume) -> bool:
    """A free volume the claim may bind to, wherever both can be used (FindMatchingVolume but
    for node affinity): available, the claim's class and selector, at least its access modes."""
    return (volume.claim_ref is None and fits(claim, volume) and volume.phase == AVAILABLE
            and (claim.selector is None or matches(claim.selector, volume.labels))
            and volume.storage_class == claim.storage_class
            and set(claim.access_modes) <= set(volume.access_modes))


def can_provision(provisioner: str) -> bool:
    return provisioner not in ("", NO_PROVISIONER)


def registered_drivers(storage: Storage) -> frozenset[str]:
    """CSI drivers registered on some node (in a CSINode)."""
    return frozenset(d.name for n in storage.csi_nodes.values() for d in n.drivers)


def provisioning(claims: Sequence[PersistentVolumeClaim], storage: Storage, node: Node,
                 drivers: frozenset[str]) -> tuple[bool, bool]:
    """(provisioning allowed, enough storage) for ``claims`` on ``node`` (checkVolumeProvisions):
    a class with a provisioner, whose allowedTopologies admit the node, and where its CSI driver
    publishes capacity (CSIDriver ``storageCapacity``), a CSIStorageCapacity of the class for the
    node's topology large enough. kubeplace also requires what the CSI external-provisioner needs
    of the selected node when the provisioner is a CSI driver registered on some node (``drivers``):
    the node's CSINode lists it and the node has every label of its topology keys."""
    for claim in claims:
        storage_class = storage.classes.get(claim.storage_class)
        if storage_class is None or not can_provision(storage_class.provisioner):
            return False, True
        if storage_class.allowed_topologies and not any(term_matches(t, node.labels, node.name)
                                                        for t in storage_class.allowed_topologies):
            return False, True
        provisioner = storage_class.provisioner
        if provisioner in drivers:
            csi_node = storage.csi_nodes.get(node.name)
            driver = csi_node.driver(provisioner) if csi_node is not None else None
            if driver is None or any(key not in node.labels for key in driver.topology_keys):
                return False, True
        if not _enough_capacity(claim, storage_class.name, provisioner, storage, node.labels):
            return True, False
    return True, True


def _enough_capacity(claim: PersistentVolumeClaim, class_name: str, provisioner: str, storage: Storage,
                     labels: Mapping[str, str]) -> bool:
    driver = storage.csi_drivers.get(provisioner)
    if claim.request == 0 or driver is None or not driver.storage_capacity:
        return True
    return any(c.storage_class == class_name and c.limit is not None and c.limit >= claim.request
               and c.node_topology is not None and matches(c.node_topology, labels) for c in storage.capacities)


def queue_order(pods: Sequence[Pod]) -> list[Pod]:
    """The kube-scheduler's queue order: higher priority first, then the earlier created."""
    return sorted(pods, key=lambda p: (-p.priority, p.creation, p.namespace, p.name))
