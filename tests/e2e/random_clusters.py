"""Small random clusters for the kube-scheduler replay: every rule kubeplace models, mixed at random.

Nodes with labels (zone, disk, cores), taints of every effect, cordons and allocatable cpu, memory,
ephemeral storage, pods and GPUs; bound pods with host ports, GPUs and required anti-affinity;
pending pods with requests (init containers and sidecars included), node selectors, required node
affinity (every operator, matchFields), tolerations, host ports, priorities and gangs; volume
claims on local volumes (WaitForFirstConsumer, each node its own), pre-bound to one, or provisioned
in the zones a class allows. Each cluster is a list of raw objects, as a snapshot file holds them.
"""

from __future__ import annotations

import random
from typing import Any

Manifest = dict[str, Any]

APPS = ("web", "db", "cache")
TAINTS = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "maintenance", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
)


def random_cluster(seed: int) -> list[Manifest]:
    rng = random.Random(seed)
    nodes = [_node(rng, f"r{seed}-n{i}") for i in range(rng.randint(2, 5))]
    names = [n["metadata"]["name"] for n in nodes]
    bound = [_bound_pod(rng, f"run-{i}", rng.choice(names)) for i in range(rng.randint(0, 4))]
    pending = [_pending_pod(rng, f"p-{i}", names) for i in range(rng.randint(2, 8))]
    if rng.random() < 0.3:
        _gang(rng, rng.sample(pending, k=rng.randint(2, min(3, len(pending)))))
    storage = _storage(rng, nodes, pending) if rng.random() < 0.5 else []
    return [*nodes, *bound, *pending, *storage]


def _storage(rng: random.Random, nodes: list[Manifest], pending: list[Manifest]) -> list[Manifest]:
    """Two classes (local, no provisioner; zonal, provisioned in the zones it allows, both
    WaitForFirstConsumer), 0-2 local volumes per node, and a claim for some pending pods: unbound
    local or zonal, or pre-bound to a free local volume."""
    zones = rng.sample(["a", "b"], k=rng.randint(1, 2))
    objects: list[Manifest] = [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
         "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "zonal"},
         "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
         "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": zones}]}]},
    ]
    free: list[Manifest] = []
    for node in nodes:
        for i in range(rng.randint(0, 2)):
            name = f"{node['metadata']['name']}-pv{i}"
            hostname = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node["metadata"]["name"]]}
            free.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": {
                "capacity": {"storage": f"{rng.choice((5, 10))}Gi"}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local", "persistentVolumeReclaimPolicy": "Retain",
                "local": {"path": f"/mnt/{name}"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [hostname]}]}}}})
    objects += free
    for pod in pending:
        if rng.random() > 0.4:
            continue
        kind, claim_name = rng.choice(("local", "local", "zonal", "pre-bound")), f"data-{pod['metadata']['name']}"
        size = f"{rng.choice((1, 5, 10))}Gi"
        claim: Manifest = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": claim_name, "namespace": "default"},
                           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                                    "storageClassName": "zonal" if kind == "zonal" else "local"}}
        if kind == "pre-bound" and free:
            volume = free.pop(rng.randrange(len(free)))
            volume["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": claim_name}
            claim["spec"]["volumeName"] = volume["metadata"]["name"]
            claim["spec"]["resources"]["requests"]["storage"] = volume["spec"]["capacity"]["storage"]
        objects.append(claim)
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return objects


def _gang(rng: random.Random, members: list[Manifest]) -> None:
    """A CRD-free gang (kube/gangs.py): all or none, sometimes in one zone. The kube-scheduler has no
    gangs; each member replays alone."""
    annotations = {"kubeplace.io/gang-min-member": str(len(members))}
    if rng.random() < 0.5:
        annotations["kubeplace.io/gang-topology-key"] = "zone"
    for member in members:
        member["metadata"]["labels"]["kubeplace.io/gang"] = "g"
        member["metadata"]["annotations"] = dict(annotations)


