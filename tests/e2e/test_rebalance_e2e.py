"""`kubeplace rebalance` against the real API server: Eviction API, PodDisruptionBudgets kept current
by the kube-controller-manager, protected pods, dry run, and --apply evicting exactly the plan.

The movable pods belong to real ReplicaSets whose template pins them to the test's node ``a``
(``nodeName``), so no scheduler is needed and node ``a`` starts hot; the replacement a ReplicaSet
creates after an eviction lands on ``a`` again, which does not matter here: the tests check which
pods were evicted, not where their replacements went.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from kubeplace.kube.kubeconfig import connect
from kubeplace.rebalance.apply import EVICTED, SKIPPED_PDB, apply_moves
from kubeplace.rebalance.solve_moves import Move

from . import controlplane as cp
from .test_bind_e2e import OWNER_LABEL, SOLVER_ARGS, assert_exit, cli, kwok_nodes, node_name

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def replica_set(namespace: str, name: str, node: str, replicas: int, *, cpu: str = "1",
                annotations: dict[str, str] | None = None,
                volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": "app", "image": "registry.invalid/fake:1",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
        "tolerations": [cp.KWOK_TOLERATION],
        "nodeSelector": {OWNER_LABEL: namespace},
        "terminationGracePeriodSeconds": 0,
    }
    if volumes:
        spec["volumes"] = volumes
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels, "annotations": annotations or {}}, "spec": spec}}}


def running_pods(core: client.CoreV1Api, namespace: str) -> dict[str, Any]:
    return {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items
            if p.status.phase == "Running" and not p.metadata.deletion_timestamp}


def wait_running(core: client.CoreV1Api, namespace: str, count: int) -> dict[str, Any]:
    cp.wait_for(lambda: len(running_pods(core, namespace)) >= count, 30, f"{count} running pods in {namespace}")
    return running_pods(core, namespace)


def make_pdb(admin_api: client.ApiClient, namespace: str, app: str, max_unavailable: int, expected: int) -> None:
    policy = client.PolicyV1Api(admin_api)
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": app},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": app}}}})

    def current() -> bool:
        status = policy.read_namespaced_pod_disruption_budget(app, namespace).status
        return status is not None and status.expected_pods == expected and status.disruptions_allowed == max_unavailable

    cp.wait_for(current, 30, f"PDB {app} status from the disruption controller")


def rebalance(kubeconfig: str, namespace: str, *args: str) -> Any:
    return cli("rebalance", "--kubeconfig", kubeconfig, "-n", namespace, "--lease-namespace", namespace,
               "-o", "json", *SOLVER_ARGS, *args)


def test_dry_run_evicts_nothing_and_protected_pods_are_never_planned(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core, apps = client.CoreV1Api(admin_api), client.AppsV1Api(admin_api)
    with kwok_nodes(core, namespace, {"a": {"cpu": "8"}, "b": {"cpu": "8"}, "c": {"cpu": "8"}}):
        hot = node_name(namespace, "a")
        apps.create_namespaced_replica_set(namespace, replica_set(namespace, "web", hot, 3))
        apps.create_namespaced_replica_set(namespace, replica_set(
            namespace, "keep", hot, 2, annotations={"kubeplace.io/evict": "false"}))
        apps.create_namespaced_replica_set(namespace, replica_set(
            namespace, "cache", hot, 2, volumes=[{"name": "scratch", "emptyDir": {}}]))
        bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
                "spec": {**replica_set(namespace, "x", hot, 1)["spec"]["template"]["spec"]}}
        core.create_namespaced_pod(namespace, bare)
        before = wait_running(core, namespace, 8)

        result = rebalance(str(control_plane.admin_kubeconfig), namespace)

        assert_exit(result, 0)
        doc = json.loads(result.stdout)
        moved = {m["name"] for m in doc["moves"]}
        assert moved and all(name.startswith("web-") for name in moved)
        reasons = {e["pod"].split("/")[1]: e["reason"] for e in doc["excluded"]}
        assert reasons["bare"].startswith("bare pod")
        assert all(reasons[n] == 'annotation kubeplace.io/evict: "false"' for n in before if n.startswith("keep-"))
        assert all(reasons[n].startswith("local storage") for n in before if n.startswith("cache-"))
        assert doc["apply"] == {"dry_run": True, "evicted": 0}
        after = running_pods(core, namespace)
        assert {n: p.metadata.uid for n, p in after.items()} == {n: p.metadata.uid for n, p in before.items()}


def test_pdb_429_is_reported_never_retried_and_apply_evicts_exactly_the_plan(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core, apps = client.CoreV1Api(admin_api), client.AppsV1Api(admin_api)
    with kwok_nodes(core, namespace, {"a": {"cpu": "8"}, "b": {"cpu": "8"}, "c": {"cpu": "8"}}):
        hot = node_name(namespace, "a")
        apps.create_namespaced_replica_set(namespace, replica_set(namespace, "web", hot, 4))
        apps.create_namespaced_replica_set(namespace, replica_set(namespace, "frozen", hot, 2))
        pods = wait_running(core, namespace, 6)
        make_pdb(admin_api, namespace, "web", 1, 4)
        make_pdb(admin_api, namespace, "frozen", 0, 2)

        # By hand, an eviction the PDB forbids: a 429, reported, tried exactly once.
        cluster = connect(str(control_plane.admin_kubeconfig))
        calls: list[str] = []
        evict = cluster.evict

        def counted(ns: str, name: str, uid: str, dry_run: bool = False) -> None:
            calls.append(name)
            evict(ns, name, uid, dry_run)

        cluster.evict = counted  # type: ignore[method-assign]
        frozen = sorted(n for n in pods if n.startswith("frozen-"))[0]
        move = Move(namespace, frozen, pods[frozen].metadata.uid, hot, node_name(namespace, "b"), "test")
        report = apply_moves(cluster, [move], dry_run=False, lease_namespace=namespace)
        assert [o.outcome for o in report.outcomes] == [SKIPPED_PDB]
        assert "429" in report.outcomes[0].message and "disruption budget" in report.outcomes[0].message
        assert calls == [frozen]
        assert frozen in running_pods(core, namespace)

        # The CLI plans within the PDBs' current budgets and --apply evicts exactly what it planned.
        before = running_pods(core, namespace)
        result = rebalance(str(control_plane.admin_kubeconfig), namespace, "--apply")

        assert_exit(result, 0)
        doc = json.loads(result.stdout)
        planned = {m["name"] for m in doc["moves"]}
        assert len(planned) == 1 and next(iter(planned)).startswith("web-")  # web allows one, frozen none
        assert {r["name"]: r["outcome"] for r in doc["apply"]["results"]} == dict.fromkeys(planned, EVICTED)
        cp.wait_for(lambda: not planned & set(running_pods(core, namespace)), 30, "the planned pod evicted")
        after = running_pods(core, namespace)
        assert {n for n in before if n not in after} == planned
        assert all(after[n].metadata.uid == before[n].metadata.uid for n in before if n not in planned)
        lease = client.CoordinationV1Api(admin_api).read_namespaced_lease("kubeplace-rebalance", namespace)
        assert not lease.spec.holder_identity
