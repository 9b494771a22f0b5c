"""Storage objects from raw objects: PersistentVolumeClaims, PersistentVolumes, StorageClasses,
and the CSI objects the kube-scheduler's volume plugins read (CSINode, CSIDriver,
CSIStorageCapacity, VolumeAttachment), into the typed objects of ``kube.storage_objects``; and the pods'
claim-backed volumes.

Parsed as the API server validates and defaults them (a StorageClass without
``volumeBindingMode`` is ``Immediate``, a claim or volume without ``volumeMode`` is
``Filesystem``); sizes are exact bytes. Only what placement and binding read is kept; what a
binding writes back (``resourceVersion``, ``uid``) is kept too, as preconditions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubeplace.kube.errors import (
    InputError,
    expect_controller,
    expect_list,
    expect_mapping,
    expect_name,
    expect_namespace,
    expect_str,
    expect_string_map,
    unique_objects,
)
from kubeplace.kube.objects import PodVolume, Requirement, SelectorTerm
from kubeplace.kube.quantity import QuantityError, resource_amount
from kubeplace.kube.selectors import label_selector, node_selector_terms
from kubeplace.kube.storage_objects import (
    BETA_STORAGE_CLASS,
    BLOCK,
    FILESYSTEM,
    IMMEDIATE,
    NO_PROVISIONER,
    READ_WRITE_ONCE_POD,
    WAIT_FOR_FIRST_CONSUMER,
    ClaimRef,
    CSIDriver,
    CSINode,
    CSINodeDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    Storage,
    StorageCapacity,
    StorageClass,
    VolumeAttachment,
)

STORAGE_GROUP = "storage.k8s.io"
CLAIM, VOLUME = ("", "PersistentVolumeClaim"), ("", "PersistentVolume")
STORAGE_CLASS, CSI_NODE, CSI_DRIVER = (STORAGE_GROUP, "StorageClass"), (STORAGE_GROUP, "CSINode"), (STORAGE_GROUP,
                                                                                                     "CSIDriver")
STORAGE_CAPACITY, VOLUME_ATTACHMENT = (STORAGE_GROUP, "CSIStorageCapacity"), (STORAGE_GROUP, "VolumeAttachment")
STORAGE_KINDS = (CLAIM, VOLUME, STORAGE_CLASS, CSI_NODE, CSI_DRIVER, STORAGE_CAPACITY, VOLUME_ATTACHMENT)
"""(API group, kind) of the storage objects a snapshot reads."""

ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", READ_WRITE_ONCE_POD)
VOLUME_SOURCES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "glusterfs", "flocker", "nfs", "rbd",
                  "quobyte", "cephfs", "iscsi", "cinder", "fc", "flexVolume", "azureFile", "vsphereVolume",
                  "photonPersistentDisk", "portworxVolume", "azureDisk", "scaleIO", "local", "storageos", "csi")
"""A PersistentVolume's volume sources, in the order the API server checks them: exactly one is set."""
INLINE_DISKS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")
"""Inline volume sources the kube-scheduler's VolumeRestrictions checks for disk conflicts."""

IN_TREE_DRIVERS = {"kubernetes.io/aws-ebs": "ebs.csi.aws.com", "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
                   "kubernetes.io/azure-disk": "disk.csi.azure.com", "kubernetes.io/cinder": "cinder.csi.openstack.org",
                   "kubernetes.io/portworx-volume": "pxd.portworx.com"}
"""The in-tree volume plugins whose volumes the kube-scheduler counts as their CSI driver's
(NodeVolumeLimits' ``isCSIMigrationOn``, always on for these), by provisioner name; the other
in-tree provisioners (azure-file, vsphere-volume...) count nowhere."""

Sourced = tuple[Mapping[str, Any], str]


