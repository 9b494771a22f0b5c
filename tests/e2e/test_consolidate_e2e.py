"""`kubeplace rebalance --consolidate --apply` against the real API server: only nodes a
Karpenter NodeClaim owns are removed, by deleting their NodeClaim (never the Node); a control-plane
node and nodes no provisioner owns are never touched, not even cordoned; a node annotated
``karpenter.sh/do-not-disrupt`` stays; a Cluster API node goes, when its MachineDeployment is
opted in, through its Machine and MachineDeployment; a held Lease stops a run before any write.

Each pod belongs to a real ReplicaSet pinned to one node (``nodeName``; no scheduler runs here),
so the tests check which pods were evicted and which nodes or NodeClaims went, not where
replacements land.
"""

from __future__ import annotations

import contextlib
import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import controlplane as cp
from .crds import install_crds
from .test_bind_e2e import SOLVER_ARGS, assert_exit, cli, kwok_nodes, node_name
from .test_karpenter_e2e import karpenter_build, karpenter_crds  # noqa: F401 (fixtures)
from .test_rebalance_e2e import replica_set, running_pods, wait_running

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

PRICE = {"kubeplace.io/price-per-hour": "0.2"}
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
KARPENTER = ("karpenter.sh", "v1")


def consolidate(control_plane: cp.ControlPlane, namespace: str, *extra: str) -> Any:
    return cli("rebalance", "--consolidate", *extra, "--kubeconfig", str(control_plane.admin_kubeconfig),
               "-n", namespace, "--lease-namespace", namespace, *SOLVER_ARGS)


