"""``kubeplace bench provision-scale``: ``plan --provision`` on a large synthetic backlog.

A cluster with no nodes, one NodePool (or a spot one of higher weight beside an on-demand one),
``pods`` pending pods of mixed shapes (some spread over zones), and a catalogue of
``types`` instance types (families with 2, 4 and 8 GiB per CPU, sizes from 1 to 96 CPUs, each
generation priced a little apart) offered in ``zones`` zones as on-demand and spot. The plan's
new nodes are measured against the FFD greedy's (Karpenter's way) in the same run.

``run_capacity_workload`` plans one backlog of ``bench capacity`` (its catalogue, NodePools and
pods) the same way, offline: no control plane and no Karpenter, so that its cost, bound and gap
can be re-measured anywhere.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from typing import Any

from kubeplace.kube.catalogue import PRICE_UNIT, InstanceType, parse_catalogue
from kubeplace.kube.objects import Snapshot
from kubeplace.kube.parse import build_snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.provision import make_provision_plan
from kubeplace_bench.capacity_workloads import WORKLOADS, catalogue

SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 72, 96)
FAMILIES = (("c", 2), ("m", 4), ("r", 8))
"""Family and GiB of memory per CPU."""
CPU_SHAPES = ("100m", "250m", "500m", "750m", "1", "1500m", "2", "3", "4", "6", "8", "12")
MEMORY_SHAPES = ("128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "3Gi", "4Gi", "8Gi", "16Gi")


@dataclass(frozen=True)
class ProvisionScaleSpec:
    pods: int = 10_000
    types: int = 500
    zones: int = 4
    shapes: int = 40
    seed: int = 1
    spread_share: float = 0.2
    """Part of the shapes whose pods spread over zones (DoNotSchedule, maxSkew 1)."""
    spot_pool: bool = False
    """A spot NodePool of weight 50 beside the on-demand one."""


@dataclass(frozen=True)
class ProvisionScaleResult:
    pods: int
    instance_types: int
    offerings: int
    seconds_snapshot: float
    seconds_plan: float
    pods_placed: int
    new_nodes: int
    cost_per_hour: float
    greedy_cost_per_hour: float
    bound_per_hour: float | None
    gap: float | None
    saving_vs_greedy: float
    status: str
    verified: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def catalogue_of(spec: ProvisionScaleSpec) -> tuple[InstanceType, ...]:
    rng = random.Random(spec.seed)
    zones = [f"zone-{chr(ord('a') + k)}" for k in range(spec.zones)]
    types = []
    for k in range(spec.types):
        family, gib_per_cpu = FAMILIES[k % len(FAMILIES)]
        size = SIZES[(k // len(FAMILIES)) % len(SIZES)]
        generation = k // (len(FAMILIES) * len(SIZES)) + 1
        per_cpu = 0.02 + 0.004 * gib_per_cpu
        factor = rng.uniform(0.85, 1.15)
        offerings = []
        for zone in zones:
            on_demand = round(size * per_cpu * factor * rng.uniform(0.98, 1.04), 6)
            offerings.append({"zone": zone, "capacityType": "on-demand", "pricePerHour": on_demand})
            offerings.append({"zone": zone, "capacityType": "spot",
                              "pricePerHour": round(on_demand * rng.uniform(0.3, 0.6), 6)})
        types.append({"name": f"{family}{generation}.{size}x", "architecture": "amd64", "operatingSystems": ["linux"],
                      "capacity": {"cpu": str(size), "memory": f"{size * gib_per_cpu}Gi", "pods": 110},
                      "overhead": {"kubeReserved": {"cpu": "100m", "memory": "256Mi"}},
                      "offerings": offerings})
    return tuple(parse_catalogue({"instanceTypes": types}, "provision-scale catalogue"))


def manifests(spec: ProvisionScaleSpec) -> list[dict[str, Any]]:
    rng = random.Random(spec.seed)
    pools = [_pool("on-demand", 0, "on-demand")]
    if spec.spot_pool:
        pools.append(_pool("spot", 50, "spot"))
    shapes = [(rng.choice(CPU_SHAPES), rng.choice(MEMORY_SHAPES), rng.random() < spec.spread_share)
              for _ in range(spec.shapes)]
    pods = []
    for k in range(spec.pods):
        cpu, memory, spread = shapes[rng.randrange(len(shapes))] if k >= len(shapes) else shapes[k]
        shape = shapes.index((cpu, memory, spread))
        pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": f"p{k:05d}", "namespace": "default", "uid": f"uid-{k}",
                                            "labels": {"shape": f"s{shape}"}},
                               "spec": {"schedulerName": "kubeplace", "containers": [
                                   {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu,
                                                                                            "memory": memory}}}]}}
        if spread:
            pod["spec"]["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"shape": f"s{shape}"}}}]
        pods.append(pod)
    return [*pools, *pods]


def _pool(name: str, weight: int, capacity_type: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]}]}}}
    if weight:
        spec["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def run_provision_scale(spec: ProvisionScaleSpec, time_limit: float) -> ProvisionScaleResult:
    started = time.monotonic()
    types = catalogue_of(spec)
    snapshot = build_snapshot([(m, "provision-scale") for m in manifests(spec)])
    return _planned(snapshot, types, spec.pods, started, SolverSettings(time_limit=time_limit, workers=2))


def run_capacity_workload(name: str, seed: int, scale: float, time_limit: float) -> ProvisionScaleResult:
    """``bench capacity``'s workload ``name`` (its seed and scale) planned from its catalogue and
    NodePools, as its kubeplace row plans it, without the control plane."""
    started = time.monotonic()
    workload = WORKLOADS[name](seed, scale)
    types = tuple(parse_catalogue(catalogue(), "bench capacity catalogue"))
    pods = [{**pod, "metadata": {**pod["metadata"], "namespace": "default", "uid": f"uid-{k}"},
             "spec": {**pod["spec"], "schedulerName": "kubeplace"}} for k, pod in enumerate(workload.pods)]
    snapshot = build_snapshot([(m, f"bench capacity {name}") for m in (*workload.node_pools, *pods)])
    return _planned(snapshot, types, len(pods), started, SolverSettings(time_limit=time_limit, workers=2, seed=seed))


def _planned(snapshot: Snapshot, types: tuple[InstanceType, ...], pods: int, started: float,
             settings: SolverSettings) -> ProvisionScaleResult:
    loaded = time.monotonic()
    planned = make_provision_plan(snapshot, types, Configuration(), Profile(), settings)
    seconds = time.monotonic() - loaded
    provision = planned.plan.provision
    assert provision is not None
    greedy = provision.greedy_cost
    return ProvisionScaleResult(
        pods=pods, instance_types=len(types), offerings=sum(len(t.offerings) for t in types),
        seconds_snapshot=round(loaded - started, 2), seconds_plan=round(seconds, 2),
        pods_placed=planned.plan.summary.pods_placed, new_nodes=len(provision.nodes),
        cost_per_hour=round(provision.cost / PRICE_UNIT, 4), greedy_cost_per_hour=round(greedy / PRICE_UNIT, 4),
        bound_per_hour=None if provision.bound is None else round(provision.bound / PRICE_UNIT, 4),
        gap=None if provision.gap is None else round(provision.gap, 4),
        saving_vs_greedy=round(1 - provision.cost / greedy, 4) if greedy else 0.0,
        status=provision.status, verified=planned.plan.summary.verified and not planned.violations)
