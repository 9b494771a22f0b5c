"""The cluster as the rebalancer sees it: the snapshot, per-pod movability facts and the
PodDisruptionBudgets, read from files (``kubeplace rebalance SOURCE``) or from the API.

Files and the API go through the same :func:`state_of` so a cluster can be rebalanced on
paper exactly as it would be live.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubeplace.kube.errors import InputError, expect_mapping, expect_name, expect_str, expect_string_map
from kubeplace.kube.live import live_metrics
from kubeplace.kube.metrics import MetricsNote
from kubeplace.kube.objects import DisruptionBudget, Pod, Snapshot
from kubeplace.kube.parse import build_snapshot, parse_pod
from kubeplace.kube.raw_objects import Sourced, object_label
from kubeplace.rebalance.movable import PodFacts, facts_of
from kubeplace.rebalance.ownership import CAPI_GROUP

CAPI_MACHINES = (CAPI_GROUP, "v1beta1", "machines")
"""Listed live: which MachineDeployment a Cluster API node belongs to (none when the API is not served)."""


@dataclass(frozen=True)
class ClusterState:
    snapshot: Snapshot
    facts: Mapping[str, PodFacts]
    """Pod key -> facts, for every pod in the snapshot (bound or pending)."""
    pdbs: tuple[DisruptionBudget, ...] = ()
    """The snapshot's PodDisruptionBudgets."""
    raw_pods: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Pod key -> raw object, for every pod read (pending pods of any scheduler included)."""
    node_annotations: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Node name -> its annotations (``karpenter.sh/do-not-disrupt``, a price), for consolidation."""
    machines: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Cluster API Machines, ``NAMESPACE/NAME`` -> labels: a node's MachineDeployment, for consolidation."""
    disrupting: Mapping[str, str] = field(default_factory=dict)
    """Node or NodeClaim name (``NodeClaim/NAME`` for a claim) -> why Karpenter counts it as being
    disrupted against its NodePool's budget: not Ready, being deleted, tainted
    ``karpenter.sh/disrupted``; or ``terminating`` for a claim whose instance is being terminated
    (Karpenter counts it nowhere). For consolidation's budgets (``BuildDisruptionBudgetMapping``)."""


def state_of(objects: Sequence[Sourced], scheduler_name: str = "kubeplace", source: str = "") -> ClusterState:
    """The state of a set of raw objects (files or API lists alike)."""
    snapshot = build_snapshot(objects, scheduler_name=scheduler_name, source=source)
    facts: dict[str, PodFacts] = {}
    raw: dict[str, Mapping[str, Any]] = {}
    annotations: dict[str, Mapping[str, str]] = {}
    machines: dict[str, Mapping[str, str]] = {}
    disrupting: dict[str, str] = {}
    for obj, where in objects:
        if obj.get("kind") == "Node":
            annotations[str((obj.get("metadata") or {}).get("name"))] = _annotations(obj, where)
        if obj.get("kind") in ("Node", "NodeClaim") and (why := _disrupting(obj)):
            name = str((obj.get("metadata") or {}).get("name"))
            disrupting[name if obj.get("kind") == "Node" else f"NodeClaim/{name}"] = why
        if obj.get("kind") == "Machine" and str(obj.get("apiVersion", "")).startswith(f"{CAPI_GROUP}/"):
            machines.update(_machine(obj, where))
        if obj.get("kind") != "Pod":
            continue
        try:
            metadata = expect_mapping(obj.get("metadata"), "metadata")
            key = f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
            facts[key] = facts_of(obj)
        except InputError as error:
            raise error.located(file=where, obj=object_label(obj)) from None
        raw[key] = obj
    return ClusterState(snapshot, facts, snapshot.disruption_budgets, raw, annotations, machines, disrupting)


DISRUPTED_TAINT = "karpenter.sh/disrupted"
"""The taint Karpenter puts on the nodes of a disruption command it is carrying out."""


def _disrupting(obj: Mapping[str, Any]) -> str:
    """Why Karpenter's budget mapping counts this Node or NodeClaim (already parsed, so its shape is
    valid) as being disrupted (``countBudgetConsumers``): "" when it does not."""
    metadata = obj.get("metadata") or {}
    conditions = [c for c in ((obj.get("status") or {}).get("conditions") or []) if isinstance(c, Mapping)]
    if obj.get("kind") == "NodeClaim":
        if any(c.get("type") == "InstanceTerminating" and c.get("status") == "True" for c in conditions):
            return "terminating"
        return "being deleted" if metadata.get("deletionTimestamp") else ""
    if metadata.get("deletionTimestamp"):
        return "being deleted"
    ready = [c.get("status") for c in conditions if c.get("type") == "Ready"]
    if conditions and ready != ["True"]:  # (a node whose input has no conditions at all: a file, read as Ready)
        return "not Ready"
    taints = (obj.get("spec") or {}).get("taints") or []
    if any(isinstance(t, Mapping) and t.get("key") == DISRUPTED_TAINT for t in taints):
        return f"tainted {DISRUPTED_TAINT}"
    return ""


def _machine(obj: Mapping[str, Any], where: str) -> dict[str, Mapping[str, str]]:
    try:
        metadata = expect_mapping(obj.get("metadata"), "metadata")
        key = f"{expect_str(metadata.get('namespace'), 'metadata.namespace') or 'default'}/{expect_name(metadata)}"
        return {key: expect_string_map(metadata.get("labels"), "metadata.labels")}
    except InputError as error:
        raise error.located(file=where, obj=object_label(obj)) from None


def _annotations(obj: Mapping[str, Any], where: str) -> Mapping[str, str]:
    try:
        return expect_string_map(expect_mapping(obj.get("metadata"), "metadata").get("annotations"),
                                 "metadata.annotations")
    except InputError as error:
        raise error.located(file=where, obj=object_label(obj)) from None


def load_file_state(paths: Sequence[Path], scheduler_name: str = "kubeplace") -> ClusterState:
    from kubeplace.kube.files import load_objects

    return state_of(load_objects(paths), scheduler_name, ", ".join(str(p) for p in paths))


def load_live_state(cluster: Any, scheduler_name: str = "kubeplace") -> ClusterState:
    """``cluster`` is a :class:`kube.client.Cluster` (or a fake with the same methods)."""
    from kubeplace.kube.capacity import CAPACITY_APIS
    from kubeplace.kube.gangs import GANG_APIS

    source = cluster.description
    finished = "status.phase!=Succeeded,status.phase!=Failed"
    objects: list[Sourced] = [(n, source) for n in cluster.list_nodes()]
    objects += [(p, source) for p in cluster.list_pods(None, None, finished)]
    objects += [(n, source) for n in cluster.list_namespaces()]
    objects += [(p, source) for p in cluster.list_pod_disruption_budgets()]
    for group, version, plural in (*GANG_APIS, *CAPACITY_APIS, CAPI_MACHINES):
        objects += [(o, source) for o in cluster.list_objects(group, version, plural)]
    metrics, unavailable = live_metrics(cluster)
    state = state_of(objects + metrics, scheduler_name, source)
    if unavailable:
        state = replace(state, snapshot=replace(state.snapshot, notes=(*state.snapshot.notes,
                                                                       MetricsNote(unavailable=unavailable).line())))
    return state


def find_pod(state: ClusterState, key: str) -> Pod:
    """The pod ``NS/NAME`` (pending or not), parsed; InputError when it is not in the input."""
    raw = state.raw_pods.get(key if "/" in key else f"default/{key}")
    if raw is None:
        raise InputError(f"pod {key} not found", field="--make-room-for", expected="NAMESPACE/NAME of a pod")
    return parse_pod(raw)
