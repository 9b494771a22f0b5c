"""Chained builders for test nodes, pods and namespaces.

Each builder writes a real Kubernetes manifest (``.manifest()``), and ``.build()`` is the
parse of that manifest, so tests exercise the same path as files and the API::

    node("n1").cpu("4").memory("16Gi").gpu(8).label("tenant", "a").build()
    pod("p").cpu("500m").memory("1Gi").require("zone", "In", "a", "b").or_term()
        .require("spare", "Exists").tolerate("gpu", effect="NoSchedule").build()
    snapshot_of(node("n1").cpu("4"), pod("p").cpu("1"), pod("q").cpu("1").on("n1"))
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from kubeplace.kube.followers import JOB_NAME, JOBSET_EXCLUSIVE, LWS_EXCLUSIVE, LWS_GROUP_INDEX, LWS_NAME
from kubeplace.kube.gangs import KAI_ANNOTATION, MEMBER_LABELS, PLAIN_LABEL, VOLCANO_ANNOTATION
from kubeplace.kube.kueue import KUEUE_WORKLOAD
from kubeplace.kube.objects import GPU, Node, Pod, Snapshot
from kubeplace.kube.parse import build_snapshot, parse_namespace_labels, parse_node, parse_pod

Manifest = dict[str, Any]
BUILDER_SOURCE = "builders"


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._name = name
        self._labels: dict[str, str] = {"kubernetes.io/hostname": name}
        self._allocatable: dict[str, str] = {"pods": "110"}
        self._taints: list[dict[str, str]] = []
        self._unschedulable = False

    def cpu(self, quantity: str | int) -> NodeBuilder:
        return self.allocatable("cpu", quantity)

    def memory(self, quantity: str | int) -> NodeBuilder:
        return self.allocatable("memory", quantity)

    def pods(self, count: int) -> NodeBuilder:
        return self.allocatable("pods", count)

    def gpu(self, count: int) -> NodeBuilder:
        return self.allocatable(GPU, count)

    def allocatable(self, resource: str, quantity: str | int) -> NodeBuilder:
        self._allocatable[resource] = str(quantity)
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._labels[key] = value
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        self._taints.append(taint)
        return self

    def unschedulable(self) -> NodeBuilder:
        self._unschedulable = True
        return self

    def manifest(self) -> Manifest:
        spec: Manifest = {}
        if self._taints:
            spec["taints"] = copy.deepcopy(self._taints)
        if self._unschedulable:
            spec["unschedulable"] = True
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self._name, "uid": f"uid-node-{self._name}", "labels": dict(self._labels)},
            "spec": spec,
            "status": {"allocatable": dict(self._allocatable), "capacity": dict(self._allocatable)},
        }

    def build(self) -> Node:
        return parse_node(self.manifest(), BUILDER_SOURCE)


class PodBuilder:
    def __init__(self, name: str, ns: str = "default") -> None:
        self._name = name
        self._namespace = ns
        self._metadata: Manifest = {"labels": {}, "annotations": {}}
        self._resources: dict[str, dict[str, str]] = {}
        self._spec: Manifest = {"schedulerName": "kubeplace"}
        self._status: Manifest = {"phase": "Pending"}
        self._terms: list[list[Manifest]] = []
        self._ports: list[Manifest] = []

    # resources
    def cpu(self, quantity: str | int) -> PodBuilder:
        return self.request("cpu", quantity)

    def memory(self, quantity: str | int) -> PodBuilder:
        return self.request("memory", quantity)

    def gpu(self, count: int) -> PodBuilder:
        return self.request(GPU, count).limit(GPU, count)

    def request(self, resource: str, quantity: str | int) -> PodBuilder:
        self._resources.setdefault("requests", {})[resource] = str(quantity)
        return self

    def limit(self, resource: str, quantity: str | int) -> PodBuilder:
        self._resources.setdefault("limits", {})[resource] = str(quantity)
        return self

    # metadata
    def label(self, key: str, value: str) -> PodBuilder:
        self._metadata["labels"][key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self._metadata["annotations"][key] = value
        return self

    def owner(self, kind: str, name: str) -> PodBuilder:
        self._metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}
        ]
        return self

    def created(self, timestamp: str) -> PodBuilder:
        self._metadata["creationTimestamp"] = timestamp
        return self

    def deleting(self) -> PodBuilder:
        self._metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        return self

    # placement rules
    def selector(self, key: str, value: str) -> PodBuilder:
        self._spec.setdefault("nodeSelector", {})[key] = value
        return self

    def require(self, key: str, operator: str, *values: str) -> PodBuilder:
        """Adds a requirement to the current required node affinity term (ANDed)."""
        if not self._terms:
            self._terms.append([])
        requirement: Manifest = {"key": key, "operator": operator}
        if values:
            requirement["values"] = list(values)
        self._terms[-1].append(requirement)
        return self

    def or_term(self) -> PodBuilder:
        """Starts a new required node affinity term, ORed with the previous ones."""
        self._terms.append([])
        return self

    def tolerate(self, key: str, value: str = "", effect: str = "", operator: str = "Equal") -> PodBuilder:
        toleration = {"key": key, "operator": operator, "value": value, "effect": effect}
        self._spec.setdefault("tolerations", []).append({k: v for k, v in toleration.items() if v})
        return self

    def host_port(self, port: int, protocol: str = "TCP", host_ip: str = "") -> PodBuilder:
        entry: Manifest = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if host_ip:
            entry["hostIP"] = host_ip
        self._ports.append(entry)
        return self

    def priority(self, value: int) -> PodBuilder:
        self._spec["priority"] = value
        return self

    def scheduler(self, name: str) -> PodBuilder:
        self._spec["schedulerName"] = name
        return self

    def on(self, node_name: str) -> PodBuilder:
        self._spec["nodeName"] = node_name
        self._status["phase"] = "Running"
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._status["phase"] = phase
        return self

    def status(self, key: str, value: Any) -> PodBuilder:
        """Sets any other ``status`` field as raw manifest (resourceClaimStatuses...)."""
        self._status[key] = copy.deepcopy(value)
        return self

    def gate(self, name: str) -> PodBuilder:
        self._spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def spec(self, key: str, value: Any) -> PodBuilder:
        """Sets any other ``spec`` field as raw manifest (affinity, volumes, overhead...)."""
        self._spec[key] = copy.deepcopy(value)
        return self

    def manifest(self) -> Manifest:
        metadata: Manifest = {
            "name": self._name,
            "namespace": self._namespace,
            "uid": f"uid-{self._namespace}-{self._name}",
            **{key: copy.deepcopy(value) for key, value in self._metadata.items() if value},
        }
        container: Manifest = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
        if self._resources:
            container["resources"] = copy.deepcopy(self._resources)
        if self._ports:
            container["ports"] = copy.deepcopy(self._ports)
        spec: Manifest = {"containers": [container], **copy.deepcopy(self._spec)}
        if self._terms:
            terms = [{"matchExpressions": expressions} for expressions in self._terms]
            affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
            affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": dict(self._status),
        }

    def build(self) -> Pod:
        return parse_pod(self.manifest(), BUILDER_SOURCE)


class NamespaceBuilder:
    def __init__(self, name: str) -> None:
        self._name = name
        self._labels: dict[str, str] = {"kubernetes.io/metadata.name": name}

    def label(self, key: str, value: str) -> NamespaceBuilder:
        self._labels[key] = value
        return self

    def manifest(self) -> Manifest:
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self._name, "labels": self._labels}}

    def build(self) -> tuple[str, dict[str, str]]:
        name, labels = parse_namespace_labels(self.manifest(), BUILDER_SOURCE)
        return name, dict(labels)


def node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def pod(name: str, ns: str = "default") -> PodBuilder:
    """A pending pod for the ``kubeplace`` scheduler; ``.on(node)`` makes it a running pod."""
    return PodBuilder(name, ns)


def namespace(name: str) -> NamespaceBuilder:
    return NamespaceBuilder(name)


def snapshot_of(
    *builders: NodeBuilder | PodBuilder | NamespaceBuilder | Manifest,
    scheduler_name: str = "kubeplace",
    namespaces: set[str] | None = None,
    selector: str | None = None,
) -> Snapshot:
    """The snapshot of these objects, built exactly as from files or the API."""
    return build_snapshot(_manifests(builders), scheduler_name=scheduler_name, namespaces=namespaces, selector=selector)


def _manifests(
    builders: Iterable[NodeBuilder | PodBuilder | NamespaceBuilder | Manifest],
) -> list[tuple[Manifest, str]]:
    return [(item if isinstance(item, dict) else item.manifest(), BUILDER_SOURCE) for item in builders]


_TOPOLOGY = "topology.kubernetes.io/zone"
GANG_SOURCES: dict[str, Callable[[PodBuilder, str], PodBuilder]] = {
    "scheduler-plugins": lambda b, name: b.label(MEMBER_LABELS[0], name),
    "scheduler-plugins (sigs)": lambda b, name: b.label(MEMBER_LABELS[1], name),
    "volcano": lambda b, name: b.annotation(VOLCANO_ANNOTATION, name),
    "kai": lambda b, name: b.annotation(KAI_ANNOTATION, name),
    "workload-api": lambda b, name: b.spec("schedulingGroup", {"podGroupName": name}),
    "kubeplace": lambda b, name: b.label(PLAIN_LABEL, name),
    "kueue": lambda b, name: b.annotation(KUEUE_WORKLOAD, name),
    "jobset": lambda b, name: b.annotation(JOBSET_EXCLUSIVE, _TOPOLOGY).label(JOB_NAME, name),
    "leaderworkerset": lambda b, name: b.annotation(LWS_EXCLUSIVE, _TOPOLOGY).label(LWS_NAME, name)
    .label(LWS_GROUP_INDEX, "0"),
}
"""How a pod joins the gang ``name`` (``name-0`` for a LeaderWorkerSet group), per source
``kube.gangs.gang_of`` reads: ``GANG_SOURCES["kai"](pod("w0"), "job")``."""
