"""NodeVolumeLimits' independent verifier check, per node over the whole plan: the CSI volumes
attached to a node (those its running pods mount, its VolumeAttachments, and those of the pods
placed there, each volume counted once by driver and handle) stay within its CSINode's
``allocatable.count`` for each driver (the kube-scheduler's nodevolumelimits/csi.go). An unbound
claim counts as a new volume of its class's provisioner; an in-tree volume the kube-scheduler
migrates to CSI as its CSI driver's (``kube.storage.IN_TREE_DRIVERS``). Imports only
``kubeplace.kube``."""

from __future__ import annotations

from collections.abc import Iterator

from kubeplace.kube.objects import Pod
from kubeplace.kube.plan_view import Finding, PlanView
from kubeplace.kube.storage import IN_TREE_DRIVERS
from kubeplace.kube.storage_objects import Storage


def check_plan(view: PlanView, _args: None) -> Iterator[Finding]:
    storage = view.snapshot.storage
    attached: dict[tuple[str, str], set[str]] = {}
    if not any(placed.pod.volumes for placed in view.placements):
        return  # no volume to attach (the running pods' volumes are not looked at)
    for pod in view.snapshot.bound:
        for driver, handle in _csi_volumes(pod, storage):
            attached.setdefault((pod.node_name, driver), set()).add(handle)
    for attachment in storage.attachments:
        pv = storage.volumes.get(attachment.volume)
        if pv is not None and pv.csi_driver and attachment.attacher:
            attached.setdefault((attachment.node, attachment.attacher), set()).add(pv.csi_handle)
    added: dict[tuple[str, str], set[str]] = {}
    for placed in view.placements:
        if not placed.pod.volumes:
            continue  # no volume to attach
        node = placed.node
        csi_node = storage.csi_nodes.get(node.name)
        limits = {d.name: d.allocatable_count for d in (csi_node.drivers if csi_node else ())
                  if d.allocatable_count is not None}
        for driver, handle in _csi_volumes(placed.pod, storage):
            key = (node.name, driver)
            if driver not in limits or handle in attached.get(key, set()) | added.get(key, set()):
                continue
            added.setdefault(key, set()).add(handle)
            total = len(attached.get(key, set())) + len(added[key])
            if total > limits[driver]:
                yield (placed.pod.namespace, placed.pod.name, node.name,
                       f"{total} volumes of {driver} on the node, limit {limits[driver]}")


def _csi_volumes(pod: Pod, storage: Storage) -> set[tuple[str, str]]:
    """(driver, handle) of the pod's CSI volumes; an unbound claim's as a new volume of its provisioner."""
    found = set()
    for volume in pod.volumes:
        claim = storage.claim(pod.namespace, volume.claim)
        if claim is None:
            continue
        pv = storage.volumes.get(claim.volume_name) if claim.volume_name else None
        if pv is not None:
            driver, handle = (pv.csi_driver, pv.csi_handle) if pv.csi_driver else pv.migrated
            if driver and handle:
                found.add((driver, handle))
        elif claim.storage_class in storage.classes:
            provisioner = storage.classes[claim.storage_class].provisioner
            found.add((IN_TREE_DRIVERS.get(provisioner, provisioner), f"new volume for {claim.key}"))
    return found
