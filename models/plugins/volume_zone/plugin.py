"""VolumeZone: a bound volume's zone and region labels (``topology.kubernetes.io/zone`` and
``/region``, and their ``failure-domain.beta`` forms) must match the node's, on nodes that have
any of these labels (the kube-scheduler's VolumeZone plugin, volumezone/volume_zone.go). A label
value may list several zones joined by ``__``.

Its PreFilter rejects a pod whose ``persistentVolumeClaim`` claim does not exist, or names no
volume while its class does not wait for the first consumer, or whose volume does not exist.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.memo import IdentityMemo
from kubeplace.kube.objects import Node, Pod
from kubeplace.kube.storage_objects import WAIT_FOR_FIRST_CONSUMER, Storage
from kubeplace.models.framework import RunContext
from kubeplace.models.problem import BoolArray
from kubeplace.models.volumes import not_found

NAME = "VolumeZone"
NO_VOLUME_ZONE = "node(s) had no available volume zone"
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
GA_LABEL = {BETA_ZONE: ZONE, BETA_REGION: REGION}

Topology = tuple[tuple[str, frozenset[str]], ...]
"""(label key, values) a node must match, one per topology label of each bound volume."""


def _zone_labels(node: Node) -> tuple[str | None, ...]:
    return tuple(node.labels.get(k) for k in TOPOLOGY_LABELS)


_ZONES: IdentityMemo[Node, tuple[str | None, ...]] = IdentityMemo(_zone_labels)
"""The node's topology labels, once per node object."""


@dataclass(frozen=True)
class VolumeZone:
    topologies: Mapping[str, Topology] = field(default_factory=dict)
    """Pending pod key -> what its bound volumes' labels require."""
    rejections: Mapping[str, str] = field(default_factory=dict)
    name: str = NAME
    reason: str = NO_VOLUME_ZONE

    def pod_key(self, pod: Pod) -> Hashable:
        return (self.rejections.get(pod.key, ""), self.topologies.get(pod.key, ()))

    def node_key(self, node: Node) -> Hashable:
        return _ZONES(node)

    def node_key_basis(self) -> object:
        return ()

    def rejection(self, pod: Pod) -> str:
        return self.rejections.get(pod.key, "")

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        if pod.key in self.rejections:
            return np.zeros(len(nodes), dtype=np.bool_)
        wanted = self.topologies.get(pod.key, ())
        return np.array([_fits(wanted, node) for node in nodes], dtype=np.bool_)


def _fits(wanted: Topology, node: Node) -> bool:
    if not wanted or not any(k in node.labels for k in TOPOLOGY_LABELS):
        return True
    for key, values in wanted:
        value = node.labels.get(key)
        if value is None:
            value = node.labels.get(GA_LABEL.get(key, key))
        if value is None or value not in values:
            return False
    return True


def pod_topology(pod: Pod, storage: Storage) -> tuple[str, Topology]:
    """(rejection, topology) of the pod's ``persistentVolumeClaim`` volumes (getPVbyPod)."""
    found: list[tuple[str, frozenset[str]]] = []
    for volume in pod.volumes:
        if volume.ephemeral:
            continue
        claim = storage.claim(pod.namespace, volume.claim)
        if claim is None:
            return not_found("persistentvolumeclaim", volume.claim), ()
        if not claim.volume_name:
            if not claim.storage_class:
                return "PersistentVolumeClaim had no pv name and storageClass name", ()
            storage_class = storage.classes.get(claim.storage_class)
            if storage_class is None:
                return not_found("storageclass.storage.k8s.io", claim.storage_class), ()
            if storage_class.binding_mode == WAIT_FOR_FIRST_CONSUMER:
                continue
            return "PersistentVolume had no name", ()
        pv = storage.volumes.get(claim.volume_name)
        if pv is None:
            return not_found("persistentvolume", claim.volume_name), ()
        for key in TOPOLOGY_LABELS:
            if key in pv.labels:
                zones = [z.strip() for z in pv.labels[key].split("__")]
                if all(zones):  # a malformed value is ignored, as the kube-scheduler does
                    found.append((key, frozenset(zones)))
    return "", tuple(found)


def build(_args: None, ctx: RunContext) -> VolumeZone:
    topologies, rejections = {}, {}
    for pod in ctx.snapshot.pending:
        rejection, topology = pod_topology(pod, ctx.snapshot.storage)
        if rejection:
            rejections[pod.key] = rejection
        elif topology:
            topologies[pod.key] = topology
    return VolumeZone(topologies, rejections)
