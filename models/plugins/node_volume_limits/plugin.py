"""NodeVolumeLimits: a node attaches at most its CSINode's ``allocatable.count`` volumes of a CSI
driver (the kube-scheduler's NodeVolumeLimits plugin, nodevolumelimits/csi.go).

A volume is counted once per node by driver and volume handle: a bound claim's by its
PersistentVolume's CSI source, an unbound one as a new volume of its class's provisioner. What a
node has attached is what its running pods mount plus its VolumeAttachments. As a filter, a pod
fails where its volumes that are not attached there yet would exceed the limit; across the
batch, a group rule per driver caps the pods a node takes to its room left, each pod counted for
its most new volumes of that driver (exact when every such pod adds as many), on the nodes only
where the pending pods' volumes of that driver, each counted once, do not all fit: pods sharing a
claim attach it once per node (the kube-scheduler counts unique volumes), so where all of them fit
any number of those pods do. A volume of an in-tree plugin the kube-scheduler migrates to CSI
(AWS EBS, GCE PD, Azure Disk, Cinder, Portworx: ``kube.storage.IN_TREE_DRIVERS``), bound or by its
class's provisioner, counts as its CSI driver's, as csi-translation-lib translates it; its
VolumeAttachments do not count (the kube-scheduler counts those of CSI volumes only).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from kubeplace.kube.objects import Node, Pod
from kubeplace.kube.storage import IN_TREE_DRIVERS
from kubeplace.kube.storage_objects import Storage
from kubeplace.models.framework import ClassView, RunContext
from kubeplace.models.problem import UNCAPPED, BoolArray, Gang, GroupCap

NAME = "NodeVolumeLimits"
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
UNLIMITED = 1 << 40

Volumes = Mapping[str, frozenset[str]]
"""Driver -> unique volume names (``driver/handle``)."""


def pod_volumes(pod: Pod, storage: Storage) -> dict[str, frozenset[str]]:
    """The pod's CSI volumes by driver (filterAttachableVolumes); claims that do not exist, and
    volumes of no CSI driver, are not counted."""
    if not pod.volumes:  # (most pods: every bound pod of every cycle asks this)
        return {}
    found: dict[str, set[str]] = {}
    for volume in pod.volumes:
        claim = storage.claim(pod.namespace, volume.claim)
        if claim is None:
            continue
        pv = storage.volumes.get(claim.volume_name) if claim.volume_name else None
        if pv is not None:
            driver, handle = (pv.csi_driver, pv.csi_handle) if pv.csi_driver else pv.migrated
        else:
            storage_class = storage.classes.get(claim.storage_class) if claim.storage_class else None
            driver, handle = (IN_TREE_DRIVERS.get(storage_class.provisioner, storage_class.provisioner),
                              f"~{claim.key}") if storage_class else ("", "")
        if driver and handle:
            found.setdefault(driver, set()).add(f"{driver}/{handle}")
    return {driver: frozenset(names) for driver, names in found.items()}


@dataclass(frozen=True)
class NodeVolumeLimits:
    limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Node -> driver -> attachable volumes (drivers with a count only)."""
    attached: Mapping[str, Volumes] = field(default_factory=dict)
    """Node -> what it has attached."""
    wanted: Mapping[str, Volumes] = field(default_factory=dict)
    """Pending pod key -> its volumes."""
    name: str = NAME
    reason: str = MAX_VOLUME_COUNT

    @cached_property
    def drivers(self) -> frozenset[str]:
        """The drivers some node limits."""
        return frozenset(d for limits in self.limits.values() for d in limits)

    @cached_property
    def attached_anywhere(self) -> Volumes:
        return _union(self.attached.values())

    @cached_property
    def wanted_anywhere(self) -> Volumes:
        return _union(self.wanted.values())

    def pod_key(self, pod: Pod) -> Hashable:
        """Per limited driver: how many volumes, and which of them some node has attached."""
        return tuple(sorted((driver, len(names), names & self.attached_anywhere.get(driver, frozenset()))
                            for driver, names in self.wanted.get(pod.key, {}).items() if driver in self.drivers))

    def node_key(self, node: Node) -> Hashable:
        """Per limited driver: the room left, and which volumes of pending pods it has attached."""
        if node.name not in self.limits:
            return ()
        return tuple(sorted((driver, self._room(node.name, driver),
                             self._attached(node.name, driver) & self.wanted_anywhere.get(driver, frozenset()))
                            for driver in self.limits.get(node.name, {})))

    def node_key_basis(self) -> object:
        """What ``node_key`` reads: the limited nodes' limits and attached volumes, and the
        pending pods' volumes (none of them without a limited node)."""
        return (self.limits, {name: self.attached.get(name) for name in self.limits},
                self.wanted_anywhere if self.limits else None)

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        wanted = self.wanted.get(pod.key, {})
        return np.array([all(self._room(node.name, driver) >= len(names - self._attached(node.name, driver))
                             for driver, names in wanted.items()) for node in nodes], dtype=np.bool_)

    def constraints(self, view: ClassView) -> Sequence[GroupCap | Gang]:
        rules: list[GroupCap | Gang] = []
        for driver in sorted(self.drivers):
            counts = [len(self.wanted.get(pod.key, {}).get(driver, ())) for pod in view.class_pods]
            members = tuple(c for c, k in enumerate(counts) if k > 0)
            if members:
                most = max(counts)
                everything = self.wanted_anywhere.get(driver, frozenset())
                cap = np.array([UNCAPPED if len(everything - self._attached(n.name, driver)) <= room else room // most
                                for n in view.nodes for room in (self._room(n.name, driver),)], dtype=np.int64)
                if (cap < UNCAPPED).any():
                    rules.append(GroupCap(f"attachable volumes of {driver}", members, cap))
        return rules

    def _room(self, node: str, driver: str) -> int:
        limit = self.limits.get(node, {}).get(driver)
        return UNLIMITED if limit is None else max(limit - len(self._attached(node, driver)), 0)

    def _attached(self, node: str, driver: str) -> frozenset[str]:
        return self.attached.get(node, {}).get(driver, frozenset())


def _union(all_volumes: Iterable[Volumes]) -> Volumes:
    out: dict[str, frozenset[str]] = {}
    for volumes in all_volumes:
        for driver, names in volumes.items():
            out[driver] = out.get(driver, frozenset()) | names
    return out


def build(_args: None, ctx: RunContext) -> NodeVolumeLimits:
    snapshot = ctx.snapshot
    storage = snapshot.storage
    limits = {name: {d.name: d.allocatable_count for d in csi.drivers if d.allocatable_count is not None}
              for name, csi in storage.csi_nodes.items()}
    attached: dict[str, dict[str, set[str]]] = {}
    for pod in snapshot.bound:
        for driver, names in pod_volumes(pod, storage).items() if pod.volumes else ():
            attached.setdefault(pod.node_name, {}).setdefault(driver, set()).update(names)
    for attachment in storage.attachments:
        pv = storage.volumes.get(attachment.volume)
        if attachment.attacher and pv is not None and pv.csi_driver:
            attached.setdefault(attachment.node, {}).setdefault(attachment.attacher, set()).add(
                f"{attachment.attacher}/{pv.csi_handle}")
    wanted = {pod.key: pod_volumes(pod, storage) for pod in snapshot.pending}
    return NodeVolumeLimits({n: lim for n, lim in limits.items() if lim},
                            {n: {d: frozenset(v) for d, v in drivers.items()} for n, drivers in attached.items()},
                            {k: v for k, v in wanted.items() if v})