def test_a_control_plane_node_and_unowned_nodes_are_never_touched(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """The issue's cluster: a control-plane node priced by annotation, empty (the cheapest to
    remove), and two priced nodes no provisioner owns, each running one pod. Nothing may go, so
    ``--apply`` writes nothing: every Node is still there, none cordoned."""
    core, apps = client.CoreV1Api(admin_api), client.AppsV1Api(admin_api)
    specs: dict[str, dict[str, Any]] = {
        "cp": {"cpu": "4", "annotations": dict(PRICE), "labels": {CONTROL_PLANE: ""},
               "taints": [{"key": CONTROL_PLANE, "effect": "NoSchedule"}]},
        "a": {"cpu": "4", "annotations": dict(PRICE)}, "b": {"cpu": "4", "annotations": dict(PRICE)}}
    with kwok_nodes(core, namespace, specs):
        for s in ("a", "b"):
            apps.create_namespaced_replica_set(namespace, replica_set(namespace, f"w{s}", node_name(namespace, s), 1))
        before = wait_running(core, namespace, 2)

        dry = consolidate(control_plane, namespace, "-o", "json")
        assert_exit(dry, 0)
        plan = json.loads(dry.stdout)
        assert plan["consolidate"]["drain"] == []
        kept = {k["node"]: k["why"] for k in plan["consolidate"]["kept"]}
        assert kept[node_name(namespace, "cp")] == "control-plane node, never removed"
        assert kept[node_name(namespace, "a")].startswith("no provisioner is known to own it")
        table = consolidate(control_plane, namespace)
        assert_exit(table, 0)
        assert f"kept {node_name(namespace, 'cp')}: control-plane node, never removed" in table.stdout

        applied = consolidate(control_plane, namespace, "--apply", "-o", "json")
        assert_exit(applied, 0)
        assert json.loads(applied.stdout)["consolidate"]["drain"] == []
        nodes = {n.metadata.name: n for n in core.list_node().items}
        for s in specs:
            assert node_name(namespace, s) in nodes and not nodes[node_name(namespace, s)].spec.unschedulable
        assert {n: p.metadata.uid for n, p in running_pods(core, namespace).items()} == {
            n: p.metadata.uid for n, p in before.items()}


@contextlib.contextmanager
def node_claims(custom: client.CustomObjectsApi, pool: str, nodes: dict[str, str],
                node_class: dict[str, str] | None = None,
                requirements: list[dict[str, Any]] | None = None) -> Iterator[None]:
    """A NodePool (consolidateAfter 0s) and a NodeClaim per node (suffix -> node name) that says it
    launched that node (``status.nodeName``) and that the node is initialized, as Karpenter would
    have; all deleted afterwards. ``node_class``: the nodeClassRef of both (a KWOKNodeClass by
    default); ``requirements`` the NodePool's."""
    node_class = node_class or {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
    claims = {suffix: f"{pool}-{suffix}" for suffix in nodes}
    initialized = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        custom.create_cluster_custom_object(*KARPENTER, "nodepools", {
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": pool},
            "spec": {"template": {"spec": {"requirements": requirements or [], "nodeClassRef": node_class}},
                     "disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}}})
        for suffix, node in nodes.items():
            claim = claims[suffix]
            custom.create_cluster_custom_object(*KARPENTER, "nodeclaims", {
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": claim, "labels": {"karpenter.sh/nodepool": pool}},
                "spec": {"requirements": requirements or [], "nodeClassRef": node_class}})
            custom.patch_cluster_custom_object_status(*KARPENTER, "nodeclaims", claim, {"status": {
                "nodeName": node, "conditions": [{"type": "Initialized", "status": "True", "reason": "Initialized",
                                                  "message": "", "lastTransitionTime": initialized}]}})
        yield
    finally:
        for claim in claims.values():
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(*KARPENTER, "nodeclaims", claim)
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object(*KARPENTER, "nodepools", pool)


def _hold_lease(admin_api: client.ApiClient, namespace: str, holder: str) -> str:
    """The kubeplace-rebalance Lease, held by ``holder`` for the next five minutes (another run)."""
    now = datetime.datetime.now(datetime.UTC)
    client.CoordinationV1Api(admin_api).create_namespaced_lease(namespace, client.V1Lease(
        metadata=client.V1ObjectMeta(name="kubeplace-rebalance"),
        spec=client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=300, acquire_time=now, renew_time=now)))
    return "kubeplace-rebalance"


def _claim_names(custom: client.CustomObjectsApi, pool: str) -> set[str]:
    items = custom.list_cluster_custom_object(*KARPENTER, "nodeclaims")["items"]
    return {c["metadata"]["name"] for c in items
            if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool}


def test_apply_deletes_the_nodeclaims_of_the_chosen_nodes_never_a_node(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str, karpenter_crds: None  # noqa: F811
) -> None:
    """Four Karpenter nodes with their NodeClaims (no Karpenter runs, so nothing terminates them
    afterwards): three go, by their NodeClaims; their Nodes stay (cordoned), as does the node
    annotated do-not-disrupt."""
    core, apps, custom = client.CoreV1Api(admin_api), client.AppsV1Api(admin_api), client.CustomObjectsApi(admin_api)
    pool = f"e2e-{namespace[-6:]}"
    labels = {"karpenter.sh/nodepool": pool}
    specs = {s: {"cpu": "4", "annotations": dict(PRICE), "labels": dict(labels)} for s in ("a", "b", "c")}
    specs["d"] = {"cpu": "4", "annotations": {**PRICE, "karpenter.sh/do-not-disrupt": "true"}, "labels": dict(labels)}
    with kwok_nodes(core, namespace, specs), node_claims(custom, pool, {s: node_name(namespace, s) for s in specs}):
        for s in specs:
            apps.create_namespaced_replica_set(namespace, replica_set(namespace, f"w{s}", node_name(namespace, s), 1))
        wait_running(core, namespace, 4)

        dry = consolidate(control_plane, namespace, "-o", "json")
        assert_exit(dry, 0)
        plan = json.loads(dry.stdout)
        drained = {d["node"] for d in plan["consolidate"]["drain"]}
        assert len(drained) == 3 and node_name(namespace, "d") not in drained
        assert {d["nodeClaim"] for d in plan["consolidate"]["drain"]} == {
            f"{pool}-{n.removeprefix(namespace + '-')}" for n in drained}

        held = _hold_lease(admin_api, namespace, "cronjob-pod-1")
        refused = consolidate(control_plane, namespace, "--apply", "-o", "json")
        assert_exit(refused, 2)
        errors = [line for line in refused.stderr.splitlines() if not line.startswith("warning: metrics API")]
        assert len(errors) == 1 and errors[0].startswith(
            f"error: another rebalance is running: lease {namespace}/kubeplace-rebalance is held by cronjob-pod-1 "
            "until ")
        assert not any(core.read_node(n).spec.unschedulable for n in drained)  # nothing written
        assert len(_claim_names(custom, pool)) == 4
        client.CoordinationV1Api(admin_api).delete_namespaced_lease(held, namespace)

        result = consolidate(control_plane, namespace, "--apply", "-o", "json")
        assert_exit(result, 0)
        doc = json.loads(result.stdout)
        assert {n["node"]: n["outcome"] for n in doc["apply"]["nodes"]} == {n: "NodeClaim deleted" for n in drained}
        assert [r["outcome"] for r in doc["apply"]["results"]] == ["evicted"] * 3
        cp.wait_for(lambda: _claim_names(custom, pool) == {f"{pool}-d"}, 30, "the drained nodes' NodeClaims gone")
        nodes = {n.metadata.name: n for n in core.list_node().items}
        assert all(node_name(namespace, s) in nodes for s in specs)  # no Node deleted
        assert all(nodes[n].spec.unschedulable for n in drained)


CAPI = ("cluster.x-k8s.io", "v1beta1")


def _capi_crds(admin_api: client.ApiClient) -> None:
    """Machine and MachineDeployment of Cluster API, reduced to what kubeplace reads and writes
    (any field kept): no Cluster API controller runs here, the test checks kubeplace's writes."""
    install_crds(admin_api, [{
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.cluster.x-k8s.io"},
        "spec": {"group": "cluster.x-k8s.io", "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                 "versions": [{"name": "v1beta1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
        for plural, kind in (("machines", "Machine"), ("machinedeployments", "MachineDeployment"))])


def test_a_cluster_api_node_goes_through_its_machine_deployment_never_its_node(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """Two nodes of MachineDeployment md-1 (2 replicas), one pod each: without --node-group
    nothing goes; with it, one node's Machine is annotated cluster.x-k8s.io/delete-machine and the
    MachineDeployment scaled to 1; both Nodes are still there."""
    _capi_crds(admin_api)
    core, apps, custom = client.CoreV1Api(admin_api), client.AppsV1Api(admin_api), client.CustomObjectsApi(admin_api)
    custom.create_namespaced_custom_object(*CAPI, namespace, "machinedeployments", {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment", "metadata": {"name": "md-1"},
        "spec": {"replicas": 2}})
    specs: dict[str, dict[str, Any]] = {}
    for s in ("a", "b"):
        custom.create_namespaced_custom_object(*CAPI, namespace, "machines", {
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "metadata": {"name": f"m-{s}", "labels": {"cluster.x-k8s.io/deployment-name": "md-1"}}})
        specs[s] = {"cpu": "4", "annotations": {**PRICE, "cluster.x-k8s.io/machine": f"m-{s}",
                                                "cluster.x-k8s.io/cluster-namespace": namespace}}
    with kwok_nodes(core, namespace, specs):
        for s in specs:
            apps.create_namespaced_replica_set(namespace, replica_set(namespace, f"w{s}", node_name(namespace, s), 1))
        wait_running(core, namespace, 2)

        plain = consolidate(control_plane, namespace, "-o", "json")
        assert_exit(plain, 0)
        kept = {k["node"]: k["why"] for k in json.loads(plain.stdout)["consolidate"]["kept"]}
        assert "pass --node-group capi/md-1 to consider it" in kept[node_name(namespace, "a")]

        result = consolidate(control_plane, namespace, "--node-group", "capi/md-1", "--apply", "-o", "json")
        assert_exit(result, 0)
        doc = json.loads(result.stdout)
        (drain,) = doc["consolidate"]["drain"]
        suffix = drain["node"].removeprefix(f"{namespace}-")
        assert drain["machine"] == f"{namespace}/m-{suffix}" and drain["nodeGroup"] == "capi/md-1"
        assert [n["outcome"] for n in doc["apply"]["nodes"]] == [
            "Machine marked for deletion, MachineDeployment scaled down"]
        machine = custom.get_namespaced_custom_object(*CAPI, namespace, "machines", f"m-{suffix}")
        assert machine["metadata"]["annotations"] == {"cluster.x-k8s.io/delete-machine": "true"}
        other = "b" if suffix == "a" else "a"
        assert not custom.get_namespaced_custom_object(*CAPI, namespace, "machines", f"m-{other}")["metadata"].get(
            "annotations")
        assert custom.get_namespaced_custom_object(*CAPI, namespace, "machinedeployments", "md-1")["spec"] == {
            "replicas": 1}
        nodes = {n.metadata.name for n in core.list_node().items}
        assert {node_name(namespace, s) for s in specs} <= nodes  # the MachineSet deletes it, not kubeplace
