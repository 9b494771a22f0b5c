"""The inputs of ``kubeplace bench capacity``: one instance-type catalogue in Karpenter's kwok
provider format (what the real Karpenter and ``kubeplace plan --provision`` both read), the
NodePools of each workload and its pending pods.

Prices follow public on-demand list prices per vCPU (compute 0.0425, general 0.048, memory 0.063,
a GPU 0.45 more), spot a zone-dependent fraction of them; every figure is an integer of the
catalogue, not a live price. Pods are plain pods (no controller) so that both schedulers see the
same backlog; the consolidation workload uses a Deployment, as Karpenter moves only pods a
controller recreates.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeplace.kube.catalogue import parse_catalogue
from kubeplace.kube.gangs import PLAIN_LABEL, PLAIN_MIN_MEMBER
from kubeplace.kube.objects import GPU
from kubeplace.kube.price import PRICE_UNIT

ZONES = ("test-zone-a", "test-zone-b", "test-zone-c")
SPOT_FRACTION = {"test-zone-a": 0.38, "test-zone-b": 0.42, "test-zone-c": 0.46}
"""A spot offering's price as a fraction of the on-demand one, per zone."""
CPU_FAMILIES = {"c": (2, 0.0425), "m": (4, 0.048), "r": (8, 0.063)}
"""Family -> (GiB of memory per vCPU, on-demand price per vCPU-hour)."""
CPU_POOL = tuple(CPU_FAMILIES)
CPU_SIZES = (2, 4, 8, 16, 32)
GPU_TYPES = ((8, 1), (16, 2), (32, 4), (64, 8))
"""GPU family: (vCPUs, nvidia.com/gpu); 4 GiB a vCPU, priced as the general family plus a GPU each."""
GPU_PRICE = 0.45
GPU_TAINT = {"key": GPU, "value": "true", "effect": "NoSchedule"}
NODE_CLASS = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}
PAUSE = "registry.k8s.io/pause:3.10"
FAMILY_LABEL, CPU_LABEL = "karpenter.kwok.sh/instance-family", "karpenter.kwok.sh/instance-cpu"
CAPACITY_TYPE_LABEL, ZONE_LABEL = "karpenter.sh/capacity-type", "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def _offerings(on_demand: float) -> list[dict[str, Any]]:
    found = []
    for zone in ZONES:
        for capacity_type, price in (("on-demand", on_demand), ("spot", on_demand * SPOT_FRACTION[zone])):
            found.append({"Price": round(price, 4), "Available": True, "Requirements": [
                {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [capacity_type]},
                {"key": ZONE_LABEL, "operator": "In", "values": [zone]}]})
    return found


def _instance_type(family: str, cpu: int, memory_gi: int, price: float, gpus: int = 0) -> dict[str, Any]:
    resources = {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "ephemeral-storage": "100Gi", "pods": "110",
                 **({GPU: str(gpus)} if gpus else {})}
    return {"name": f"{family}-{cpu}x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
            "resources": resources, "offerings": _offerings(price)}


def catalogue() -> list[dict[str, Any]]:
    """Every instance type: families c, m and r in 2 to 32 vCPUs and family g with 1 to 8 GPUs, each
    on demand and spot in three zones."""
    types = [_instance_type(family, cpu, cpu * gib, cpu * price)
             for family, (gib, price) in CPU_FAMILIES.items() for cpu in CPU_SIZES]
    types += [_instance_type("g", cpu, cpu * 4, cpu * CPU_FAMILIES["m"][1] + gpus * GPU_PRICE, gpus)
              for cpu, gpus in GPU_TYPES]
    return types


def prices(types: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str], float]:
    """(instance type, zone, capacity type) -> price per hour, from a kwok catalogue read as
    ``plan --provision`` reads it (``kube.catalogue``, its prices through ``kube.price``)."""
    return {(t.name, o.zone, o.capacity_type): o.price / PRICE_UNIT
            for t in parse_catalogue(list(types), "the capacity bench's catalogue") for o in t.offerings}


def node_pool(name: str, families: Sequence[str], capacity_types: Sequence[str], *, weight: int = 0,
              taints: Sequence[Mapping[str, str]] = (), cpus: Sequence[int] = ()) -> dict[str, Any]:
    """A NodePool of these families and capacity types (and vCPU sizes), with a CPU limit no
    workload reaches. Consolidation (WhenEmptyOrUnderutilized) waits (``consolidateAfter: Never``)
    until the bench sets ``consolidateAfter: 0s``; its budget is every node at once, so that the
    budget does not pace the run."""
    requirements = [{"key": FAMILY_LABEL, "operator": "In", "values": list(families)},
                    {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": list(capacity_types)}]
    if cpus:
        requirements.append({"key": CPU_LABEL, "operator": "In", "values": [str(c) for c in cpus]})
    disruption = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "Never",
                  "budgets": [{"nodes": "100%"}]}
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": {"bench-pool": name}}, "spec": {
            "requirements": requirements, **({"taints": list(taints)} if taints else {}),
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}},
        "limits": {"cpu": "2000"}, "disruption": disruption}
    if weight:
        spec["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def pod(name: str, cpu_milli: int, memory_mi: int, *, labels: Mapping[str, str] | None = None,
        gpus: int = 0, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A pending pod of these requests (the default scheduler's), without a namespace."""
    requests = {"cpu": f"{cpu_milli}m", "memory": f"{memory_mi}Mi", **({GPU: str(gpus)} if gpus else {})}
    resources = {"requests": requests, **({"limits": {GPU: str(gpus)}} if gpus else {})}
    container = {"name": "c", "image": PAUSE, "resources": resources}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"containers": [container], "terminationGracePeriodSeconds": 0, **(extra or {})}}