def pod_volumes(spec: Mapping[str, Any], pod_name: str) -> tuple[PodVolume, ...]:
    """The pod's claim-backed volumes, validated as the API server does."""
    found = []
    names: set[str] = set()
    for index, raw in enumerate(expect_list(spec.get("volumes"), "spec.volumes")):
        where = f"spec.volumes[{index}]"
        volume = expect_mapping(raw, where)
        name = expect_str(volume.get("name"), f"{where}.name")
        if name in names:
            raise InputError(f"Duplicate value: {name!r}", field=f"{where}.name",
                             expected="a volume name unique in the pod")
        names.add(name)
        if "persistentVolumeClaim" in volume:
            source = expect_mapping(volume.get("persistentVolumeClaim"), f"{where}.persistentVolumeClaim")
            claim = expect_str(source.get("claimName"), f"{where}.persistentVolumeClaim.claimName")
            if not claim:
                raise InputError("missing claimName", field=f"{where}.persistentVolumeClaim.claimName",
                                 expected="the name of a PersistentVolumeClaim")
            found.append(PodVolume(name, claim))
        elif "ephemeral" in volume:
            if not name:
                raise InputError("missing name", field=f"{where}.name", expected="the volume's name")
            found.append(PodVolume(name, f"{pod_name}-{name}", ephemeral=True))
    return tuple(found)


def has_inline_disk(spec: Mapping[str, Any]) -> bool:
    """Whether the pod mounts an inline GCE PD, AWS EBS, RBD or iSCSI volume."""
    volumes = expect_list(spec.get("volumes"), "spec.volumes")
    return any(isinstance(v, Mapping) and any(k in v for k in INLINE_DISKS) for v in volumes)


