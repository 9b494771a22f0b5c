"""The verifier's GPU-device rule, re-implemented plainly and apart from the model.

Each placed GPU pod must name exactly the devices it needs, devices the node has, no
device twice; on every device, the shares of bound and placed pods add up to at most
one GPU, and a whole GPU is nobody else's. Bound pods' devices come from Koordinator's
device-allocated annotation, or, without it, are assumed packed first-fit.

A node has as many devices as its allocatable device resource says, or fewer when the node
label ``<device resource>.count`` (GPU Feature Discovery) says fewer physical devices back
them (HAMi's vGPU slots), unless ``<device resource>.replicas`` is above 1 (time slicing: each
slot is handed out as a device). This rule comes on top of the kubelet's, which
``verify.py`` checks on the raw requests (slots included). On a node where a DeviceClass serves
the device resource by DRA (no device plugin gives it), the devices are the pod's extended
resource claim's, which DynamicResources' verifier check checks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.plan.verify import VerifySettings, Violation

RULE = "GPUDevices"
FULL = 1000
ANNOTATION = "scheduling.koordinator.sh/device-allocated"
DEFAULT_SETTINGS = VerifySettings()


def gpu_demand(requests: Mapping[str, int], settings: VerifySettings) -> tuple[int, int]:
    """(devices, milli per device) a pod needs; (0, 0) for none."""
    devices = requests.get(settings.gpu.device_resource, 0)
    per_device = max([requests.get(r, 0) for r in settings.gpu.percent_per_device] + [0])
    of_gpus = max([requests.get(r, 0) for r in settings.gpu.percent_of_gpus] + [0])
    if devices:
        return devices, (per_device * 10 if 0 < per_device < 100 else FULL)
    if 0 < of_gpus < 100:
        return 1, of_gpus * 10
    return of_gpus // 100, (FULL if of_gpus else 0)


Devices = tuple[str, str, str, tuple[int, ...]] | tuple[str, str, str, tuple[int, ...], int]
"""(namespace, name, node, GPU devices), with how many copies go there for an object standing for
several pods (``Pod.copies``: then the devices of them all, dealt out as the plan deals them)."""


def verify_devices(snapshot: Snapshot, placements: Sequence[Devices],
                   settings: VerifySettings = DEFAULT_SETTINGS) -> list[Violation]:
    pods = {(p.namespace, p.name): p for p in snapshot.pending}
    nodes = snapshot.node_by_name
    bound = snapshot.bound_by_node
    devices_of: dict[str, int] = {}
    load: dict[str, dict[int, int]] = {}  # only the nodes the plan places on, each worked out once
    out = []
    for entry in placements:
        namespace, name, node_name, devices = entry[0], entry[1], entry[2], entry[3]
        copies = entry[4] if len(entry) == 5 else 1
        pod, node = pods.get((namespace, name)), nodes.get(node_name)
        if pod is None or node is None:
            continue  # the main verifier reports these
        need = gpu_demand(pod.requests, settings)
        if not devices and need[0] == 0:
            continue  # no GPU asked for, none given
        if snapshot.devices.serves(settings.gpu.device_resource, node.allocatable):
            continue  # served by DRA there: its devices are the claim's (DynamicResources' check)
        if node_name not in load:
            devices_of[node_name] = device_count(node, settings)
            load[node_name] = _bound_load(node, devices_of[node_name], bound.get(node_name, ()), settings)
        for share in _dealt(devices, copies):
            for problem in _place(need, share, devices_of[node_name], load[node_name]):
                out.append(Violation(namespace, name, node_name, RULE, problem))
    return out


def _dealt(devices: tuple[int, ...], copies: int) -> list[tuple[int, ...]]:
    """The devices of ``copies`` pods, copy j taking the sorted entries j, j + copies, ..."""
    if copies == 1:
        return [devices]
    ordered = sorted(devices)
    return [tuple(ordered[j::copies]) for j in range(copies)]


def device_count(node: Node, settings: VerifySettings) -> int:
    slots = node.allocatable.get(settings.gpu.device_resource, 0)
    physical = node.labels.get(settings.gpu.count_label, "")
    replicas = node.labels.get(settings.gpu.replicas_label, "1")
    time_sliced = not (replicas.isascii() and replicas.isdigit()) or int(replicas) > 1
    if physical.isascii() and physical.isdigit() and not time_sliced:
        return min(slots, int(physical))
    return slots


def _place(need: tuple[int, int], devices: tuple[int, ...], count: int, load: dict[int, int]) -> list[str]:
    wanted, milli = need
    if wanted == 0:
        return [f"a pod without GPU requests was given devices {list(devices)}"] if devices else []
    if len(devices) != wanted or len(set(devices)) != wanted:
        return [f"needs {wanted} distinct GPU device(s), the plan gives {list(devices)}"]
    problems = []
    for d in devices:
        if not 0 <= d < count:
            problems.append(f"device {d} does not exist (the node has {count})")
            continue
        used = load.get(d, 0)
        if used + milli > FULL:
            problems.append(f"device {d} has {FULL - used} milli-GPU free, the pod needs {milli}")
        load[d] = used + milli
    return problems


def _bound_load(node: Node, count: int, bound: Sequence[Pod], settings: VerifySettings) -> dict[int, int]:
    """Milli-GPU in use per device (devices not listed: none), from the running pods."""
    load: dict[int, int] = {}
    for pod in (p for p in bound if p.node_name == node.name and not p.finished):
        wanted, milli = gpu_demand(pod.requests, settings)
        known = _annotated(pod)
        if known is not None:
            for d, m in known:
                if 0 <= d < count:
                    load[d] = load.get(d, 0) + m
            continue
        for _ in range(min(wanted, count)):
            room = _first_with_room(load, count, milli)
            if room is None:
                break
            load[room] = load.get(room, 0) + milli
    return load


def _first_with_room(load: dict[int, int], count: int, milli: int) -> int | None:
    """The lowest device with ``milli`` free: a used one, or the first never used."""
    unused = next(d for d in range(len(load) + 1) if d not in load)
    roomy = [d for d, used in load.items() if used + milli <= FULL]
    candidates = [*roomy, *([unused] if unused < count else [])]
    return min(candidates) if candidates else None


def _annotated(pod: Pod) -> list[tuple[int, int]] | None:
    try:
        entries = json.loads(pod.annotations[ANNOTATION])["gpu"]
        return [(int(e["minor"]), 10 * max(int(v) for v in e["resources"].values())) for e in entries]
    except (KeyError, ValueError, TypeError):
        return None
