"""Manifests of storage objects for tests (claims, volumes, classes, CSI objects), written as the
API server returns them, and pods that mount claims::

    claim("data-web-0", size="10Gi", storage_class="local")          # unbound
    claim("data-db-0", volume="pv-1")                                # bound to pv-1
    volume("pv-1", size="10Gi", storage_class="local", node="n1")    # local PV on n1
    storage_class("local", wait=True)                                # no-provisioner, WFFC
    mounting(pod("web-0").cpu("1"), "data-web-0")
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubeplace.kube.storage_objects import ANN_BIND_COMPLETED, ANN_SELECTED_NODE, NO_PROVISIONER
from tests.builders import PodBuilder

Manifest = dict[str, Any]
RWO = "ReadWriteOnce"


def claim(name: str, *, ns: str = "default", size: str = "1Gi", storage_class: str | None = "local",
          modes: Sequence[str] = (RWO,), volume: str = "", selected_node: str = "", selector: Manifest | None = None,
          owner_uid: str = "", block: bool = False, phase: str = "", deleting: bool = False) -> Manifest:
    """A claim; with ``volume`` it is bound to it (volumeName and the bind-completed mark)."""
    annotations: dict[str, str] = {}
    if volume:
        annotations[ANN_BIND_COMPLETED] = "yes"
    if selected_node:
        annotations[ANN_SELECTED_NODE] = selected_node
    metadata: Manifest = {"name": name, "namespace": ns, "uid": f"uid-pvc-{ns}-{name}", "resourceVersion": "1",
                          "annotations": annotations}
    if owner_uid:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid,
                                        "controller": True}]
    if deleting:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: Manifest = {"accessModes": list(modes), "resources": {"requests": {"storage": size}},
                      "volumeMode": "Block" if block else "Filesystem"}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume:
        spec["volumeName"] = volume
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec,
            "status": {"phase": phase or ("Bound" if volume else "Pending")}}


def volume(name: str, *, size: str = "1Gi", storage_class: str = "local", modes: Sequence[str] = (RWO,),
           node: str = "", zone: str = "", terms: list[Manifest] | None = None,
           claim_ref: tuple[str, str] | None = None, labels: dict[str, str] | None = None, phase: str = "",
           csi: tuple[str, str] | None = None, block: bool = False) -> Manifest:
    """A PersistentVolume; ``node`` pins it to a hostname, ``zone`` to a zone (node affinity);
    ``claim_ref`` (namespace, name) binds or pre-binds it to a claim."""
    spec: Manifest = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": storage_class,
                      "volumeMode": "Block" if block else "Filesystem",
                      "persistentVolumeReclaimPolicy": "Delete"}
    expressions = []
    if node:
        expressions.append({"key": "kubernetes.io/hostname", "operator": "In", "values": [node]})
    if zone:
        expressions.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]})
    if terms is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    elif expressions:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}
    if claim_ref is not None:
        ns, claim_name = claim_ref
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": ns, "name": claim_name,
                            "uid": f"uid-pvc-{ns}-{claim_name}"}
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    elif "nodeAffinity" in spec:
        spec["local"] = {"path": f"/mnt/{name}"}
    else:  # a volume any node can mount: a local one must name its node
        spec["nfs"] = {"server": "nfs.example", "path": f"/{name}"}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "uid": f"uid-pv-{name}", "resourceVersion": "1", "labels": labels or {}},
            "spec": spec, "status": {"phase": phase or ("Bound" if claim_ref else "Available")}}


def storage_class(name: str, *, provisioner: str = NO_PROVISIONER, wait: bool = True,
                  zones: Sequence[str] = ()) -> Manifest:
    """A StorageClass (WaitForFirstConsumer unless ``wait=False``); ``zones`` its allowed topologies."""
    out: Manifest = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                     "provisioner": provisioner, "reclaimPolicy": "Delete",
                     "volumeBindingMode": "WaitForFirstConsumer" if wait else "Immediate"}
    if zones:
        out["allowedTopologies"] = [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone",
                                                                "values": list(zones)}]}]
    return out


def csi_node(name: str, *drivers: tuple[str, int | None], topology_keys: Sequence[str] = ()) -> Manifest:
    """A CSINode with (driver, attachable count or None) entries."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": driver, "nodeID": name, "topologyKeys": list(topology_keys),
                                  **({"allocatable": {"count": count}} if count is not None else {})}
                                 for driver, count in drivers]}}


def csi_driver(name: str, *, storage_capacity: bool = False) -> Manifest:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name},
            "spec": {"attachRequired": True, "storageCapacity": storage_capacity}}


def storage_capacity(name: str, storage_class_name: str, zone: str, capacity: str, *,
                     ns: str = "kube-system") -> Manifest:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {"name": name, "namespace": ns}, "storageClassName": storage_class_name,
            "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": zone}}, "capacity": capacity}


def mounting(builder: PodBuilder, *claims: str, ephemeral: Sequence[str] = ()) -> PodBuilder:
    """The pod with a persistentVolumeClaim volume per claim name and an ephemeral volume per name."""
    volumes: list[Manifest] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                               for i, c in enumerate(claims)]
    volumes += [{"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": [RWO], "resources": {"requests": {"storage": "1Gi"}}}}}} for name in ephemeral]
    return builder.spec("volumes", volumes)
