"""VolumeZone's independent verifier check, over the whole plan: on a node with a zone or region
label, the volume a placed pod's bound claim (``persistentVolumeClaim``, bind completed) names
lists the node's value in each of its zone and region labels (a value may list several joined by
``__``; the ``failure-domain.beta`` keys read the node's GA label when it lacks the beta one), as
the kube-scheduler's volumezone plugin checks. Imports only ``kubeplace.kube``."""

from __future__ import annotations

from collections.abc import Iterator

from kubeplace.kube.objects import Node, Pod
from kubeplace.kube.plan_view import Finding, PlanView
from kubeplace.kube.storage_objects import PersistentVolume, Storage

_ZONE_LABELS = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
                "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
                "topology.kubernetes.io/zone": "topology.kubernetes.io/zone",
                "topology.kubernetes.io/region": "topology.kubernetes.io/region"}


def check_plan(view: PlanView, _args: None) -> Iterator[Finding]:
    storage = view.snapshot.storage
    for placed in view.placements:
        node, pod = placed.node, placed.pod
        if not pod.volumes or not any(k in node.labels for k in _ZONE_LABELS):
            continue
        for volume in _bound_volumes(pod, storage):
            for key, text in volume.labels.items():
                zones = {z.strip() for z in text.split("__")}
                node_value = _node_value(node, key)
                if key in _ZONE_LABELS and "" not in zones and node_value not in zones:
                    yield (pod.namespace, pod.name, node.name,
                           f"volume {volume.name} is in {key}={text}, the node in {node_value}")


def _bound_volumes(pod: Pod, storage: Storage) -> Iterator[PersistentVolume]:
    """The volumes of the pod's usable bound ``persistentVolumeClaim`` claims (those VolumeBinding
    does not refuse before it reads the volume's labels), in the pod's order."""
    for volume in pod.volumes:
        claim = None if volume.ephemeral else storage.claim(pod.namespace, volume.claim)
        if claim is None or claim.phase == "Lost" or claim.deleting:
            continue
        if claim.volume_name and "pv.kubernetes.io/bind-completed" in claim.annotations:
            found = storage.volumes.get(claim.volume_name)
            if found is not None:
                yield found


def _node_value(node: Node, key: str) -> str | None:
    return node.labels.get(key, node.labels.get(_ZONE_LABELS.get(key, key)))