@dataclass(frozen=True)
class Workload:
    """One backlog: its NodePools and pending pods, or (``deployment``) a Deployment scaled from
    ``replicas`` down to ``scale_to`` before consolidation."""

    name: str
    what: str
    node_pools: tuple[dict[str, Any], ...]
    pods: tuple[dict[str, Any], ...] = ()
    deployment: dict[str, Any] | None = None
    scale_to: int = 0


def _count(base: int, scale: float) -> int:
    return max(1, round(base * scale))


def web(seed: int, scale: float) -> Workload:
    """Replicas spread over the zones (maxSkew 1) and one per node (required anti-affinity)."""
    labels = {"app": "web"}
    rules = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable":
                                            "DoNotSchedule", "labelSelector": {"matchLabels": labels}}],
             "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                 {"topologyKey": HOSTNAME_LABEL, "labelSelector": {"matchLabels": labels}}]}}}
    pods = tuple(pod(f"web-{i:03d}", 1000, 2048, labels=labels, extra=rules) for i in range(_count(18, scale)))
    return Workload("web", "web replicas: zone spread, one per node", (node_pool("general", CPU_POOL, ["on-demand"]),),
                    pods)


def _mixed(prefix: str, count: int, rng: random.Random, labels: Mapping[str, str] | None = None
           ) -> tuple[dict[str, Any], ...]:
    shapes = ((250, 512), (500, 1024), (1000, 2048), (1000, 4096), (2000, 2048), (2000, 8192), (3000, 6144),
              (4000, 16384))
    return tuple(pod(f"{prefix}-{i:03d}", *rng.choice(shapes), labels=labels) for i in range(count))


def batch(seed: int, scale: float) -> Workload:
    """CPU pods of eight shapes, from 250m/512Mi to 4 CPUs/16Gi."""
    pods = _mixed("batch", _count(60, scale), random.Random(seed))
    return Workload("batch", "mixed-shape CPU pods", (node_pool("general", CPU_POOL, ["on-demand"]),), pods)


def memory(seed: int, scale: float) -> Workload:
    """1-2 CPUs with 12-28 GiB each."""
    rng = random.Random(seed + 1)
    pods = tuple(pod(f"mem-{i:03d}", rng.choice((1000, 2000)), 1024 * rng.choice((12, 16, 20, 28)))
                 for i in range(_count(24, scale)))
    return Workload("memory", "memory-heavy pods", (node_pool("general", CPU_POOL, ["on-demand"]),), pods)


def gpu_gangs(seed: int, scale: float) -> Workload:
    """Gangs of GPU pods, each gang in one zone (required pod affinity on the zone), on a tainted
    GPU NodePool the pods tolerate."""
    shapes = ((4, 2, 6000, 24576), (2, 4, 12000, 49152), (4, 1, 3000, 12288), (3, 2, 6000, 24576))
    gangs = shapes[:max(1, round(len(shapes) * min(scale, 1.0)))]
    pods = []
    for g, (members, gpus, cpu, memory_mi) in enumerate(gangs):
        gang = f"gang-{g}"
        labels = {PLAIN_LABEL: gang, PLAIN_MIN_MEMBER: str(members)}
        extra = {"tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                 "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                     {"topologyKey": ZONE_LABEL, "labelSelector": {"matchLabels": {PLAIN_LABEL: gang}}}]}}}
        pods += [pod(f"{gang}-{m}", cpu, memory_mi, labels=labels, gpus=gpus, extra=extra) for m in range(members)]
    return Workload("gpu-gangs", "GPU gangs, each in one zone",
                    (node_pool("gpu", ("g",), ["on-demand"], taints=[GPU_TAINT]),), tuple(pods))


def spot(seed: int, scale: float) -> Workload:
    """Mixed CPU pods beside a spot NodePool of weight 50 and an on-demand one of weight 10."""
    pods = _mixed("spot", _count(40, scale), random.Random(seed + 2))
    pools = (node_pool("spot", CPU_POOL, ["spot"], weight=50),
             node_pool("on-demand", CPU_POOL, ["on-demand"], weight=10))
    return Workload("spot", "a spot NodePool (weight 50) beside an on-demand one (10)", pools, pods)


def consolidation(seed: int, scale: float) -> Workload:
    """A Deployment of 900m/1Gi pods on nodes of 2 or 4 vCPUs, scaled down by 60%: many half-empty
    nodes for consolidation (WhenEmptyOrUnderutilized)."""
    replicas = _count(32, scale)
    labels = {"app": "frag"}
    template = pod("frag", 900, 1024, labels=labels)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "frag"},
                  "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels}, "spec": template["spec"]}}}
    pool = node_pool("frag", ("c",), ["on-demand"], cpus=(2, 4))
    return Workload("consolidation", "a Deployment scaled down by 60%, then consolidated", (pool,),
                    deployment=deployment, scale_to=max(1, round(replicas * 0.4)))


WORKLOADS: dict[str, Callable[[int, float], Workload]] = {
    "web": web, "batch": batch, "memory": memory, "gpu-gangs": gpu_gangs, "spot": spot,
    "consolidation": consolidation}
