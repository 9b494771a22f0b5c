"""A scenario file's objects as the real control plane can hold them, for the kube-scheduler replay.

:func:`host` turns the raw objects of a snapshot file (``fixtures/scenarios/*/cluster.yaml``) into
the manifests :mod:`tests.e2e.replay` creates: kwok nodes, bound pods created bound, namespaces with
their labels, PriorityClasses, and one gated template per pending pod of kubeplace for the replay.
The state the kube-scheduler then sees is the state kubeplace planned; where the control plane
cannot hold an object as written, the substitute is exact for every rule the kube-scheduler
applies, or the scenario is refused with :class:`NotHostable` and the reason:

- a terminating bound pod is created running: kwok deletes a terminating pod at once. Resources,
  host ports and inter-pod (anti-)affinity count terminating pods like running ones; topology
  spread does not (``countPodsMatchSelector`` skips them), so a scenario with both is refused;
- pods in a terminal phase (Succeeded, Failed) are not created: neither scheduler counts them;
- pending pods that are not kubeplace's (gated, or for another scheduler) are not created: a
  pending pod of the default scheduler would be placed during the replay, which kubeplace's plan
  rightly does not expect;
- a pod's priority (``spec.priority``, or its class's value as kubeplace resolves it) becomes a
  PriorityClass ``kubeplace-replay-priority-<value>``: the API server's Priority admission refuses a
  pod that sets ``spec.priority`` itself;
- owner references are dropped (the garbage collector would delete pods whose owner is absent, and
  kwok completes Job pods); status, uids and timestamps are the API server's to set;
- no object of another kind is created: no filter of the kube-scheduler's default profile reads
  PodGroups (it has no gang scheduling: gang members are replayed one by one, as each is valid
  alone), Services, ReplicaSets or StatefulSets (they only feed the default spread constraints,
  which are ScheduleAnyway), or workload objects (Jobs, JobSets...; creating those would create
  pods). kubeplace reads them from the file;
- storage objects (StorageClasses, CSIDrivers, CSINodes, CSIStorageCapacities, PersistentVolumes
  and PersistentVolumeClaims) are created as written, without their status and binding
  annotations (the PV controller of kube-controller-manager binds a claim and its volume again) and
  without the uid in a volume's claimRef (the claim gets a new one). A claim the kube-scheduler
  provisions for is provisioned by the replay itself, as an external provisioner would
  (:mod:`tests.e2e.replay`);
- DeviceClasses, ResourceSlices (as a driver publishes them) and ResourceClaims are created as
  written, like storage objects; a claim allocated in the scenario makes it not hostable (its
  allocation would have to be written for pods that do not hold it). The kube-scheduler allocates
  the replayed pods' claims itself (and creates the extended resource claims of pods asking for an
  extended resource a DeviceClass serves); the replay deletes them with the scenario;
- a created pod with generic ephemeral volumes or claims from a ResourceClaimTemplate makes the
  scenario not hostable: the replay does not create their claims yet.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeplace_bench.controlplane_binaries import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE

Manifest = dict[str, Any]

REPLAY_GATE = "kubeplace.io/replay"
"""The scheduling gate that holds a replayed pod until its nominated node is set."""
DEFAULT_SCHEDULER = "default-scheduler"
KUBEPLACE = "kubeplace"
PRIORITY_CLASS_PREFIX = "kubeplace-replay-priority-"
BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
HIGHEST_USER_PRIORITY = 1000000000
"""PriorityClasses above this value are reserved to the two built-in system classes."""
STORAGE_KINDS = ("StorageClass", "CSIDriver", "CSINode", "CSIStorageCapacity", "PersistentVolume",
                 "PersistentVolumeClaim", "DeviceClass", "ResourceSlice", "ResourceClaim")
"""Created in this order: what the volume and device filters read."""
NAMESPACED_STORAGE = ("CSIStorageCapacity", "PersistentVolumeClaim", "ResourceClaim")
BINDING_ANNOTATIONS = ("pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller")
"""The PV controller's marks of a finished binding: kept, they make it take the new claim (whose uid
the volume's claimRef no longer names) for lost; dropped, it binds the two again."""
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
"""The node lifecycle controller taints a cordoned node with it (NoSchedule)."""
FINISHED = ("Succeeded", "Failed")


class NotHostable(Exception):
    """The control plane cannot hold the scenario so that the kube-scheduler sees what kubeplace planned."""


