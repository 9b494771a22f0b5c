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

from kubeplace.kube.errors import InputError, expect_list, expect_mapping, expect_str
from kubeplace.kube.live import live_metrics
from kubeplace.kube.metrics import MetricsNote
from kubeplace.kube.objects import Pod, Requirement, Snapshot
from kubeplace.kube.parse import Sourced, build_snapshot, object_label, parse_pod
from kubeplace.kube.selectors import matches
from kubeplace.rebalance.movable import PodFacts, facts_of


@dataclass(frozen=True)
class Pdb:
    """A PodDisruptionBudget: the pods it selects in its namespace may be disrupted at most
    ``allowed`` times now (``status.disruptionsAllowed``)."""

    namespace: str
    name: str
    selector: tuple[Requirement, ...] | None
    """None selects no pod (a null selector); () selects every pod of the namespace."""
    allowed: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, pod: Pod) -> bool:
        return self.selector is not None and pod.namespace == self.namespace and matches(self.selector, pod.labels)


@dataclass(frozen=True)
class ClusterState:
    snapshot: Snapshot
    facts: Mapping[str, PodFacts]
    """Pod key -> facts, for every pod in the snapshot (bound or pending)."""
    pdbs: tuple[Pdb, ...] = ()
    raw_pods: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Pod key -> raw object, for every pod read (pending pods of any scheduler included)."""

    def pdbs_of(self, pod: Pod) -> tuple[Pdb, ...]:
        return tuple(p for p in self.pdbs if p.selects(pod))


def parse_pdb(obj: Mapping[str, Any], source: str = "") -> Pdb:
    try:
        metadata = expect_mapping(obj.get("metadata"), "metadata")
        spec = expect_mapping(obj.get("spec"), "spec")
        status = expect_mapping(obj.get("status"), "status")
        allowed = status.get("disruptionsAllowed", 0)
        if isinstance(allowed, bool) or not isinstance(allowed, int) or allowed < 0:
            raise InputError(f"{allowed!r} is not a count", field="status.disruptionsAllowed",
                             expected="a non-negative integer")
        raw_selector = spec.get("selector")
        selector = None if raw_selector is None else _label_selector(expect_mapping(raw_selector, "spec.selector"))
        return Pdb(expect_str(metadata.get("namespace"), "metadata.namespace") or "default",
                   expect_str(metadata.get("name"), "metadata.name"), selector, allowed)
    except InputError as error:
        raise error.located(file=source, obj=object_label(obj)) from None


def _label_selector(raw: Mapping[str, Any]) -> tuple[Requirement, ...]:
    out = [Requirement(str(k), "In", (expect_str(v, f"spec.selector.matchLabels.{k}"),))
           for k, v in expect_mapping(raw.get("matchLabels"), "spec.selector.matchLabels").items()]
    for index, item in enumerate(expect_list(raw.get("matchExpressions"), "spec.selector.matchExpressions")):
        where = f"spec.selector.matchExpressions[{index}]"
        expression = expect_mapping(item, where)
        operator = expect_str(expression.get("operator"), f"{where}.operator")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise InputError(f"unknown operator {operator!r}", field=f"{where}.operator",
                             expected="In, NotIn, Exists or DoesNotExist")
        values = tuple(expect_str(v, f"{where}.values") for v in expect_list(expression.get("values"), where))
        out.append(Requirement(expect_str(expression.get("key"), f"{where}.key"), operator, values))
    return tuple(out)


def state_of(objects: Sequence[Sourced], scheduler_name: str = "kubeplace", source: str = "") -> ClusterState:
    """The state of a set of raw objects (files or API lists alike)."""
    wanted = [(o, s) for o, s in objects if o.get("kind") != "PodDisruptionBudget"]
    snapshot = build_snapshot(wanted, scheduler_name=scheduler_name, source=source)
    facts: dict[str, PodFacts] = {}
    raw: dict[str, Mapping[str, Any]] = {}
    for obj, where in objects:
        if obj.get("kind") != "Pod":
            continue
        try:
            metadata = expect_mapping(obj.get("metadata"), "metadata")
            key = f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
            facts[key] = facts_of(obj)
        except InputError as error:
            raise error.located(file=where, obj=object_label(obj)) from None
        raw[key] = obj
    pdbs = tuple(parse_pdb(o, s) for o, s in objects if o.get("kind") == "PodDisruptionBudget")
    return ClusterState(snapshot, facts, pdbs, raw)


def load_file_state(paths: Sequence[Path], scheduler_name: str = "kubeplace") -> ClusterState:
    from kubeplace.kube.files import load_objects

    return state_of(load_objects(paths), scheduler_name, ", ".join(str(p) for p in paths))


def load_live_state(cluster: Any, scheduler_name: str = "kubeplace") -> ClusterState:
    """``cluster`` is a :class:`kube.client.Cluster` (or a fake with the same methods)."""
    from kubeplace.kube.gangs import CRDS

    source = cluster.description
    finished = "status.phase!=Succeeded,status.phase!=Failed"
    objects: list[Sourced] = [(n, source) for n in cluster.list_nodes()]
    objects += [(p, source) for p in cluster.list_pods(None, None, finished)]
    objects += [(n, source) for n in cluster.list_namespaces()]
    objects += [(p, source) for p in cluster.list_pod_disruption_budgets()]
    for group, version, plural in CRDS:
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
