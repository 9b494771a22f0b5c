"""Snapshots from a live cluster, built exactly as from files (:func:`kube.parse.build_snapshot`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from kubeplace.kube.capacity import CAPACITY_APIS
from kubeplace.kube.dra_parse import DRA_APIS
from kubeplace.kube.errors import ApiFailure, Forbidden, NotFound
from kubeplace.kube.gangs import GANG_APIS
from kubeplace.kube.metrics import MetricsNote
from kubeplace.kube.objects import Snapshot
from kubeplace.kube.parse import build_snapshot
from kubeplace.kube.raw_objects import Sourced

STORAGE_APIS = tuple(("storage.k8s.io", "v1", plural) for plural in
                     ("storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments"))
"""The storage.k8s.io resources the volume rules read, beside claims and volumes."""


class ClusterReader(Protocol):
    """What a snapshot needs from :class:`kube.client.Cluster` (tests pass a fake)."""

    description: str

    def list_nodes(self) -> list[dict[str, Any]]: ...

    def list_pods(
        self,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]: ...

    def list_namespaces(self) -> list[dict[str, Any]]: ...

    def list_persistent_volume_claims(self) -> list[dict[str, Any]]: ...

    def list_persistent_volumes(self) -> list[dict[str, Any]]: ...

    def list_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]: ...

    def list_metrics(self, plural: str) -> list[dict[str, Any]]: ...

    def list_pod_disruption_budgets(self) -> list[dict[str, Any]]: ...

    def list_controllers(self) -> list[dict[str, Any]]: ...


def load_live_snapshot(
    cluster: ClusterReader,
    scheduler_name: str = "kubeplace",
    namespaces: set[str] | None = None,
    selector: str | None = None,
    disruption_budgets: bool = False,
) -> Snapshot:
    """The cluster's snapshot. Pods are listed in every namespace, since all of them use node
    capacity; the namespace and label filters pick the pending pods afterwards, as for files.
    Finished pods are left out by the server (``status.phase`` field selector): they neither
    use capacity nor wait for placement. PodDisruptionBudgets are listed when asked for
    (preemption weighs them; plain placement does not read them)."""
    source = cluster.description
    finished = "status.phase!=Succeeded,status.phase!=Failed"
    objects: list[Sourced] = [(node, source) for node in cluster.list_nodes()]
    objects += [(pod, source) for pod in cluster.list_pods(None, None, finished)]
    objects += [(namespace, source) for namespace in cluster.list_namespaces()]
    objects += [(claim, source) for claim in cluster.list_persistent_volume_claims()]
    objects += [(volume, source) for volume in cluster.list_persistent_volumes()]
    objects += [(controller, source) for controller in cluster.list_controllers()]
    if disruption_budgets:
        objects += [(budget, source) for budget in cluster.list_pod_disruption_budgets()]
    # a CRD that is not installed (Karpenter's NodePools on a cluster without Karpenter) lists as []
    for group, version, plural in (*STORAGE_APIS, *DRA_APIS, *GANG_APIS, *CAPACITY_APIS):
        objects += [(obj, source) for obj in cluster.list_objects(group, version, plural)]
    metrics, unavailable = live_metrics(cluster)
    snapshot = build_snapshot(
        objects + metrics, scheduler_name=scheduler_name, namespaces=namespaces, selector=selector, source=source
    )
    if unavailable:
        snapshot = replace(snapshot, notes=(*snapshot.notes, MetricsNote(unavailable=unavailable).line()))
    return snapshot


def live_metrics(cluster: ClusterReader) -> tuple[list[Sourced], str]:
    """NodeMetrics and PodMetrics of the cluster, and "" or why the metrics API could not be
    read (not registered, its server down, or not allowed): metrics are optional, so that is a
    warning for the caller to print, never an error."""
    objects: list[Sourced] = []
    for plural in ("nodes", "pods"):
        try:
            objects += [(obj, cluster.description) for obj in cluster.list_metrics(plural)]
        except (NotFound, Forbidden, ApiFailure) as error:
            return [], str(error)
    return objects, ""
