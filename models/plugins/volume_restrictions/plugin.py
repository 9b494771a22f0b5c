"""VolumeRestrictions: a ReadWriteOncePod claim is used by one pod at a time (the kube-scheduler's
VolumeRestrictions plugin, pkg/scheduler/framework/plugins/volumerestrictions).

Its PreFilter rejects a pod whose ``persistentVolumeClaim`` volume names a claim that does not
exist. A pod that mounts (as ``persistentVolumeClaim``, as the kube-scheduler counts) a
ReadWriteOncePod claim already used by a running pod fails on every node. Among the pending pods
that share such a claim, the first in queue order that VolumeBinding does not reject takes it and
the others fail as if it ran already, which is what the kube-scheduler, one pod at a time, would
leave. Inline disk conflicts (GCE PD, EBS, RBD, iSCSI) are not modelled: a pod with such a volume
is left to the default scheduler (:meth:`VolumeRestrictions.unmodelled`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.objects import Node, Pod, SpecRule
from kubeplace.kube.storage_objects import READ_WRITE_ONCE_POD, Storage
from kubeplace.models.framework import RunContext
from kubeplace.models.problem import BoolArray
from kubeplace.models.volumes import not_found, queue_order, resolve

NAME = "VolumeRestrictions"
INLINE_DISKS = "inline disk volumes (gcePersistentDisk, awsElasticBlockStore, rbd, iscsi)"
READ_WRITE_ONCE_POD_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
                                "already in-use by another pod")


@dataclass(frozen=True)
class VolumeRestrictions:
    missing: Mapping[str, str] = field(default_factory=dict)
    """Pending pod key -> the rejection of its first claim that does not exist."""
    conflicted: frozenset[str] = frozenset()
    """Pending pods whose ReadWriteOncePod claim another pod uses (or takes first)."""
    name: str = NAME
    reason: str = READ_WRITE_ONCE_POD_CONFLICT

    def pod_key(self, pod: Pod) -> Hashable:
        return (self.missing.get(pod.key, ""), pod.key in self.conflicted)

    def node_key(self, node: Node) -> Hashable:
        return None

    def node_key_basis(self) -> object:
        return ()  # (every node has the same key)

    def rejection(self, pod: Pod) -> str:
        return self.missing.get(pod.key, "")

    def unmodelled(self, pod: Pod) -> tuple[str, ...]:
        return (INLINE_DISKS,) if SpecRule.INLINE_DISKS in pod.spec_rules else ()

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        blocked = pod.key in self.missing or pod.key in self.conflicted
        return np.full(len(nodes), not blocked, dtype=np.bool_)


def read_write_once_pod_claims(pod: Pod, storage: Storage) -> set[str]:
    """Keys of the ReadWriteOncePod claims the pod mounts as ``persistentVolumeClaim`` volumes."""
    found = set()
    for volume in pod.volumes:
        claim = storage.claim(pod.namespace, volume.claim)
        if not volume.ephemeral and claim is not None and READ_WRITE_ONCE_POD in claim.access_modes:
            found.add(claim.key)
    return found


def build(_args: None, ctx: RunContext) -> VolumeRestrictions:
    snapshot = ctx.snapshot
    storage = snapshot.storage
    missing: dict[str, str] = {}
    for pod in snapshot.pending:
        absent = next((v.claim for v in pod.volumes if not v.ephemeral and storage.claim(pod.namespace, v.claim)
                       is None), None)
        if absent is not None:
            missing[pod.key] = not_found("persistentvolumeclaim", absent)
    conflicted = set()
    # (a pod without volumes mounts no ReadWriteOncePod claim: left out of the walk)
    walked = queue_order([p for p in snapshot.pending if p.volumes and not p.unmodelled and p.key not in missing])
    used = ({f"{pod.namespace}/{v.claim}" for pod in snapshot.bound for v in pod.volumes if not v.ephemeral}
            if walked else set())
    for pod in walked:
        wanted = read_write_once_pod_claims(pod, storage)
        if wanted & used:
            conflicted.add(pod.key)
        elif wanted and not resolve(pod, storage).rejection:
            used |= wanted
    return VolumeRestrictions(missing, frozenset(conflicted))