def _node(rng: random.Random, name: str) -> Manifest:
    cpu = rng.choice((2, 4, 8))
    allocatable = {"cpu": str(cpu), "memory": f"{rng.choice((4, 8, 16))}Gi", "pods": str(rng.choice((3, 5, 110)))}
    if rng.random() < 0.3:
        allocatable["nvidia.com/gpu"] = str(rng.choice((2, 4)))
    if rng.random() < 0.3:
        allocatable["ephemeral-storage"] = f"{rng.choice((10, 50))}Gi"
    labels = {"kubernetes.io/hostname": name, "zone": rng.choice("ab"), "cores": str(cpu)}
    if rng.random() < 0.6:
        labels["disk"] = rng.choice(("ssd", "hdd"))
    spec: Manifest = {}
    taints = [dict(t) for t in TAINTS if rng.random() < 0.2]
    if taints:
        spec["taints"] = taints
    if rng.random() < 0.1:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


def _container(rng: random.Random, name: str, gpus: int = 0) -> Manifest:
    requests: Manifest = {}
    if rng.random() < 0.9:
        requests["cpu"] = f"{rng.choice((100, 250, 500, 1000, 1500, 3000))}m"
    if rng.random() < 0.8:
        requests["memory"] = f"{rng.choice((128, 512, 1024, 4096))}Mi"
    if rng.random() < 0.1:
        requests["ephemeral-storage"] = f"{rng.choice((1, 20))}Gi"
    resources: Manifest = {"requests": requests}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {"name": name, "image": "registry.invalid/app:1", "resources": resources}


def _ports(rng: random.Random) -> list[Manifest]:
    if rng.random() > 0.25:
        return []
    port: Manifest = {"containerPort": 80, "hostPort": rng.choice((8080, 8081)), "protocol": rng.choice(("TCP", "UDP"))}
    if rng.random() < 0.3:
        port["hostIP"] = "127.0.0.1"
    return [port]


def _bound_pod(rng: random.Random, name: str, node: str) -> Manifest:
    app = rng.choice(APPS)
    container = _container(rng, "main", gpus=1 if rng.random() < 0.2 else 0)
    container["ports"] = _ports(rng)
    spec: Manifest = {"nodeName": node, "containers": [container]}
    if rng.random() < 0.25:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
             "topologyKey": rng.choice(("kubernetes.io/hostname", "zone"))}]}}
    metadata = {"name": name, "namespace": "default", "labels": {"app": app}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": "Running"}}


def _pending_pod(rng: random.Random, name: str, nodes: list[str]) -> Manifest:
    main = _container(rng, "main", gpus=rng.choice((1, 2)) if rng.random() < 0.2 else 0)
    main["ports"] = _ports(rng)
    spec: Manifest = {"schedulerName": "kubeplace", "containers": [main]}
    if rng.random() < 0.2:
        init = _container(rng, "init")
        if rng.random() < 0.5:
            init["restartPolicy"] = "Always"  # a sidecar
        spec["initContainers"] = [init]
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"disk": rng.choice(("ssd", "hdd"))}
    if rng.random() < 0.35:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [_term(rng, nodes) for _ in range(rng.randint(1, 2))]}}}
    tolerations = [_toleration(rng) for _ in range(rng.randint(0, 2))]
    if tolerations:
        spec["tolerations"] = tolerations
    if rng.random() < 0.2:
        spec["priority"] = rng.choice((10, 100))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": rng.choice(APPS)}},
            "spec": spec, "status": {"phase": "Pending"}}


def _term(rng: random.Random, nodes: list[str]) -> Manifest:
    kind = rng.randrange(7)
    if kind == 0:
        return {"matchFields": [{"key": "metadata.name", "operator": rng.choice(("In", "NotIn")),
                                 "values": [rng.choice(nodes)]}]}  # the API server allows one name
    expressions = {
        1: {"key": "zone", "operator": "In", "values": [rng.choice("ab")]},
        2: {"key": "disk", "operator": "NotIn", "values": [rng.choice(("ssd", "hdd"))]},
        3: {"key": "disk", "operator": "Exists"},
        4: {"key": "disk", "operator": "DoesNotExist"},
        5: {"key": "cores", "operator": "Gt", "values": [rng.choice(("2", "4"))]},
        6: {"key": "cores", "operator": "Lt", "values": [rng.choice(("4", "8"))]},
    }
    return {"matchExpressions": [expressions[kind]]}


def _toleration(rng: random.Random) -> Manifest:
    taint = rng.choice(TAINTS)
    toleration: Manifest = {"key": taint["key"]}
    if "value" in taint and rng.random() < 0.7:
        toleration.update(operator="Equal", value=taint["value"] if rng.random() < 0.8 else "other")
    else:
        toleration["operator"] = "Exists"
    if rng.random() < 0.6:
        toleration["effect"] = taint["effect"]
    return toleration
