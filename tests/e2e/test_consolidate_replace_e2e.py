"""``kubeplace rebalance --consolidate --replace --apply`` against the real API server and the real
Karpenter (its kwok provider): replace before delete. The cheaper new node is created as a
NodeClaim, Karpenter launches it and it is initialized before the old nodes are cordoned and
drained; when Karpenter cannot launch it, nothing is drained and the claim is deleted.

The old nodes are Karpenter nodes as consolidation requires (labelled with their NodePool, each
owned by an initialized NodeClaim), of a NodePool whose NodeClass this Karpenter does not manage
(as another Karpenter's, of another cloud provider, would be): the running Karpenter neither
launches, garbage-collects nor consolidates them itself, so only kubeplace removes them. Nothing
terminates their machines afterwards, so their Nodes stay, cordoned."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubeplace.kube.errors import EXIT_INCOMPLETE

from . import controlplane as cp
from .test_bind_e2e import OWNER_LABEL, SOLVER_ARGS, assert_exit, cli, kwok_nodes, node_name
from .test_consolidate_e2e import node_claims
from .test_karpenter_e2e import (  # noqa: F401 (fixtures)
    CATALOGUE,
    KARPENTER,
    KWOK_GROUP,
    _claims,
    _create_cluster_object,
    _delete_launched,
    _delete_quietly,
    karpenter,
    karpenter_build,
    karpenter_crds,
    offering,
)
from .test_rebalance_e2e import replica_set, running_pods, wait_running

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

OLD = {"cpu": "8", "memory": "16Gi", "annotations": {"kubeplace.io/price-per-hour": "0.32"}}
OTHER_NODE_CLASS = {"group": "e2e.kubeplace.io", "kind": "OtherNodeClass", "name": "default"}
"""A NodeClass kind the kwok provider does not support: Karpenter leaves its NodePool and NodeClaims alone."""
OLD_TYPES = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c-8x-amd64-linux"]}]


@contextlib.contextmanager
def old_nodes(core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str) -> Iterator[list[str]]:
    """Two 8-CPU nodes (0.32/h each) of NodePool old-<namespace> (8-CPU types only), each owned by an
    initialized NodeClaim."""
    old_pool = f"old-{namespace[-6:]}"
    specs = {s: {**OLD, "labels": {"karpenter.sh/nodepool": old_pool}} for s in ("a", "b")}
    with kwok_nodes(core, namespace, specs) as old, node_claims(
            custom, old_pool, {s: node_name(namespace, s) for s in specs}, OTHER_NODE_CLASS, OLD_TYPES):
        yield old


def _old_claims(custom: client.CustomObjectsApi, namespace: str) -> list[Any]:
    return _claims(custom, f"old-{namespace[-6:]}")


@contextlib.contextmanager
def pool_of(custom: client.CustomObjectsApi, core: client.CoreV1Api, pool: str, namespace: str) -> Iterator[None]:
    """A NodePool whose nodes the test's pods may run on (its owner label); Karpenter never
    consolidates them itself (consolidateAfter Never)."""
    node_pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": pool},
                 "spec": {"template": {"metadata": {"labels": {"e2e-pool": pool, OWNER_LABEL: namespace}}, "spec": {
                     "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                       "values": ["on-demand"]}],
                     "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}},
                     "disruption": {"consolidateAfter": "Never"}, "limits": {"cpu": "32"}}}
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(_delete_launched, custom, core, pool)
        _create_cluster_object(custom, KWOK_GROUP, "kwoknodeclasses", {
            "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}})
        custom.create_cluster_custom_object(*KARPENTER, "nodepools", node_pool)
        cleanup.callback(_delete_quietly, lambda: custom.delete_cluster_custom_object(*KARPENTER, "nodepools", pool))
        yield


def consolidate(kubeconfig: Path, namespace: str, catalogue: Path, *extra: str) -> Any:
    return cli("rebalance", "--consolidate", "--replace", "--catalogue", str(catalogue), "--apply",
               "--kubeconfig", str(kubeconfig), "-n", namespace, "--lease-namespace", namespace, "-o", "json",
               *SOLVER_ARGS, *extra)


def test_the_new_node_is_initialized_before_the_old_ones_are_drained(
        control_plane: cp.ControlPlane, admin_api: client.ApiClient, karpenter: cp.Component,  # noqa: F811
        namespace: str, tmp_path: Path) -> None:
    """Two 8-CPU nodes (0.32/h each) with a 500m pod each: both go, replaced by one 2-CPU node of
    the NodePool (0.08/h), which Karpenter launches from kubeplace's NodeClaim before any eviction."""
    custom, core, apps = client.CustomObjectsApi(admin_api), client.CoreV1Api(admin_api), client.AppsV1Api(admin_api)
    pool = f"e2e-{namespace[-6:]}"
    catalogue = tmp_path / "instance_types.json"
    catalogue.write_text(json.dumps(CATALOGUE))
    with pool_of(custom, core, pool, namespace), old_nodes(core, custom, namespace) as old:
        for s in ("a", "b"):
            apps.create_namespaced_replica_set(namespace, replica_set(namespace, f"w{s}", node_name(namespace, s), 1,
                                                                      cpu="500m"))
        wait_running(core, namespace, 2)
        result = consolidate(control_plane.admin_kubeconfig, namespace, catalogue, "--node-timeout", "120")
        assert_exit(result, 0)
        doc = json.loads(result.stdout)
        (new,) = doc["consolidate"]["add"]
        assert (new["instanceType"], new["nodePool"]) == ("c-2x-amd64-linux", pool)
        assert doc["consolidate"]["costPerHourAfter"] == pytest.approx(0.08)
        (added,) = doc["apply"]["added"]
        registered = added["registeredAs"]
        assert registered and added["node"] == new["node"] and added["note"] == ""
        assert {n["node"]: n["outcome"] for n in doc["apply"]["nodes"]} == {n: "NodeClaim deleted" for n in old}
        assert [r["outcome"] for r in doc["apply"]["results"]] == ["evicted"] * 2
        assert {r["to"] for r in doc["apply"]["results"]} == {registered}
        (claim,) = _claims(custom, pool)
        assert claim["metadata"]["name"] == added["nodeClaim"]
        initialized = next(c for c in claim["status"]["conditions"] if c["type"] == "Initialized")
        assert initialized["status"] == "True"
        node = core.read_node(registered)
        assert node.metadata.labels["node.kubernetes.io/instance-type"] == "c-2x-amd64-linux"
        assert "karpenter.sh/do-not-disrupt" not in (node.metadata.annotations or {})
        assert _old_claims(custom, namespace) == []  # removed through their NodeClaims; no Node deleted
        assert all(core.read_node(n).spec.unschedulable for n in old)