def parse_claim(obj: Mapping[str, Any], source: str = "") -> PersistentVolumeClaim:
    metadata, spec, status = _parts(obj)
    annotations = expect_string_map(metadata.get("annotations"), "metadata.annotations")
    resources = expect_mapping(spec.get("resources"), "spec.resources")
    requests = expect_mapping(resources.get("requests"), "spec.resources.requests")
    if requests.get("storage") is None:
        raise InputError("missing storage request", field="spec.resources.requests.storage",
                         expected="the size the claim asks for, e.g. 10Gi (the API server requires it)")
    return PersistentVolumeClaim(
        namespace=expect_namespace(metadata),
        name=expect_name(metadata),
        uid=expect_str(metadata.get("uid"), "metadata.uid"),
        resource_version=expect_str(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        storage_class=annotations.get(BETA_STORAGE_CLASS,
                                      expect_str(spec.get("storageClassName"), "spec.storageClassName")),
        access_modes=_access_modes(spec.get("accessModes")),
        volume_mode=_volume_mode(spec.get("volumeMode")),
        request=_bytes(requests.get("storage"), "spec.resources.requests.storage"),
        selector=label_selector(spec.get("selector"), "spec.selector"),
        volume_name=expect_str(spec.get("volumeName"), "spec.volumeName"),
        attributes_class=expect_str(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
        annotations=annotations,
        phase=expect_str(status.get("phase"), "status.phase") or "Pending",
        deleting=metadata.get("deletionTimestamp") is not None,
        owner_uid=expect_controller(metadata.get("ownerReferences"), "uid"),
        source=source,
    )


def parse_volume(obj: Mapping[str, Any], source: str = "") -> PersistentVolume:
    metadata, spec, status = _parts(obj)
    annotations = expect_string_map(metadata.get("annotations"), "metadata.annotations")
    capacity = expect_mapping(spec.get("capacity"), "spec.capacity")
    affinity = expect_mapping(spec.get("nodeAffinity"), "spec.nodeAffinity")
    required = affinity.get("required")
    csi = expect_mapping(spec.get("csi"), "spec.csi")
    _one_source(spec)
    if spec.get("local") is not None and required is None:
        raise InputError("a local volume has no node affinity", field="spec.nodeAffinity.required",
                         expected="the node selector terms of the node that holds the volume "
                                  "(the API server requires them for spec.local)")
    return PersistentVolume(
        name=expect_name(metadata),
        uid=expect_str(metadata.get("uid"), "metadata.uid"),
        resource_version=expect_str(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        labels=expect_string_map(metadata.get("labels"), "metadata.labels"),
        storage_class=annotations.get(BETA_STORAGE_CLASS,
                                      expect_str(spec.get("storageClassName"), "spec.storageClassName")),
        capacity=_bytes(capacity.get("storage"), "spec.capacity.storage"),
        access_modes=_access_modes(spec.get("accessModes")),
        volume_mode=_volume_mode(spec.get("volumeMode")),
        node_affinity=None if required is None else node_selector_terms(required, "spec.nodeAffinity.required"),
        claim_ref=_claim_ref(spec.get("claimRef")),
        attributes_class=expect_str(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
        phase=expect_str(status.get("phase"), "status.phase") or "Pending",
        deleting=metadata.get("deletionTimestamp") is not None,
        csi_driver=expect_str(csi.get("driver"), "spec.csi.driver"),
        csi_handle=expect_str(csi.get("volumeHandle"), "spec.csi.volumeHandle"),
        migrated=_migrated(spec, expect_string_map(metadata.get("labels"), "metadata.labels")),
        source=source,
    )


IN_TREE_SOURCES = {"awsElasticBlockStore": ("volumeID", "ebs.csi.aws.com"),
                   "gcePersistentDisk": ("pdName", "pd.csi.storage.gke.io"),
                   "azureDisk": ("diskURI", "disk.csi.azure.com"), "cinder": ("volumeID", "cinder.csi.openstack.org"),
                   "portworxVolume": ("volumeID", "pxd.portworx.com")}
"""The in-tree volume sources the kube-scheduler counts as a CSI driver's: the field naming the
volume (the API server requires it) and the driver."""


def _migrated(spec: Mapping[str, Any], labels: Mapping[str, str]) -> tuple[str, str]:
    """(CSI driver, volume handle) of an in-tree volume source as csi-translation-lib translates
    it (``TranslateInTreePVToCSI``), for the volume limits; ("", "") for a source it does not, or
    fails to, translate. InputError when the source lacks the field naming its volume."""
    name = next((n for n in IN_TREE_SOURCES if spec.get(n) is not None), "")
    if not name:
        return "", ""
    key, driver = IN_TREE_SOURCES[name]
    source = expect_mapping(spec.get(name), f"spec.{name}")
    volume = expect_str(source.get(key), f"spec.{name}.{key}")
    if not volume:
        raise InputError("Required value", field=f"spec.{name}.{key}")
    if name == "awsElasticBlockStore":  # KubernetesVolumeIDToEBSVolumeID
        return driver, volume.removeprefix("aws://").rsplit("/", 1)[-1] if volume.startswith("aws://") else volume
    if name == "gcePersistentDisk":
        zones = (labels.get("failure-domain.beta.kubernetes.io/zone") or labels.get("topology.kubernetes.io/zone", "")
                 ).split("__")
        if len(zones) > 1:
            regions = {z.rsplit("-", 1)[0] for z in zones}
            return (driver, f"projects/UNSPECIFIED/regions/{regions.pop()}/disks/{volume}") if len(regions) == 1 else (
                "", "")
        return driver, f"projects/UNSPECIFIED/zones/{zones[0] or 'UNSPECIFIED'}/disks/{volume}"
    if name == "azureDisk":  # a kind other than Managed is not translated (Shared: the API server's default)
        kind = expect_str(source.get("kind"), "spec.azureDisk.kind") or "Shared"
        return (driver, volume) if kind.lower() == "managed" else ("", "")
    return driver, volume


def parse_storage_class(obj: Mapping[str, Any], source: str = "") -> StorageClass:
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    mode = expect_str(obj.get("volumeBindingMode"), "volumeBindingMode") or IMMEDIATE
    if mode not in (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER):
        raise InputError(f"unknown volumeBindingMode {mode!r}", field="volumeBindingMode",
                         expected=f"{IMMEDIATE} or {WAIT_FOR_FIRST_CONSUMER}")
    terms = []
    for index, raw in enumerate(expect_list(obj.get("allowedTopologies"), "allowedTopologies")):
        where = f"allowedTopologies[{index}].matchLabelExpressions"
        expressions = expect_list(expect_mapping(raw, f"allowedTopologies[{index}]").get("matchLabelExpressions"),
                                  where)
        terms.append(SelectorTerm(tuple(_topology_requirement(item, f"{where}[{j}]")
                                        for j, item in enumerate(expressions))))
    provisioner = expect_str(obj.get("provisioner"), "provisioner")
    if not provisioner:
        raise InputError("missing provisioner", field="provisioner", expected=f"a provisioner name, {NO_PROVISIONER}")
    return StorageClass(expect_name(metadata), provisioner, mode, tuple(terms), source)


def parse_csi_node(obj: Mapping[str, Any], source: str = "") -> CSINode:
    metadata, spec, _ = _parts(obj)
    drivers = []
    for index, raw in enumerate(expect_list(spec.get("drivers"), "spec.drivers")):
        where = f"spec.drivers[{index}]"
        driver = expect_mapping(raw, where)
        count = expect_mapping(driver.get("allocatable"), f"{where}.allocatable").get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            raise InputError(f"{count!r} is not a count", field=f"{where}.allocatable.count",
                             expected="an integer of 0 or more")
        keys = tuple(expect_str(k, f"{where}.topologyKeys[{j}]")
                     for j, k in enumerate(expect_list(driver.get("topologyKeys"), f"{where}.topologyKeys")))
        drivers.append(CSINodeDriver(expect_str(driver.get("name"), f"{where}.name"), keys, count))
    return CSINode(expect_name(metadata), tuple(drivers), source)


def parse_csi_driver(obj: Mapping[str, Any], source: str = "") -> CSIDriver:
    metadata, spec, _ = _parts(obj)
    capacity = spec.get("storageCapacity")
    if capacity is not None and not isinstance(capacity, bool):
        raise InputError(f"{capacity!r} is not a boolean", field="spec.storageCapacity", expected="true or false")
    return CSIDriver(expect_name(metadata), bool(capacity), source)


def parse_storage_capacity(obj: Mapping[str, Any], source: str = "") -> StorageCapacity:
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    capacity, maximum = obj.get("capacity"), obj.get("maximumVolumeSize")
    return StorageCapacity(
        namespace=expect_namespace(metadata),
        name=expect_name(metadata),
        storage_class=expect_str(obj.get("storageClassName"), "storageClassName"),
        node_topology=label_selector(obj.get("nodeTopology"), "nodeTopology"),
        capacity=None if capacity is None else _bytes(capacity, "capacity"),
        maximum_volume_size=None if maximum is None else _bytes(maximum, "maximumVolumeSize"),
        source=source,
    )


def parse_volume_attachment(obj: Mapping[str, Any], source: str = "") -> VolumeAttachment:
    metadata, spec, _ = _parts(obj)
    attached = expect_mapping(spec.get("source"), "spec.source")
    pv_name = expect_str(attached.get("persistentVolumeName"), "spec.source.persistentVolumeName")
    return VolumeAttachment(expect_name(metadata), expect_str(spec.get("nodeName"), "spec.nodeName"),
                            expect_str(spec.get("attacher"), "spec.attacher"), pv_name, source)


def build_storage(kinds: Mapping[tuple[str, str], Sequence[Sourced]], label: Any) -> Storage:
    """The Storage of the objects read by kind; ``label(obj)`` names an object in errors."""

    def each(kind: tuple[str, str], parse: Any) -> Iterable[Any]:
        for obj, where in kinds.get(kind, ()):
            try:
                yield parse(obj, where)
            except InputError as error:
                raise error.located(file=where, obj=label(obj)) from None

    return Storage(
        claims=unique_objects(each(CLAIM, parse_claim), lambda c: c.key, "PersistentVolumeClaim"),
        volumes=unique_objects(each(VOLUME, parse_volume), lambda v: v.name, "PersistentVolume"),
        classes=unique_objects(each(STORAGE_CLASS, parse_storage_class), lambda c: c.name, "StorageClass"),
        csi_nodes=unique_objects(each(CSI_NODE, parse_csi_node), lambda c: c.name, "CSINode"),
        csi_drivers=unique_objects(each(CSI_DRIVER, parse_csi_driver), lambda d: d.name, "CSIDriver"),
        capacities=tuple(sorted(each(STORAGE_CAPACITY, parse_storage_capacity), key=lambda c: (c.namespace, c.name))),
        attachments=tuple(sorted(each(VOLUME_ATTACHMENT, parse_volume_attachment), key=lambda a: a.name)),
    )


def _parts(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
    return (expect_mapping(obj.get("metadata"), "metadata"), expect_mapping(obj.get("spec"), "spec"),
            expect_mapping(obj.get("status"), "status"))


def _bytes(raw: object, field: str) -> int:
    if raw is None:
        return 0
    try:
        return resource_amount("storage", raw)
    except QuantityError as error:
        raise InputError(error.problem, field=field, expected=error.expected) from None


def _one_source(spec: Mapping[str, Any]) -> None:
    """A PersistentVolume names exactly one volume source (ValidatePersistentVolumeSpec)."""
    sources = [name for name in VOLUME_SOURCES if spec.get(name) is not None]
    if not sources:
        raise InputError("no volume source", field="spec", expected=f"exactly one of {', '.join(VOLUME_SOURCES)}")
    if len(sources) > 1:
        raise InputError(f"may not specify more than 1 volume type ({sources[0]} is set too)",
                         field=f"spec.{sources[1]}", expected="exactly one volume source")


def _access_modes(raw: object) -> tuple[str, ...]:
    """``spec.accessModes``: a claim and a volume name at least one."""
    if not raw:
        raise InputError("at least 1 access mode is required", field="spec.accessModes",
                         expected=", ".join(ACCESS_MODES))
    modes = []
    for index, mode in enumerate(expect_list(raw, "spec.accessModes")):
        text = expect_str(mode, f"spec.accessModes[{index}]")
        if text not in ACCESS_MODES:
            raise InputError(f"unknown access mode {text!r}", field=f"spec.accessModes[{index}]",
                             expected=", ".join(ACCESS_MODES))
        modes.append(text)
    return tuple(modes)


def _volume_mode(raw: object) -> str:
    mode = expect_str(raw, "spec.volumeMode") or FILESYSTEM
    if mode not in (FILESYSTEM, BLOCK):
        raise InputError(f"unknown volumeMode {mode!r}", field="spec.volumeMode", expected=f"{FILESYSTEM} or {BLOCK}")
    return mode


def _claim_ref(raw: object) -> ClaimRef | None:
    if raw is None:
        return None
    ref = expect_mapping(raw, "spec.claimRef")
    return ClaimRef(expect_str(ref.get("namespace"), "spec.claimRef.namespace"),
                    expect_str(ref.get("name"), "spec.claimRef.name"), expect_str(ref.get("uid"), "spec.claimRef.uid"))


def _topology_requirement(raw: object, field: str) -> Requirement:
    expression = expect_mapping(raw, field)
    key = expect_str(expression.get("key"), f"{field}.key")
    values = tuple(expect_str(v, f"{field}.values[{i}]")
                   for i, v in enumerate(expect_list(expression.get("values"), f"{field}.values")))
    if not key or not values:
        raise InputError("a topology requirement needs a key and values", field=field,
                         expected="{key: topology.kubernetes.io/zone, values: [a]}")
    return Requirement(key, "In", values)
