"""GPUs as devices: whole GPUs and fractional shares of one device.

A pod's GPU need is ``count`` distinct devices with ``milli`` free each (1000 = a whole
GPU). It is read from the request conventions of the GPU-sharing stacks in use:

- whole GPUs: ``nvidia.com/gpu: k`` -> (k, 1000);
- HAMi: ``nvidia.com/gpu: k`` plus ``nvidia.com/gpucores`` / ``nvidia.com/gpumem-percentage``
  (percent of one device) -> (k, 10 * percent);
- Koordinator: ``koordinator.sh/gpu-core`` / ``koordinator.sh/gpu-memory-ratio`` (percent;
  a multiple of 100 means that many whole GPUs) -> (1, 10 * percent) or (percent / 100, 1000).

Which resource names those are is configurable: :class:`kubeplace.kube.gpu_conventions.GpuConventions`.

The larger of the core and memory shares is the share. Devices already in use are read
from Koordinator's ``scheduling.koordinator.sh/device-allocated`` annotation on bound
pods; bound pods without it are packed first-fit, in the order listed.

This device model is a rule on top of the kubelet's, never instead of it: the raw
``nvidia.com/gpu`` request still counts against the node's allocatable ``nvidia.com/gpu``
like every resource (with HAMi those are vGPU slots, several per device: a 30% share takes
one slot). The devices of a node are its allocatable count, or fewer when GPU Feature
Discovery's ``nvidia.com/gpu.count`` label says fewer physical devices back the slots.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kubeplace.kube.gpu_conventions import DEFAULT_CONVENTIONS, KOORD_CORE, KOORD_MEMORY, GpuConventions
from kubeplace.kube.memo import IdentityMemo, LastOf
from kubeplace.kube.objects import Node, Pod

WHOLE = 1000
MAX_DEVICES = 1024
"""Devices per node the model holds at most; a node advertising more is taken as this wide."""
DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"


@dataclass(frozen=True)
class GpuNeed:
    count: int = 0
    milli: int = 0


class GpuRequestError(ValueError):
    pass


def gpu_need(requests: Mapping[str, int], conv: GpuConventions = DEFAULT_CONVENTIONS) -> GpuNeed:
    count = int(requests.get(conv.device_resource, 0))
    per_device = max((int(requests.get(r, 0)) for r in conv.percent_per_device), default=0)
    of_gpus = max((int(requests.get(r, 0)) for r in conv.percent_of_gpus), default=0)
    if count > 0:
        if per_device <= 0 or per_device >= 100:
            return GpuNeed(count, WHOLE)
        return GpuNeed(count, per_device * 10)
    if of_gpus <= 0:
        return GpuNeed()
    if of_gpus < 100:
        return GpuNeed(1, of_gpus * 10)
    if of_gpus % 100:
        raise GpuRequestError(f"a GPU share over 100% must be whole GPUs (a multiple of 100), got {of_gpus}")
    return GpuNeed(of_gpus // 100, WHOLE)


def devices_of(node: Node, conv: GpuConventions = DEFAULT_CONVENTIONS) -> int:
    """The devices the device model packs on ``node``: its allocatable ``device_resource``, or
    fewer when the count label says fewer physical devices back them (HAMi: vGPU slots), unless
    the device plugin time-slices (replicas label above 1: every replica is handed out as a
    device). At most MAX_DEVICES. Once per node object."""
    return _DEVICES(node, conv)


def _devices(node: Node, conv: GpuConventions) -> int:
    slots = max(int(node.allocatable.get(conv.device_resource, 0)), 0)
    physical = _label_count(node, conv.count_label)
    if physical is not None and (_label_count(node, conv.replicas_label) or 1) <= 1:
        slots = min(slots, physical)
    return min(slots, MAX_DEVICES)


_DEVICES: IdentityMemo[Node, int] = IdentityMemo(_devices)
_DEVICE_COUNTS: LastOf[list[int]] = LastOf(lambda nodes, conv: [devices_of(n, conv) for n in nodes])
"""Every node's devices, kept for the last nodes (the same cycle after cycle)."""


def _label_count(node: Node, label: str) -> int | None:
    text = node.labels.get(label, "")
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else None