@dataclass(frozen=True)
class Hosted:
    namespaces: dict[str, dict[str, str]]
    """Every namespace the pods use -> its labels (those of the file's Namespace object, else none)."""
    priority_classes: dict[str, int]
    """PriorityClass name -> value, for the classes the pods are given."""
    nodes: tuple[Manifest, ...]
    bound: tuple[Manifest, ...]
    """Pods created bound (``spec.nodeName``)."""
    pending: dict[tuple[str, str], Manifest]
    """(namespace, name) -> the replay template of each pending pod of kubeplace: the default
    scheduler's name and the replay gate."""
    storage: tuple[Manifest, ...] = ()
    """Storage objects, in the order of ``STORAGE_KINDS``."""
    notes: tuple[str, ...] = field(default=())
    """The substitutions made, one line each."""

    def expected_taints(self, node: Mapping[str, Any]) -> set[tuple[str, str]]:
        """(key, effect) of the taints a hosted node settles with: its own, plus the controller's
        unschedulable taint on a cordoned node."""
        spec = node.get("spec") or {}
        taints = {(str(t["key"]), str(t["effect"])) for t in spec.get("taints") or []}
        if spec.get("unschedulable"):
            taints.add((UNSCHEDULABLE_TAINT, "NoSchedule"))
        return taints


def host(objects: Sequence[Mapping[str, Any]], scheduler_name: str = KUBEPLACE,
         replayed: Collection[tuple[str, str]] | None = None) -> Hosted:
    """The manifests to create for a scenario's raw objects; ``replayed`` holds the (namespace, name)
    of the pending pods of ``scheduler_name`` to replay (None: all of them). :class:`NotHostable`
    with the reason when the control plane cannot hold them as kubeplace planned them."""
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    notes: list[str] = []
    for obj in objects:
        kind = str(obj.get("kind"))
        if kind not in ("Node", "Pod", "Namespace", "PriorityClass", *STORAGE_KINDS):
            notes.append(f"{kind} {_name(obj)} not created: no filter of the default profile reads it")
            continue
        by_kind.setdefault(kind, []).append(obj)
    class_values = {**BUILTIN_PRIORITY_CLASSES,
                    **{_name(c): int(c.get("value") or 0) for c in by_kind.get("PriorityClass", [])}}
    nodes = tuple(_node(n) for n in by_kind.get("Node", []))
    node_names = {n["metadata"]["name"] for n in nodes}
    pods = by_kind.get("Pod", [])
    hard_spread = any(_has_hard_spread(p) for p in pods)
    bound: list[Manifest] = []
    pending: dict[tuple[str, str], Manifest] = {}
    classes: dict[str, int] = {}
    for raw in pods:
        role, label = _role(raw, node_names, scheduler_name, replayed, notes)
        if not role:
            continue
        _refuse_claims(raw, label)
        manifest = _pod(raw, classes, class_values)
        if role == "bound":
            if (raw.get("metadata") or {}).get("deletionTimestamp") is not None:
                if hard_spread:
                    raise NotHostable(f"pod {label} is terminating (kwok deletes such pods at once, so it would be "
                                      "hosted running) and topology spread does not count terminating pods")
                notes.append(f"pod {label} is terminating: created running (the same usage for the kube-scheduler)")
            bound.append(manifest)
            continue
        manifest["spec"]["schedulerName"] = DEFAULT_SCHEDULER
        manifest["spec"]["schedulingGates"] = [{"name": REPLAY_GATE}]
        pending[(manifest["metadata"]["namespace"], manifest["metadata"]["name"])] = manifest
    for claim in by_kind.get("ResourceClaim", []):
        if ((claim.get("status") or {}).get("allocation")) is not None:
            raise NotHostable(f"ResourceClaim {_name(claim)} is allocated: the replay does not write allocations")
    storage = tuple(_storage(obj) for kind in STORAGE_KINDS for obj in by_kind.get(kind, []))
    namespaces = {_name(ns): dict((ns.get("metadata") or {}).get("labels") or {})
                  for ns in by_kind.get("Namespace", [])}
    for obj in (*bound, *pending.values(), *storage):
        if "namespace" in obj["metadata"]:
            namespaces.setdefault(obj["metadata"]["namespace"], {})
    return Hosted(namespaces, classes, nodes, tuple(bound), pending, storage, tuple(notes))