def test_a_new_node_karpenter_cannot_launch_drains_nothing(
        control_plane: cp.ControlPlane, admin_api: client.ApiClient, karpenter: cp.Component,  # noqa: F811
        namespace: str, tmp_path: Path) -> None:
    """kubeplace's catalogue has a cheaper type that Karpenter's does not: its claim is never
    launched, so after --node-timeout nothing is cordoned or evicted, the claim is deleted, and
    the exit code says the consolidation was not carried out."""
    custom, core, apps = client.CustomObjectsApi(admin_api), client.CoreV1Api(admin_api), client.AppsV1Api(admin_api)
    pool = f"e2e-{namespace[-6:]}"
    catalogue = tmp_path / "instance_types.json"
    unknown = {"name": "c-1x-amd64-linux", "offerings": [offering(0.04)], "architecture": "amd64",
               "operatingSystems": ["linux"], "resources": {"cpu": "1", "memory": "2Gi", "pods": "110"}}
    catalogue.write_text(json.dumps([*CATALOGUE, unknown]))
    with pool_of(custom, core, pool, namespace), old_nodes(core, custom, namespace) as old:
        for s in ("a", "b"):
            apps.create_namespaced_replica_set(namespace, replica_set(namespace, f"w{s}", node_name(namespace, s), 1,
                                                                      cpu="250m"))
        before = {n: p.metadata.uid for n, p in wait_running(core, namespace, 2).items()}
        result = consolidate(control_plane.admin_kubeconfig, namespace, catalogue, "--node-timeout", "15")
        assert_exit(result, EXIT_INCOMPLETE)
        doc = json.loads(result.stdout)
        (new,) = doc["consolidate"]["add"]
        assert new["instanceType"] == "c-1x-amd64-linux"
        stopped = doc["apply"]["stopped"]
        assert stopped.startswith(f"new node {new['node']} did not come: not ready after 15s: NodeClaim ")
        assert stopped.endswith("; nothing drained") and doc["apply"]["results"] == []
        assert all(n["outcome"] == "not run" for n in doc["apply"]["nodes"])
        cp.wait_for(lambda: not _claims(custom, pool), 60, "the NodeClaim deleted")
        assert not any(core.read_node(n).spec.unschedulable for n in old)
        assert len(_old_claims(custom, namespace)) == 2
        assert {n: p.metadata.uid for n, p in running_pods(core, namespace).items()} == before
