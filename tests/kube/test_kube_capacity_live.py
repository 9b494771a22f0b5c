"""The live reader lists Karpenter's NodePools and NodeClaims and the DaemonSets, as from files;
a cluster without Karpenter's CRDs (the server answers 404, which the client lists as []) has no
NodePool and plans as before."""

from __future__ import annotations

from typing import Any

from kubeplace.kube.capacity import CAPACITY_APIS
from kubeplace.kube.live import load_live_snapshot
from tests.builders import pod
from tests.kube.test_kube_karpenter import daemon_set, node_pool
from tests.kube.test_kube_preemption_fields import Reader

CLAIM = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "web-abc12",
         "labels": {"karpenter.sh/nodepool": "web"}},
         "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                  "requirements": []},
         "status": {"capacity": {"cpu": "4", "memory": "16Gi"}}}


class CapacityReader(Reader):
    """A cluster serving what its ``served`` holds; every other resource lists as []."""

    def __init__(self, served: dict[tuple[str, str, str], list[dict[str, Any]]]) -> None:
        self.served = served
        self.asked: list[tuple[str, str, str]] = []

    def list_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        self.asked.append((group, version, plural))
        return self.served.get((group, version, plural), [])


def test_the_live_reader_lists_node_pools_node_claims_and_daemon_sets() -> None:
    logs = daemon_set("logs", pod("x").cpu("100m").manifest())
    reader = CapacityReader({("karpenter.sh", "v1", "nodepools"): [node_pool("web")],
                             ("karpenter.sh", "v1", "nodeclaims"): [CLAIM],
                             ("apps", "v1", "daemonsets"): [logs]})
    snapshot = load_live_snapshot(reader)
    assert set(CAPACITY_APIS) <= set(reader.asked)
    assert [p.name for p in snapshot.node_pools] == ["web"]
    assert [c.name for c in snapshot.node_claims] == ["web-abc12"]
    assert [p.key for p in snapshot.daemon_pods] == ["kube-system/logs"]


def test_a_cluster_without_karpenter_has_no_node_pool() -> None:
    snapshot = load_live_snapshot(CapacityReader({}))
    assert (snapshot.node_pools, snapshot.node_claims, snapshot.daemon_pods) == ((), (), ())
