"""`kubeplace serve` preempting on the real API server: a pod a PodDisruptionBudget protects is kept
while an unprotected one of the same priority will do. The preemption end to end, as the kubeplace
identity with only the rights of deploy/rbac.yaml, is in test_rbac_e2e.py (which applies them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubeplace.kube.client import Cluster
from kubeplace.kube.kubeconfig import connect
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.app import LeaseSettings, Service
from kubeplace.serve.settings import ServeSettings

from . import controlplane as cp
from .test_bind_e2e import create_pods, kwok_nodes, pod_manifest, pod_nodes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

OPTIONS = SolverSettings(time_limit=5, workers=1, seed=0)


@contextlib.contextmanager
def priority_classes(scheduling: client.SchedulingV1Api, namespace: str) -> Iterator[dict[str, str]]:
    """Two PriorityClasses of this test: low (100) and high (1000)."""
    names = {"low": f"{namespace}-low", "high": f"{namespace}-high"}
    try:
        for level, value in (("low", 100), ("high", 1000)):
            scheduling.create_priority_class(client.V1PriorityClass(
                metadata=client.V1ObjectMeta(name=names[level]), value=value))
        yield names
    finally:
        for name in names.values():
            with contextlib.suppress(ApiException):
                scheduling.delete_priority_class(name)


def victim(name: str, namespace: str, node: str, klass: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    manifest = pod_manifest(name, namespace, cpu="4", node=node, scheduler="default-scheduler",
                            spec={"priorityClassName": klass, "terminationGracePeriodSeconds": 1})
    manifest["metadata"]["labels"] = labels or {}
    return manifest


@contextlib.contextmanager
def serving(kubeconfig: str, namespace: str) -> Iterator[Service]:
    settings = ServeSettings(batch_window=0.3, namespaces=frozenset({namespace}), initial_backoff=0.5,
                             max_backoff=1.0)
    service = Service(cast(Cluster, connect(kubeconfig)), Configuration(), Profile(), OPTIONS, settings,
                      LeaseSettings(name=""), "preempt-e2e", watch_seconds=10)
    try:
        service.start(sync_timeout=20)
        yield service
    finally:
        service.stop(release=True, timeout=20)


def running_pods(core: client.CoreV1Api, namespace: str) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod(namespace).items if not p.metadata.deletion_timestamp}


def reasons(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, str]:
    return {e.reason: e.message for e in core.list_namespaced_event(namespace).items if e.involved_object.name == name}


def test_a_pdb_protected_pod_is_kept_while_an_unprotected_one_of_its_priority_will_do(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core, scheduling = client.CoreV1Api(admin_api), client.SchedulingV1Api(admin_api)
    policy = client.PolicyV1Api(admin_api)
    specs = {"a": {"cpu": "4"}, "b": {"cpu": "4"}}
    with priority_classes(scheduling, namespace) as klass, kwok_nodes(core, namespace, specs) as (a, b):
        create_pods(core, namespace, [victim("guarded", namespace, a, klass["low"], {"app": "db"}),
                                      victim("free", namespace, b, klass["low"], {"app": "web"})])
        policy.create_namespaced_pod_disruption_budget(namespace, {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})

        def budget_current() -> bool:
            status = policy.read_namespaced_pod_disruption_budget("db", namespace).status
            return status is not None and status.expected_pods == 1 and status.disruptions_allowed == 0

        cp.wait_for(budget_current, 30, "the budget's status from the disruption controller")
        cp.wait_for(lambda: running_pods(core, namespace) == {"guarded", "free"}, 30, "both running")
        with serving(str(control_plane.admin_kubeconfig), namespace):
            create_pods(core, namespace, [pod_manifest("high", namespace, cpu="4",
                                                       spec={"priorityClassName": klass["high"]})])
            cp.wait_for(lambda: pod_nodes(core, namespace).get("high") == b, 60, "the preemptor bound on b")
        assert running_pods(core, namespace) == {"guarded", "high"}