def allocated_devices(pod: Pod) -> list[tuple[int, int]] | None:
    """(device index, milli) pairs from Koordinator's annotation, or None if absent/unreadable."""
    text = pod.annotations.get(DEVICE_ALLOCATED)
    if not text:
        return None
    try:
        entries = json.loads(text).get("gpu", [])
        out = []
        for e in entries:
            res = e.get("resources", {})
            percent = max(int(str(res.get(KOORD_CORE, "0"))), int(str(res.get(KOORD_MEMORY, "0"))))
            out.append((int(e["minor"]), min(WHOLE, percent * 10)))
        return out
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def device_notes(devices: Sequence[int], requests: Mapping[str, int], conv: GpuConventions) -> dict[str, str]:
    """The annotations a binding carries for a pod given ``devices`` (none without devices)."""
    if not devices:
        return {}
    return {DEVICE_ALLOCATED: device_annotation(devices, gpu_need(requests, conv))}


def device_annotation(devices: Sequence[int], need: GpuNeed) -> str:
    """Koordinator's device-allocated annotation for the devices a plan chose.

    Koordinator's format names devices by minor number, which kubeplace knows (HAMi's
    needs device UUIDs, which a snapshot of Nodes does not carry)."""
    percent = str(need.milli // 10)
    entries = [{"minor": d, "resources": {KOORD_CORE: percent, KOORD_MEMORY: percent}} for d in devices]
    return json.dumps({"gpu": entries}, separators=(",", ":"))


@dataclass
class DeviceTable:
    """Free milli per device of every node; -1 marks devices a node does not have."""

    free: npt.NDArray[np.int64]  # (N, D)
    notes: list[str] = field(default_factory=list)

    @staticmethod
    def build(nodes: Sequence[Node], bound: Sequence[Pod], conv: GpuConventions,
              dra: Sequence[tuple[int, int]] = ()) -> DeviceTable:
        """``dra``: per node, (devices, free devices) of the DeviceClass serving ``device_resource``
        by DRA; they are the devices of a node without device-plugin ones (whole GPUs, the ones
        its claims hold taken)."""
        served = ([devices_of(n, conv) == 0 and dra[i][0] > 0 for i, n in enumerate(nodes)] if dra
                  else [False] * len(nodes))
        counts = ([min(dra[i][0], MAX_DEVICES) if served[i] else devices_of(n, conv) for i, n in enumerate(nodes)]
                  if dra else _DEVICE_COUNTS(nodes, conv))
        width = max(counts, default=0)
        if not width:  # (no node has a device: nothing of the bound pods to take either)
            return DeviceTable(np.full((len(nodes), 0), -1, dtype=np.int64))
        free = np.full((len(nodes), max(width, 1)), -1, dtype=np.int64)
        for i, g in enumerate(counts):
            free[i, :g] = WHOLE
            if served[i]:
                free[i, min(dra[i][1], g):g] = 0
        table = DeviceTable(free[:, :width] if width else free[:, :0])
        if not any(served):
            _take_bound_by_node(table, nodes, bound, conv)
            return table
        index = {n.name: i for i, n in enumerate(nodes)}
        for pod in bound:
            at = index.get(pod.node_name)
            if at is not None and table.free.shape[1] and not served[at]:
                table.take_bound(at, pod, conv)
        return table

    def take_bound(self, i: int, pod: Pod, conv: GpuConventions) -> None:
        held = _HELD(pod, conv)
        if held is None:
            return
        need, known = held
        if known is not None:
            for d, milli in known:
                if 0 <= d < self.free.shape[1] and self.free[i, d] >= 0:
                    self.free[i, d] = max(0, self.free[i, d] - milli)
            return
        for _ in range(min(need.count, self.free.shape[1])):  # lowest-index device with room, one at a time
            room = np.nonzero(self.free[i] >= need.milli)[0]
            if len(room):
                self.free[i, room[0]] -= need.milli


_NODE_ROWS: dict[str, tuple[Node, tuple[Pod, ...], GpuConventions, int, npt.NDArray[np.int64]]] = {}
"""Node name -> the row of free milli per device its bound pods left, with the node, the pods
(in order), the conventions and the table's width it was computed for: the last table's, for
its nodes only (a cluster whose nodes come and go for months keeps no row of a node gone)."""


def _take_bound_by_node(table: DeviceTable, nodes: Sequence[Node], bound: Sequence[Pod],
                        conv: GpuConventions) -> None:
    """Takes the bound pods' devices off ``table`` (every node's devices its own), node by node:
    a node's row depends only on the node and its own pods in order, so a node whose node object
    and pods (the same objects) are those of the last table takes that table's row again (a
    cycle binds a few pods; the other nodes' rows stay)."""
    width = table.free.shape[1]
    if not width:
        return
    by_node: dict[str, list[Pod]] = {}
    for pod in bound:
        by_node.setdefault(pod.node_name, []).append(pod)
    for i, node in enumerate(nodes):
        pods = tuple(by_node.get(node.name, ()))
        if not pods:
            continue
        last = _NODE_ROWS.get(node.name)
        if last is not None and last[0] is node and last[3] == width and last[1] == pods and last[2] == conv:
            table.free[i] = last[4]
            continue
        for pod in pods:
            table.take_bound(i, pod, conv)
        row = table.free[i].copy()
        row.flags.writeable = False
        _NODE_ROWS[node.name] = (node, pods, conv, width, row)
    if len(_NODE_ROWS) > len(nodes):  # nodes gone (autoscaled away, renamed): their rows go too
        here = {node.name for node in nodes}
        for name in [name for name in _NODE_ROWS if name not in here]:
            del _NODE_ROWS[name]


def forget_rows() -> None:
    """Drops the kept rows (tests compare a cold computation with a warm one)."""
    _NODE_ROWS.clear()


def _held(pod: Pod, conv: GpuConventions) -> tuple[GpuNeed, list[tuple[int, int]] | None] | None:
    """A bound pod's GPU need and the devices its annotation names (None: no valid GPU need)."""
    try:
        need = gpu_need(pod.requests, conv)
    except GpuRequestError:
        return None
    return None if need.count == 0 else (need, allocated_devices(pod))


_HELD: IdentityMemo[Pod, tuple[GpuNeed, list[tuple[int, int]] | None] | None] = IdentityMemo(_held)
"""What a bound pod holds of the devices, once per pod object (every cycle reads every bound pod)."""


def first_fit(free: npt.NDArray[np.int64], need: GpuNeed) -> list[int]:
    """Devices for one pod: the lowest-index devices with room (best-fit for shares)."""
    room = np.nonzero(free >= need.milli)[0] if need.count else np.zeros(0, np.int64)
    if len(room) < need.count:
        return [int(d) for d in room]  # overcommitted already; take what there is
    if need.milli < WHOLE:
        room = room[np.argsort(free[room] - need.milli, kind="stable")]
    return [int(d) for d in room[: need.count]]


def first_fit_rows(free: npt.NDArray[np.int64], need: GpuNeed) -> npt.NDArray[np.bool_]:
    """:func:`first_fit` on every row of ``free`` (nodes' free milli per device) at once: (B, D),
    True at the devices it picks for one pod on that node."""
    if need.count == 0 or free.shape[1] == 0:
        return np.zeros(free.shape, dtype=np.bool_)
    room = free >= need.milli
    if need.milli < WHOLE:  # the devices with room, least left over first (ties: the lower index)
        order = np.argsort(np.where(room, free - need.milli, WHOLE + 1), axis=1, kind="stable")
    else:  # the devices with room, lowest index first
        order = np.argsort(~room, axis=1, kind="stable")
    taken = np.arange(free.shape[1])[None, :] < np.minimum(need.count, room.sum(axis=1))[:, None]
    picked = np.zeros(free.shape, dtype=np.bool_)
    np.put_along_axis(picked, order, taken, axis=1)
    return picked


def device_fit(free: npt.NDArray[np.int64], need: GpuNeed) -> npt.NDArray[np.bool_]:
    """Per row of ``free`` (a node's free milli per device): at least ``count`` devices with
    ``milli`` free."""
    if free.shape[1] == 0:
        return np.zeros(free.shape[0], dtype=np.bool_)
    return np.asarray((free >= need.milli).sum(axis=1) >= need.count, dtype=np.bool_)


def pods_fitting(free: npt.NDArray[np.int64], need: GpuNeed) -> int:
    """How many pods with this need fit on devices with these free shares."""
    if need.count == 0:
        return 1 << 40
    per_device = np.where(free >= need.milli, free // max(need.milli, 1), 0)
    if need.count == 1:
        return int(per_device.sum())
    lo, hi = 0, int(per_device.sum()) // need.count
    while lo < hi:  # largest t with sum(min(a_d, t)) >= t * count
        t = (lo + hi + 1) // 2
        if int(np.minimum(per_device, t).sum()) >= t * need.count:
            lo = t
        else:
            hi = t - 1
    return lo
