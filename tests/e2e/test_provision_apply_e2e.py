"""``kubeplace plan --provision --apply`` against the real API server and the real Karpenter (its kwok
provider): the plan's new nodes are created as NodeClaims, Karpenter launches them, and the pods
are bound to the nodes as they registered; a claim Karpenter cannot launch leaves its pods
unbound with the reason, and the exit code says the plan was not bound whole."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubeplace.kube.errors import EXIT_INCOMPLETE
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.models.config_load import load_configuration
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.plan import Placement

from . import controlplane as cp
from .test_bind_e2e import SCHEDULER, assert_exit, cli, kwok_nodes, pod_manifest, pod_nodes
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

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def node_pool(pool: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": pool},
            "spec": {"template": {"metadata": {"labels": {"e2e-pool": pool}}, "spec": {
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}},
                "disruption": {"consolidateAfter": "Never"}, "limits": {"cpu": "32"}}}


@contextlib.contextmanager
def pool_of(custom: client.CustomObjectsApi, core: client.CoreV1Api, pool: str) -> Any:
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(_delete_launched, custom, core, pool)
        _create_cluster_object(custom, KWOK_GROUP, "kwoknodeclasses", {
            "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}})
        custom.create_cluster_custom_object(*KARPENTER, "nodepools", node_pool(pool))
        cleanup.callback(_delete_quietly, lambda: custom.delete_cluster_custom_object(*KARPENTER, "nodepools", pool))
        yield


def apply(kubeconfig: Path, namespace: str, catalogue: Path, *extra: str) -> Any:
    return cli("plan", "--kubeconfig", str(kubeconfig), "-n", namespace, "--provision", "--catalogue",
               str(catalogue), "--apply", "--time-limit", "5", "--workers", "1", "-o", "json", *extra)


def test_apply_creates_the_new_nodes_through_karpenter_and_binds_the_pods_on_them(
        control_plane: cp.ControlPlane, admin_api: client.ApiClient, karpenter: cp.Component,  # noqa: F811
        namespace: str, tmp_path: Path) -> None:
    """Two 1500m pods no existing node may take (a 2-CPU node keeps 1900m: one each, 0.16/h
    against 0.32/h for the 8-CPU one) and one pod for an existing node: two NodeClaims of the
    NodePool, launched as planned, and the three pods bound, what is bound passing the verifier
    on the nodes as they registered."""
    custom, core = client.CustomObjectsApi(admin_api), client.CoreV1Api(admin_api)
    pool = f"e2e-{namespace[-6:]}"
    catalogue = tmp_path / "instance_types.json"
    catalogue.write_text(json.dumps(CATALOGUE))
    with pool_of(custom, core, pool), kwok_nodes(core, namespace, {"old": {"cpu": "2", "memory": "4Gi"}}) as (old,):
        core.create_namespaced_pod(namespace, pod_manifest("small", namespace, cpu="500m"))
        for i in range(2):
            core.create_namespaced_pod(namespace, pod_manifest(f"web-{i}", namespace, cpu="1500m", memory="1Gi",
                                                               spec={"nodeSelector": {"e2e-pool": pool}}))
        result = apply(control_plane.admin_kubeconfig, namespace, catalogue)
        assert_exit(result, 0)
        doc = json.loads(result.stdout)
        assert [(n["node"], n["instanceType"]) for n in doc["provision"]] == [
            (f"{pool}-1", "c-2x-amd64-linux"), (f"{pool}-2", "c-2x-amd64-linux")]
        registered = {n["node"]: n["registeredAs"] for n in doc["apply"]["nodes"]}
        assert all(registered.values()) and all(n["note"] == "" for n in doc["apply"]["nodes"])
        assert {r["name"]: r["outcome"] for r in doc["apply"]["results"]} == {
            "small": "bound", "web-0": "bound", "web-1": "bound"}

        nodes = pod_nodes(core, namespace)
        planned = {p["name"]: p["node"] for p in doc["placements"]}
        assert nodes == {name: registered.get(node, node) for name, node in planned.items()}
        assert nodes["small"] == old and len({nodes["web-0"], nodes["web-1"]}) == 2
        claims = {c["metadata"]["name"]: c for c in _claims(custom, pool)}
        assert {n["nodeClaim"] for n in doc["apply"]["nodes"]} == set(claims)
        for claim in claims.values():
            assert claim["metadata"]["ownerReferences"][0]["name"] == pool
            assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == pool
        for name in registered.values():
            node = core.read_node(name)
            assert node.metadata.labels["node.kubernetes.io/instance-type"] == "c-2x-amd64-linux"
            assert "karpenter.sh/do-not-disrupt" not in (node.metadata.annotations or {})

        after = load_live_snapshot(connect(str(control_plane.admin_kubeconfig)), scheduler_name=SCHEDULER)
        mine = [p for p in after.bound if p.namespace == namespace]
        before = replace(after, pending=tuple(replace(p, node_name="") for p in mine),
                         bound=tuple(p for p in after.bound if p.namespace != namespace))
        config = load_configuration(None)
        bound_as = [Placement(p.namespace, p.name, p.node_name, p.uid) for p in mine]
        assert verify_plan(before, bound_as, config, config.profile(None)) == []


def test_a_claim_karpenter_cannot_launch_leaves_its_pods_with_the_reason(
        control_plane: cp.ControlPlane, admin_api: client.ApiClient, karpenter: cp.Component,  # noqa: F811
        namespace: str, tmp_path: Path) -> None:
    """kubeplace's catalogue has a cheaper type that Karpenter's does not: the claim for it is
    never launched, so after --node-timeout its pod is reported unbound with the claim's
    condition, the claim is deleted, and the exit code is bind's for a plan not bound whole."""
    custom, core = client.CustomObjectsApi(admin_api), client.CoreV1Api(admin_api)
    pool = f"e2e-{namespace[-6:]}"
    catalogue = tmp_path / "instance_types.json"
    unknown = {"name": "c-1x-amd64-linux", "offerings": [offering(0.04)], "architecture": "amd64",
               "operatingSystems": ["linux"], "resources": {"cpu": "1", "memory": "2Gi", "pods": "110"}}
    catalogue.write_text(json.dumps([*CATALOGUE, unknown]))
    with pool_of(custom, core, pool):
        core.create_namespaced_pod(namespace, pod_manifest("web-0", namespace, cpu="500m", memory="512Mi",
                                                           spec={"nodeSelector": {"e2e-pool": pool}}))
        result = apply(control_plane.admin_kubeconfig, namespace, catalogue, "--node-timeout", "20")
        assert_exit(result, EXIT_INCOMPLETE)
        doc = json.loads(result.stdout)
        (node,) = doc["apply"]["nodes"]
        assert node["instanceType"] == "c-1x-amd64-linux" and node["registeredAs"] == ""
        assert node["note"].startswith("not ready after 20s: NodeClaim ") and "not launched" in node["note"]
        assert node["note"].endswith("; NodeClaim deleted")  # a node it launched later would serve no pod
        cp.wait_for(lambda: not _claims(custom, pool), 60, f"NodeClaim {node['nodeClaim']} gone")
        (row,) = doc["apply"]["results"]
        assert row["outcome"] == "node_missing" and row["message"].startswith(f"new node {pool}-1 did not come: ")
        assert pod_nodes(core, namespace) == {"web-0": ""}
