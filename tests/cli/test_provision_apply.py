"""``plan --provision --apply`` once the new nodes came (or did not): the plan's node names mapped
to the registered ones, a node Karpenter launched otherwise than planned named as such, and the
pods that no longer fit or whose node did not come reported pod by pod, never sent."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kubeplace.cli.provision_apply import compared, onto_registered, still_fitting
from kubeplace.kube.binder import Outcome
from kubeplace.kube.capacity import candidate_nodes
from kubeplace.kube.karpenter import parse_node_pool
from kubeplace.kube.node_claims import PoolIdentity
from kubeplace.models.config import Configuration, Profile
from kubeplace.plan import new_nodes
from kubeplace.plan.new_nodes import Arrival, create_claim, wait_for_nodes
from kubeplace.plan.plan import NewNode, Placement
from tests.builders import NodeBuilder, node, pod, snapshot_of
from tests.plan.test_provision import catalogue, instance_type, node_pool, offering

(C_2X_SPOT,) = candidate_nodes([parse_node_pool(node_pool("general"))],
                               catalogue(instance_type("c-2x", 2, 4, offering("zone-a", 0.08, "spot"))))
PLANNED = NewNode("general-1", C_2X_SPOT, ("default/web-0",))


def registered(instance_type: str = "c-2x", zone: str = "zone-a", capacity_type: str = "spot") -> NodeBuilder:
    return (node("kwok-general-abc").cpu("2").memory("4Gi")
            .label("node.kubernetes.io/instance-type", instance_type).label("topology.kubernetes.io/zone", zone)
            .label("karpenter.sh/capacity-type", capacity_type))


def test_a_node_launched_as_planned_has_no_note_and_another_type_is_named() -> None:
    arrival = Arrival(PLANNED, "general-x7k2p", "kwok-general-abc", "", 3.0)
    assert compared(arrival, snapshot_of(registered())).note == ""
    repicked = compared(arrival, snapshot_of(registered(instance_type="c-8x", capacity_type="on-demand")))
    assert repicked.node == "kwok-general-abc"
    assert repicked.note == "Karpenter launched c-8x, zone-a, on-demand instead of the planned c-2x, zone-a, spot"
    gone = compared(arrival, snapshot_of(node("other").cpu("2")))
    assert (gone.node, gone.note) == ("", "node kwok-general-abc of NodeClaim general-x7k2p is gone")


def test_placements_move_to_the_registered_nodes_and_pods_of_a_missing_one_are_reported() -> None:
    came = Arrival(PLANNED, "general-x7k2p", "kwok-general-abc", "", 3.0)
    missing = Arrival(NewNode("general-2", C_2X_SPOT, ("default/web-1",)),
                      "general-q9", "", "not ready after 30s: NodeClaim general-q9 not launched", 30.0)
    placements = (Placement("default", "web-0", "general-1", "u0"), Placement("default", "web-1", "general-2", "u1"),
                  Placement("default", "small", "old-node", "u2"))
    kept, results = onto_registered(placements, [came, missing])
    assert [(p.name, p.node) for p in kept] == [("web-0", "kwok-general-abc"), ("small", "old-node")]
    (result,) = results
    assert (result.binding.name, result.outcome) == ("web-1", Outcome.NODE_MISSING)
    assert result.message == "new node general-2 did not come: not ready after 30s: NodeClaim general-q9 not launched"


def test_a_pod_that_no_longer_fits_is_refused_alone() -> None:
    """The registered node is smaller than planned: one of the two pods planned there fits."""
    snapshot = snapshot_of(registered(), pod("web-0").cpu("1500m"), pod("web-1").cpu("1500m"))
    placements = [Placement("default", f"web-{i}", "kwok-general-abc", p.uid)
                  for i, p in enumerate(sorted(snapshot.pending, key=lambda p: p.name))]
    kept, refused = still_fitting(snapshot, placements, Configuration(), Profile())
    assert len(kept) == 1 and len(refused) == 1
    (result,) = refused
    assert result.outcome == Outcome.NOT_FITTING
    assert result.message.startswith("no longer fits: ") and result.message.endswith("[NodeResourcesFit]")


class Claims:
    """What the API server lists, one answer per poll (the last one repeated)."""

    def __init__(self, *answers: list[dict[str, Any]]) -> None:
        self.answers = list(answers)

    def list_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        assert (group, version, plural) == ("karpenter.sh", "v1", "nodeclaims")
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def claim(name: str, node: str = "", initialized: str = "Unknown", reason: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"nodeName": node, "conditions": [
        {"type": "Launched", "status": "True"}, {"type": "Registered", "status": "True" if node else "Unknown"},
        {"type": "Initialized", "status": initialized, "reason": reason}]}}


def test_waiting_ends_when_each_claim_is_initialized_gone_or_out_of_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(new_nodes, "POLL_SECONDS", 0.01)
    second = NewNode("general-2", C_2X_SPOT, ())
    third = NewNode("general-3", C_2X_SPOT, ())
    created = {"general-1": ("general-a", ""), "general-2": ("general-b", ""), "general-3": ("general-c", "")}
    lister = Claims([claim("general-a"), claim("general-b"), claim("general-c")],
                    [claim("general-a", "kwok-a", "True"), claim("general-c", "kwok-c", reason="NodeNotReady")])
    arrivals = wait_for_nodes(lister, [PLANNED, second, third], created, 0.2, time.monotonic(), print)
    assert [a.node for a in arrivals] == ["kwok-a", "", ""]
    assert arrivals[1].note.startswith("Karpenter deleted NodeClaim general-b without launching it")
    assert arrivals[2].note == "not ready after 0.2s: NodeClaim general-c not initialized (NodeNotReady)"


def test_the_claim_of_a_planned_node_carries_its_node_pools_min_values() -> None:
    """``--apply`` builds the claim of a planned node from the template the plan bought it as,
    alternatives included: the NodePool's minValues on the instance type is kept, with the
    planned (cheapest) type first."""
    from tests.plan.test_provision import INSTANCE_TYPE, TWO_TYPES, provisioned, web

    two = node_pool("two", requirements=[{"key": INSTANCE_TYPE, "operator": "In", "values": ["small", "large"],
                                          "minValues": 2}])
    planned = provisioned(two, web("w0"), types=TWO_TYPES)
    assert planned.plan.provision is not None
    (new,) = planned.plan.provision.nodes
    claim = new.template.to_nodeclaim(new.name, {"cpu": 1500}, PoolIdentity("uid", {}))
    (requirement,) = [r for r in claim["spec"]["requirements"] if r["key"] == INSTANCE_TYPE]
    assert requirement == {"key": INSTANCE_TYPE, "operator": "In", "values": ["small", "large"], "minValues": 2}


class Creates:
    """An API server that stores each object created (under a generated name)."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create_object(self, group: str, version: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append(body)
        return {**body, "metadata": {**body["metadata"], "name": "general-x7k2p"}}


def test_the_claim_created_is_the_one_of_the_template_the_new_node_carries() -> None:
    """``create_claim`` reads no snapshot or catalogue to find again what the plan bought: the
    claim is the new node's template's, with the requests of the pods planned on it."""
    cluster = Creates()
    web0 = snapshot_of(pod("web-0").cpu("1500m")).pending[0]
    pools = {"general": {"uid": "uid-1", "annotations": {"karpenter.sh/nodepool-hash": "7"}}}
    assert create_claim(cluster, PLANNED, pools, {web0.key: web0}, print) == ("general-x7k2p", "")  # type: ignore[arg-type]
    (made,) = cluster.created
    assert made == C_2X_SPOT.to_nodeclaim("general-1", web0.requests, PoolIdentity("uid-1", {
        "karpenter.sh/nodepool-hash": "7"}))
    assert made["spec"]["resources"]["requests"]["cpu"] == "1500m"
