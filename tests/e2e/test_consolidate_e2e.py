"""`kubeplace rebalance --consolidate --apply` against the real API server: the nodes chosen are
cordoned, their pods evicted through the Eviction API, and the Nodes deleted; a node annotated
``karpenter.sh/do-not-disrupt`` stays.

Each pod belongs to a real ReplicaSet pinned to one node (``nodeName``; no scheduler runs here),
so the test checks which pods were evicted and which nodes went, not where replacements land.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from . import controlplane as cp
from .test_bind_e2e import SOLVER_ARGS, assert_exit, cli, kwok_nodes, node_name
from .test_rebalance_e2e import replica_set, running_pods, wait_running

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

PRICE = {"kubeplace.io/price-per-hour": "0.2"}


def test_apply_cordons_evicts_and_deletes_the_chosen_nodes(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core, apps = client.CoreV1Api(admin_api), client.AppsV1Api(admin_api)
    specs = {s: {"cpu": "4", "annotations": dict(PRICE)} for s in ("a", "b", "c")}
    specs["d"] = {"cpu": "4", "annotations": {**PRICE, "karpenter.sh/do-not-disrupt": "true"}}
    with kwok_nodes(core, namespace, specs):
        for s in specs:
            apps.create_namespaced_replica_set(namespace, replica_set(namespace, f"w{s}", node_name(namespace, s), 1))
        before = wait_running(core, namespace, 4)

        dry = cli("rebalance", "--consolidate", "--kubeconfig", str(control_plane.admin_kubeconfig), "-n", namespace,
                  "--lease-namespace", namespace, "-o", "json", *SOLVER_ARGS)
        assert_exit(dry, 0)
        plan = json.loads(dry.stdout)
        drained = {d["node"] for d in plan["consolidate"]["drain"]}
        assert len(drained) == 3 and node_name(namespace, "d") not in drained
        assert plan["consolidate"]["costPerHourAfter"] == pytest.approx(0.2)
        assert {n: p.metadata.uid for n, p in running_pods(core, namespace).items()} == {
            n: p.metadata.uid for n, p in before.items()}

        result = cli("rebalance", "--consolidate", "--apply", "--kubeconfig", str(control_plane.admin_kubeconfig),
                     "-n", namespace, "--lease-namespace", namespace, "-o", "json", *SOLVER_ARGS)
        assert_exit(result, 0)
        doc = json.loads(result.stdout)
        assert {n["node"]: n["outcome"] for n in doc["apply"]["nodes"]} == {n: "Node deleted" for n in drained}
        assert [r["outcome"] for r in doc["apply"]["results"]] == ["evicted"] * 3
        nodes = {n.metadata.name for n in core.list_node().items}
        assert not drained & nodes and node_name(namespace, "d") in nodes
        evicted = {r["name"] for r in doc["apply"]["results"]}
        cp.wait_for(lambda: not evicted & set(running_pods(core, namespace)), 30, "the evicted pods gone")
