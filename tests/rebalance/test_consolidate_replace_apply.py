"""``rebalance --consolidate --replace --apply`` replaces before it deletes: the answer's new
nodes are created as NodeClaims (as ``plan --provision --apply`` creates them) and each must be
initialized before any node is cordoned or any pod evicted; when one is not (timeout, refused,
deleted by Karpenter, interrupted, the Lease lost) nothing is drained and every claim created is
deleted. The ``kubeplace-rebalance`` Lease comes before all of it: a run that finds it held creates
no NodeClaim."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.errors import ApiFailure, Conflict
from kubeplace.plan import new_nodes
from kubeplace.rebalance import apply as apply_module
from kubeplace.rebalance.apply import LeaseHeld
from kubeplace.rebalance.cluster_state import ClusterState
from kubeplace.rebalance.consolidate import Consolidation, consolidate
from kubeplace.rebalance.drain import Replacement, drain_nodes
from kubeplace.rebalance.movable import Rules
from kubeplace.rebalance.solve_moves import Settings
from tests.rebalance.test_consolidate import (
    CATALOGUE,
    CONFIG,
    FAST,
    PROFILE,
    cluster_state,
    karpenter_node,
    node_pool,
    web,
)
from tests.rebalance.test_consolidate_ownership import LeasedCluster


class KarpenterCluster(LeasedCluster):
    """The fake cluster with Karpenter: a NodeClaim created is listed, and initialized (its node
    registered) after ``polls_to_ready`` reads of the claims (never when None)."""

    def __init__(self, state: ClusterState, polls_to_ready: int | None = 1, refuse_create: bool = False,
                 deleted_by_karpenter: bool = False, holder: str = "") -> None:
        super().__init__(state, holder=holder)
        self.polls_to_ready, self.refuse_create, self.deleted = polls_to_ready, refuse_create, deleted_by_karpenter
        self.claims: dict[str, dict[str, Any]] = {}
        self.polls = 0

    def list_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        if plural == "nodepools":
            return [{"metadata": {"name": "default", "uid": "pool-uid"}}]
        assert (group, version, plural) == ("karpenter.sh", "v1", "nodeclaims")
        self.polls += 1
        if self.polls_to_ready is not None and self.polls > self.polls_to_ready:
            for name, claim in self.claims.items():
                node = f"kwok-{name}"
                claim["status"] = {"nodeName": node, "conditions": [
                    {"type": t, "status": "True"} for t in ("Launched", "Registered", "Initialized")]}
                if node not in self.nodes:
                    self.nodes[node] = False
                    self.calls.append(("node registered", node))
        return [] if self.deleted else list(self.claims.values())

    def create_object(self, group: str, version: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.refuse_create:
            raise ApiFailure("HTTP 403: nodeclaims.karpenter.sh is forbidden")
        name = f"{body['metadata']['generateName']}{len(self.claims)}"
        self.claims[name] = {**body, "metadata": {**body["metadata"], "name": name},
                             "status": {"conditions": [{"type": "Launched", "status": "Unknown"}]}}
        self.calls.append(("create nodeclaim", name))
        return self.claims[name]

    def delete_node_claim(self, name: str) -> None:
        self.claims.pop(name, None)
        super().delete_node_claim(name)

    def annotate_node(self, name: str, annotations: dict[str, str | None]) -> None:
        self.calls.append(("annotate", name, *sorted(annotations)))


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(new_nodes, "POLL_SECONDS", 0.01)


def replaced() -> tuple[ClusterState, Consolidation]:
    """Two large nodes (0.2/h) with a 1-CPU pod each, replaced by one small node (0.1/h)."""
    objects = [karpenter_node("n0"), karpenter_node("n1"), web("w0", "n0"), web("w1", "n1"), node_pool()]
    state = cluster_state(objects)  # each old node owned by a NodeClaim
    result = consolidate(state, CATALOGUE, Rules(), CONFIG, PROFILE, Settings(solver=FAST), replace_nodes=True)
    assert len(result.added) == 1 and len(result.drain) == 2
    return state, result


def apply(cluster: KarpenterCluster, state: ClusterState, result: Consolidation, timeout: float = 5.0) -> Any:
    replacement = Replacement(result.added, state.snapshot, timeout)
    return drain_nodes(cluster, result.drain, result.moves, replacement=replacement, say=lambda line: None)


def test_the_replacement_is_created_and_initialized_before_any_drain() -> None:
    state, result = replaced()
    cluster = KarpenterCluster(state, polls_to_ready=2)
    report = apply(cluster, state, result)
    assert report.complete and report.removed == 2
    kinds = [c[0] for c in cluster.calls if c[0] != "read lease"]
    assert kinds[:3] == ["write lease", "create nodeclaim", "node registered"]  # the Lease before any write
    assert kinds.index("node registered") < kinds.index("cordon") < kinds.index("evict")
    (claim,) = cluster.claims.values()
    (new,) = result.added
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
    assert claim["metadata"]["annotations"]["kubeplace.io/planned-node"] == new.name
    assert claim["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    # its requests are the moving pods' (1 CPU each), its requirements the offering bought
    assert claim["spec"]["resources"]["requests"]["cpu"] == "2000m"
    assert {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small"]} in (
        claim["spec"]["requirements"])
    # the evictions go towards the registered node, which then may be disrupted again
    registered = f"kwok-{next(iter(cluster.claims))}"
    assert {o.move.target for o in report.evictions.outcomes} == {registered}
    assert cluster.calls[-2:] == [("annotate", registered, "karpenter.sh/do-not-disrupt"), ("write lease", "None")]
    doc = report.to_dict()
    assert doc["added"][0]["registeredAs"] == registered and doc["added"][0]["node"] == new.name


@pytest.mark.parametrize(("cluster_args", "words"), [
    ({"polls_to_ready": None}, "not ready after 0.1s: NodeClaim default-0 not launched"),
    ({"refuse_create": True}, "NodeClaim not created: HTTP 403"),
    ({"deleted_by_karpenter": True}, "Karpenter deleted NodeClaim default-0 without launching it"),
])  # fmt: skip
def test_a_replacement_not_initialized_drains_nothing_and_is_deleted(cluster_args: dict[str, Any],
                                                                      words: str) -> None:
    state, result = replaced()
    cluster = KarpenterCluster(state, **cluster_args)
    report = apply(cluster, state, result, timeout=0.1)
    assert not report.complete and report.removed == 0
    assert not [c for c in cluster.calls if c[0] in ("cordon", "evict", "delete node")]
    assert report.stopped.startswith(f"new node {result.added[0].name} did not come: ") and words in report.stopped
    assert report.stopped.endswith("nothing drained")
    assert not cluster.claims  # every claim it created is deleted again
    assert report.to_dict()["stopped"] == report.stopped


@pytest.mark.parametrize(("error", "stopped"), [
    (KeyboardInterrupt(), "interrupted while waiting for the new nodes; nothing drained"),
    (ApiFailure("list nodeclaims.karpenter.sh: HTTP 500"),
     "list nodeclaims.karpenter.sh: HTTP 500 while waiting for the new nodes; nothing drained"),
])  # fmt: skip
def test_an_interrupted_or_failed_wait_drains_nothing_and_deletes_the_claims(error: BaseException,
                                                                             stopped: str) -> None:
    state, result = replaced()
    cluster = KarpenterCluster(state, polls_to_ready=None)
    listed = cluster.list_objects

    def failing(group: str, version: str, plural: str) -> list[dict[str, Any]]:
        if plural == "nodeclaims":
            raise error
        return listed(group, version, plural)

    cluster.list_objects = failing  # type: ignore[method-assign]
    report = apply(cluster, state, result)
    assert report.stopped == stopped
    assert ("delete nodeclaim", "default-0") in cluster.calls
    assert not [c for c in cluster.calls if c[0] in ("cordon", "evict")]


def test_a_held_lease_creates_no_nodeclaim() -> None:
    """A second run stops at the Lease: not one NodeClaim is created (nor anything else written)."""
    state, result = replaced()
    cluster = KarpenterCluster(state, holder="kubeplace-rebalance-29012345-abcde")
    with pytest.raises(LeaseHeld, match=r"held by kubeplace-rebalance-29012345-abcde until .*; nothing was written"):
        apply(cluster, state, result)
    assert [c[0] for c in cluster.calls] == ["read lease"] and not cluster.claims


def test_the_lease_is_renewed_while_the_new_nodes_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch may outlast the Lease (--node-timeout 300 s, the Lease 300 s): it is renewed while waiting."""
    monkeypatch.setattr(apply_module, "LEASE_RENEW_SECONDS", 0)  # every poll is due
    state, result = replaced()
    cluster = KarpenterCluster(state, polls_to_ready=3)
    report = apply(cluster, state, result)
    assert report.complete
    kinds = [c[0] for c in cluster.calls if c[0] != "read lease"]
    waiting = kinds[kinds.index("create nodeclaim"):kinds.index("node registered")]
    assert waiting.count("write lease") >= 3


def test_a_lease_lost_while_the_new_nodes_launch_drains_nothing_and_deletes_the_claims(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apply_module, "LEASE_RENEW_SECONDS", 0)
    state, result = replaced()
    cluster = KarpenterCluster(state, polls_to_ready=None)
    taken = cluster.write_lease

    def lost(namespace: str, lease: dict[str, Any], create: bool) -> dict[str, Any]:
        if cluster.claims and lease["spec"].get("holderIdentity"):  # a renewal once the claim exists
            raise Conflict("409: the object has been modified")
        return taken(namespace, lease, create)

    cluster.write_lease = lost  # type: ignore[method-assign]
    report = apply(cluster, state, result)
    assert report.stopped.startswith("lost the lease kubeplace-system/kubeplace-rebalance: 409")
    assert report.stopped.endswith("while waiting for the new nodes; nothing drained")
    assert ("delete nodeclaim", "default-0") in cluster.calls and not cluster.claims
    assert not [c for c in cluster.calls if c[0] in ("cordon", "evict")]
