"""The verifier's GPU-device rule, re-implemented plainly and apart from the model.

Each placed GPU pod must name exactly the devices it needs, devices the node has, no
device twice; on every device, the shares of bound and placed pods add up to at most
one GPU, and a whole GPU is nobody else's. Bound pods' devices come from Koordinator's
device-allocated annotation, or, without it, are assumed packed first-fit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.plan.verify import Violation

RULE = "GPUDevices"
FULL = 1000
DEVICE_RESOURCE = "nvidia.com/gpu"
PERCENT_PER_DEVICE = ("nvidia.com/gpucores", "nvidia.com/gpumem-percentage")
PERCENT_OF_GPUS = ("koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio")
ANNOTATION = "scheduling.koordinator.sh/device-allocated"


def gpu_demand(requests: Mapping[str, int]) -> tuple[int, int]:
    """(devices, milli per device) a pod needs; (0, 0) for none."""
    devices = requests.get(DEVICE_RESOURCE, 0)
    per_device = max([requests.get(r, 0) for r in PERCENT_PER_DEVICE] + [0])
    of_gpus = max([requests.get(r, 0) for r in PERCENT_OF_GPUS] + [0])
    if devices:
        return devices, (per_device * 10 if 0 < per_device < 100 else FULL)
    if 0 < of_gpus < 100:
        return 1, of_gpus * 10
    return of_gpus // 100, (FULL if of_gpus else 0)


def verify_devices(snapshot: Snapshot, placements: Sequence[tuple[str, str, str, tuple[int, ...]]]) -> list[Violation]:
    pods = {(p.namespace, p.name): p for p in snapshot.pending}
    nodes = {n.name: n for n in snapshot.nodes}
    load = {name: _bound_load(node, snapshot.bound) for name, node in nodes.items()}
    out = []
    for namespace, name, node_name, devices in placements:
        pod, node = pods.get((namespace, name)), nodes.get(node_name)
        if pod is None or node is None:
            continue  # the main verifier reports these
        for problem in _place(pod, node, devices, load[node_name]):
            out.append(Violation(namespace, name, node_name, RULE, problem))
    return out


def _place(pod: Pod, node: Node, devices: tuple[int, ...], load: list[int]) -> list[str]:
    count, milli = gpu_demand(pod.requests)
    if count == 0:
        return [f"a pod without GPU requests was given devices {list(devices)}"] if devices else []
    if len(devices) != count or len(set(devices)) != count:
        return [f"needs {count} distinct GPU device(s), the plan gives {list(devices)}"]
    problems = []
    for d in devices:
        if not 0 <= d < len(load):
            problems.append(f"device {d} does not exist (the node has {len(load)})")
            continue
        if load[d] + milli > FULL:
            problems.append(f"device {d} has {FULL - load[d]} milli-GPU free, the pod needs {milli}")
        load[d] += milli
    return problems


def _bound_load(node: Node, bound: Sequence[Pod]) -> list[int]:
    load = [0] * node.allocatable.get(DEVICE_RESOURCE, 0)
    for pod in (p for p in bound if p.node_name == node.name and not p.finished):
        count, milli = gpu_demand(pod.requests)
        known = _annotated(pod)
        if known is not None:
            for d, m in known:
                if 0 <= d < len(load):
                    load[d] += m
            continue
        for _ in range(count):
            fitting = [d for d in range(len(load)) if load[d] + milli <= FULL]
            if fitting:
                load[fitting[0]] += milli
    return load


def _annotated(pod: Pod) -> list[tuple[int, int]] | None:
    try:
        entries = json.loads(pod.annotations[ANNOTATION])["gpu"]
        return [(int(e["minor"]), 10 * max(int(v) for v in e["resources"].values())) for e in entries]
    except (KeyError, ValueError, TypeError):
        return None