def _role(raw: Mapping[str, Any], node_names: Collection[str], scheduler_name: str,
          replayed: Collection[tuple[str, str]] | None, notes: list[str]) -> tuple[str, str]:
    """("bound" | "replayed" | "" for not created, namespace/name); why a pod is not created goes to
    ``notes``."""
    metadata, spec = raw.get("metadata") or {}, raw.get("spec") or {}
    namespace, name = str(metadata.get("namespace") or "default"), str(metadata.get("name"))
    label = f"{namespace}/{name}"
    phase = (raw.get("status") or {}).get("phase")
    if phase in FINISHED:
        notes.append(f"pod {label} not created: phase {phase}, counted by neither scheduler")
        return "", label
    if spec.get("nodeName"):
        if spec["nodeName"] in node_names:
            return "bound", label
        notes.append(f"pod {label} not created: its node {spec['nodeName']} is not in the scenario")
        return "", label
    if spec.get("schedulerName") != scheduler_name or spec.get("schedulingGates") or metadata.get("deletionTimestamp"):
        notes.append(f"pod {label} not created: pending and not kubeplace's to place")
        return "", label
    if replayed is not None and (namespace, name) not in replayed:
        notes.append(f"pod {label} not created: pending, and not in kubeplace's plan")
        return "", label
    return "replayed", label


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _node(raw: Mapping[str, Any]) -> Manifest:
    """A kwok node with the file's name, labels, annotations, taints, cordon and allocatable."""
    metadata, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    allocatable = dict(status.get("allocatable") or {})
    annotations = {**(metadata.get("annotations") or {}), KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": metadata["name"], "labels": dict(metadata.get("labels") or {}),
                     "annotations": annotations},
        "spec": {key: copy.deepcopy(spec[key]) for key in ("taints", "unschedulable") if key in spec},
        "status": {"allocatable": allocatable, "capacity": dict(status.get("capacity") or allocatable)},
    }


def _pod(raw: Mapping[str, Any], classes: dict[str, int], class_values: Mapping[str, int]) -> Manifest:
    """The pod as created: metadata the API server accepts, the spec with its priority as a class."""
    metadata = raw.get("metadata") or {}
    spec = copy.deepcopy(dict(raw.get("spec") or {}))
    priority = spec.pop("priority", None)
    class_name = spec.pop("priorityClassName", None)
    value = int(priority) if priority is not None else class_values.get(str(class_name), 0)
    if value:
        spec["priorityClassName"] = _priority_class(value, classes)
    out: Manifest = {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": metadata["name"], "namespace": metadata.get("namespace") or "default"},
                     "spec": spec}
    for key in ("labels", "annotations"):
        if metadata.get(key):
            out["metadata"][key] = dict(metadata[key])
    return out


def _priority_class(value: int, classes: dict[str, int]) -> str:
    for name, builtin in BUILTIN_PRIORITY_CLASSES.items():
        if value == builtin:
            return name
    if value > HIGHEST_USER_PRIORITY:
        raise NotHostable(f"priority {value} is above {HIGHEST_USER_PRIORITY}, which only the built-in "
                          "system classes may have")
    name = f"{PRIORITY_CLASS_PREFIX}{value}" if value >= 0 else f"{PRIORITY_CLASS_PREFIX}minus-{-value}"
    classes[name] = value
    return name


def _storage(raw: Mapping[str, Any]) -> Manifest:
    """A storage object as created: its own metadata, no status; a volume's claimRef without uid."""
    metadata = raw.get("metadata") or {}
    out: Manifest = {key: copy.deepcopy(value) for key, value in raw.items() if key not in ("metadata", "status")}
    out["metadata"] = {"name": metadata["name"]}
    if raw.get("kind") in NAMESPACED_STORAGE:
        out["metadata"]["namespace"] = metadata.get("namespace") or "default"
    if metadata.get("labels"):
        out["metadata"]["labels"] = dict(metadata["labels"])
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k not in BINDING_ANNOTATIONS}
    if annotations:
        out["metadata"]["annotations"] = annotations
    claim_ref = (out.get("spec") or {}).get("claimRef")
    if claim_ref:
        out["spec"]["claimRef"] = {k: v for k, v in claim_ref.items() if k not in ("uid", "resourceVersion")}
    return out


def _refuse_claims(pod: Mapping[str, Any], label: str) -> None:
    spec = pod.get("spec") or {}
    ephemeral = [v["name"] for v in spec.get("volumes") or [] if "ephemeral" in v]
    templated = [c.get("name") for c in spec.get("resourceClaims") or [] if "resourceClaimName" not in c]
    if ephemeral or templated:
        what = (f"generic ephemeral volumes ({', '.join(ephemeral)})" if ephemeral
                else f"resource claims from templates ({', '.join(map(str, templated))})")
        raise NotHostable(f"pod {label} uses {what}: the replay does not create their claims yet")


def _has_hard_spread(pod: Mapping[str, Any]) -> bool:
    constraints = (pod.get("spec") or {}).get("topologySpreadConstraints") or []
    return any(c.get("whenUnsatisfiable") == "DoNotSchedule" for c in constraints)
