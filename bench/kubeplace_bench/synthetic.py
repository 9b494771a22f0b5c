"""Synthetic clusters from a seed: heterogeneous nodes and pods, as Kubernetes manifests.

Node shapes follow the kube-scheduler's scheduler_perf workloads (4 CPU / 32 GiB / 110
pods) plus larger, memory-optimised and GPU nodes; some nodes carry zone and pool labels,
a tainted GPU pool and tenant labels. Pods come in a handful of shapes with selectors,
tolerations and two priorities, so that classes stay few while constraints are real.

``rules="mix"`` adds inter-pod rules as HA Deployments and LeaderWorkerSets
carry them: apps of 20 identical replicas, 20% of the pods with required hostname
anti-affinity on their app, 30% with a DoNotSchedule zone spread (maxSkew 1) plus a
ScheduleAnyway hostname spread, and groups of 8 pods that must share a rack of 40 nodes
(self-affinity) and keep other groups out of it (LWS exclusive topology); nodes get a rack.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubeplace.kube.objects import GPU

Manifest = dict[str, Any]

GIB = 1 << 30
NODE_SHAPES = (  # name, cpu cores, memory GiB, gpus, weight
    ("small", 4, 32, 0, 0.55),
    ("large", 16, 64, 0, 0.2),
    ("mem", 8, 256, 0, 0.1),
    ("gpu4", 32, 128, 4, 0.1),
    ("gpu8", 64, 512, 8, 0.05),
)
POD_SHAPES = (  # name, milli-cpu, memory MiB, gpus, weight
    ("tiny", 100, 128, 0, 0.3),
    ("web", 500, 1024, 0, 0.3),
    ("api", 1000, 2048, 0, 0.15),
    ("batch", 2000, 4096, 0, 0.12),
    ("bigmem", 2000, 32768, 0, 0.05),
    ("gpu1", 4000, 16384, 1, 0.05),
    ("gpu4", 16000, 65536, 4, 0.03),
)
ZONES = ("a", "b", "c")
RULES = ("none", "mix")
APP_SIZE = 20
RACK_SIZE = 40
GROUP_SIZE = 8
ANTI_SHARE, SPREAD_SHARE, GROUP_SHARE = 0.2, 0.3, 0.05
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
RACK = "topology.kubernetes.io/rack"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True)
class SyntheticSpec:
    nodes: int
    pods: int
    seed: int = 0
    bound_fraction: float = 0.0
    """Share of the pods created already bound to a node (usage)."""
    rules: str = "none"
    """``mix``: inter-pod rules on part of the pods (see the module's docstring)."""

    @property
    def rule_pods(self) -> tuple[int, int, int]:
        """Pods with hostname anti-affinity, with zone spread, in rack groups (``mix``)."""
        if self.rules != "mix":
            return 0, 0, 0
        def whole(share: float, unit: int) -> int:
            return int(self.pods * share) // unit * unit
        return whole(ANTI_SHARE, APP_SIZE), whole(SPREAD_SHARE, APP_SIZE), whole(GROUP_SHARE, GROUP_SIZE)


def _choice(rng: np.random.Generator, weights: list[float], n: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    return rng.choice(len(w), size=n, p=w / w.sum())


def node_manifests(spec: SyntheticSpec, rng: np.random.Generator) -> Iterator[Manifest]:
    shapes = _choice(rng, [s[4] for s in NODE_SHAPES], spec.nodes)
    zones = rng.integers(0, len(ZONES), spec.nodes)
    for i in range(spec.nodes):
        name, cpu, mem, gpus, _ = NODE_SHAPES[int(shapes[i])]
        labels = {"kubernetes.io/hostname": f"node-{i:05d}", "topology.kubernetes.io/zone": ZONES[int(zones[i])],
                  "node.kubernetes.io/instance-type": name}
        taints = []
        allocatable = {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110"}
        if gpus:
            allocatable[GPU] = str(gpus)
            labels["nvidia.com/gpu.product"] = "A100" if gpus == 8 else "T4"
            taints.append({"key": GPU, "value": "present", "effect": "NoSchedule"})
        if i % 50 == 7:
            labels["tenant"] = "team-a"
        if spec.rules == "mix":
            labels[RACK] = f"rack-{i // RACK_SIZE:03d}"
        yield {"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": f"node-{i:05d}", "uid": f"uid-node-{i}", "labels": labels},
               "spec": {"taints": taints} if taints else {},
               "status": {"allocatable": allocatable, "capacity": allocatable}}


def pod_manifests(spec: SyntheticSpec, rng: np.random.Generator) -> Iterator[Manifest]:
    plain = spec.pods - sum(spec.rule_pods)
    shapes = _choice(rng, [s[4] for s in POD_SHAPES], plain)
    zone_pick = rng.integers(0, len(ZONES) + 3, plain)  # most pods have no zone selector
    high = rng.random(plain) < 0.2
    bound = rng.random(plain) < spec.bound_fraction
    bound_node = rng.integers(0, max(spec.nodes, 1), plain)
    for j in range(plain):
        name, cpu, mem, gpus, _ = POD_SHAPES[int(shapes[j])]
        requests = {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}
        pod_spec: dict[str, Any] = {"schedulerName": "kubeplace", "priority": 1000 if high[j] else 0,
                                    "containers": [{"name": "main", "image": "registry.local/app:1",
                                                    "resources": {"requests": requests}}]}
        if gpus:
            requests[GPU] = str(gpus)
            pod_spec["containers"][0]["resources"]["limits"] = {GPU: str(gpus)}
            pod_spec["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
        elif zone_pick[j] < len(ZONES):
            pod_spec["nodeSelector"] = {"topology.kubernetes.io/zone": ZONES[int(zone_pick[j])]}
        if bound[j]:
            pod_spec["nodeName"] = f"node-{int(bound_node[j]):05d}"
        yield {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{name}-{j:06d}", "namespace": f"ns-{j % 20}", "uid": f"uid-pod-{j}",
                            "labels": {"app": name}},
               "spec": pod_spec, "status": {"phase": "Running" if bound[j] else "Pending"}}


def rule_pod_manifests(spec: SyntheticSpec, rng: np.random.Generator) -> Iterator[Manifest]:
    """The ``mix`` pods: anti-affinity apps, spread apps, rack groups; CPU-only shapes."""
    anti, spread, grouped = spec.rule_pods
    cpu_only = [s for s in POD_SHAPES if s[3] == 0 and s[0] != "bigmem"]
    units = ([("anti", APP_SIZE)] * (anti // APP_SIZE) + [("spread", APP_SIZE)] * (spread // APP_SIZE)
             + [("group", GROUP_SIZE)] * (grouped // GROUP_SIZE))
    shapes = _choice(rng, [s[4] for s in cpu_only], len(units))
    for u, (kind, size) in enumerate(units):
        _, cpu, mem, _, _ = cpu_only[int(shapes[u])]
        app = f"{kind}-{u:04d}"
        labels = {"app": app}
        pod_spec: dict[str, Any] = {"schedulerName": "kubeplace", "containers": [
            {"name": "main", "image": "registry.local/app:1",
             "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}]}
        own = {"labelSelector": {"matchLabels": {"app": app}}}
        if kind == "anti":
            pod_spec["affinity"] = {"podAntiAffinity": {REQUIRED: [{**own, "topologyKey": HOSTNAME}]}}
        elif kind == "spread":
            pod_spec["topologySpreadConstraints"] = [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", **own},
                {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway", **own}]
        else:
            labels[GROUP_KEY] = app
            others = {"matchExpressions": [{"key": GROUP_KEY, "operator": "Exists"},
                                           {"key": GROUP_KEY, "operator": "NotIn", "values": [app]}]}
            pod_spec["affinity"] = {
                "podAffinity": {REQUIRED: [{"labelSelector": {"matchLabels": {GROUP_KEY: app}}, "topologyKey": RACK}]},
                "podAntiAffinity": {REQUIRED: [{"labelSelector": others, "topologyKey": RACK}]}}
        for r in range(size):
            yield {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"{app}-{r:02d}", "namespace": f"ns-{u % 20}", "uid": f"uid-{app}-{r}",
                                "labels": dict(labels)},
                   "spec": copy.deepcopy(pod_spec), "status": {"phase": "Pending"}}


def manifests(spec: SyntheticSpec) -> list[Manifest]:
    rng = np.random.default_rng(spec.seed)
    return [*node_manifests(spec, rng), *pod_manifests(spec, rng), *rule_pod_manifests(spec, rng)]


def as_list(items: list[Manifest]) -> Manifest:
    """The ``kind: List`` that ``kubectl get nodes,pods -A -o yaml`` prints."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
