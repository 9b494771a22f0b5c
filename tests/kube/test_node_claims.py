"""The NodeClaim ``plan --provision --apply`` creates for a new node: Karpenter's own claim for
its NodePool, narrowed to the chosen instance type, zone and capacity type; and the state its
status conditions give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.capacity import NodeTemplate, candidate_node, candidate_nodes
from kubeplace.kube.catalogue import parse_catalogue
from kubeplace.kube.karpenter import parse_node_claim, parse_node_pool
from kubeplace.kube.node_claims import PoolIdentity, claim_state
from kubeplace.kube.objects import Pod, Taint
from tests.builders import pod

GI = 2**30

NODE_POOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
    "spec": {"template": {
        "metadata": {"labels": {"team": "ml"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "agent-not-ready", "effect": "NoSchedule"}],
            "expireAfter": "24h",
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                {"key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": ["c", "m"], "minValues": 1},
                {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["zone-c"]},
                {"key": "example.com/rack", "operator": "Exists"},
                {"key": "tier", "operator": "In", "values": ["gold"]}]}}}}

CATALOGUE = parse_catalogue([
    {"name": "c-4x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
     "resources": {"cpu": "4", "memory": "16Gi"},
     "offerings": [{"Price": price, "Available": True, "Requirements": [
         {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
         {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}
         for zone, capacity_type, price in (("zone-a", "on-demand", 0.2), ("zone-b", "spot", 0.08))]}],
    "instance_types.json")


def spot_candidate(daemons: tuple[Pod, ...] = ()) -> NodeTemplate:
    pool = parse_node_pool(NODE_POOL)
    (instance_type,) = CATALOGUE
    offering = next(o for o in instance_type.offerings if o.capacity_type == "spot")
    return candidate_node(pool, instance_type, offering, daemons)


def built(daemons: tuple[Pod, ...] = ()) -> dict[str, Any]:
    identity = PoolIdentity("uid-1", {"karpenter.sh/nodepool-hash": "123", "karpenter.sh/nodepool-hash-version": "v3",
                                      "other": "not copied"})
    return spot_candidate(daemons).to_nodeclaim("general-1", {"cpu": 2500, "memory": 3 * GI, "pods": 2}, identity)


def test_the_claim_is_the_node_pools_own_as_karpenter_builds_it() -> None:
    claim = built()
    metadata = claim["metadata"]
    assert (claim["apiVersion"], claim["kind"]) == ("karpenter.sh/v1", "NodeClaim")
    assert metadata["generateName"] == "general-"
    assert metadata["ownerReferences"] == [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "general",
                                            "uid": "uid-1", "blockOwnerDeletion": True}]
    assert metadata["labels"] == {"team": "ml", "karpenter.sh/nodepool": "general",
                                  "karpenter.kwok.sh/kwoknodeclass": "default"}
    assert metadata["annotations"] == {"karpenter.sh/nodepool-hash": "123", "karpenter.sh/nodepool-hash-version": "v3",
                                       "kubeplace.io/planned-node": "general-1", "karpenter.sh/do-not-disrupt": "true"}
    spec = claim["spec"]
    assert spec["nodeClassRef"] == {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
    assert spec["taints"] == [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    assert spec["startupTaints"] == [{"key": "agent-not-ready", "effect": "NoSchedule"}]
    assert spec["expireAfter"] == "24h"
    assert spec["resources"] == {"requests": {"cpu": "2500m", "memory": str(3 * GI), "pods": "2"}}


def test_requirements_are_narrowed_to_the_chosen_type_zone_and_capacity_type() -> None:
    requirements = {r["key"]: r for r in built()["spec"]["requirements"]}
    pinned = {key: r["values"] for key, r in requirements.items() if r["operator"] == "In" and len(r["values"]) == 1}
    assert pinned["node.kubernetes.io/instance-type"] == ["c-4x-amd64-linux"]
    assert pinned["topology.kubernetes.io/zone"] == ["zone-b"]
    assert pinned["karpenter.sh/capacity-type"] == ["spot"]
    assert pinned["karpenter.sh/nodepool"] == ["general"]
    assert pinned["karpenter.kwok.sh/instance-family"] == ["c"]
    assert pinned["kubernetes.io/arch"] == ["amd64"] and pinned["kubernetes.io/os"] == ["linux"]
    assert pinned["team"] == ["ml"] and pinned["tier"] == ["gold"]
    assert requirements["karpenter.kwok.sh/instance-family"]["minValues"] == 1
    assert all("minValues" not in r for r in requirements.values() if r["key"] != "karpenter.kwok.sh/instance-family")
    # a requirement on a label the node does not get from its type or offering stays as the NodePool has it
    assert requirements["example.com/rack"] == {"key": "example.com/rack", "operator": "Exists", "values": []}
    assert "kubernetes.io/hostname" not in requirements


def test_the_node_the_provider_registers_from_the_claim_has_the_candidates_labels() -> None:
    """kwok's ``addInstanceLabels``: the claim's labels, then its single-value In requirements;
    that is the node kubeplace planned (but the hostname, which the provider chooses)."""
    candidate = spot_candidate()
    claim = built()
    labels = dict(claim["metadata"]["labels"])
    labels.update({r["key"]: r["values"][0] for r in claim["spec"]["requirements"]
                   if r["operator"] == "In" and len(r["values"]) == 1})
    planned = {k: v for k, v in candidate.node.labels.items() if k != "kubernetes.io/hostname"}
    assert {k: labels[k] for k in planned} == planned


def test_the_claim_passes_karpenters_rules_and_reads_back() -> None:
    made = built()
    claim = parse_node_claim({**made, "metadata": {**made["metadata"], "name": "general-x7k2p"}}, "claim")
    assert claim.node_pool == "general"
    assert claim.taints == (Taint("dedicated", "ml", "NoSchedule"),)
    assert claim.startup_taints == (Taint("agent-not-ready", "", "NoSchedule"),)
    assert claim.requests == {"cpu": 2500, "memory": 3 * GI, "pods": 2}


def test_daemon_set_pods_add_to_the_requests() -> None:
    daemon = pod("agent").cpu("500m").memory("64Mi").tolerate("", operator="Exists").build()
    assert built((daemon,))["spec"]["resources"]["requests"] == {"cpu": "3000m", "memory": str(3 * GI + 64 * 2**20),
                                                                 "pods": "3"}


def conditions(**status: str) -> list[dict[str, str]]:
    return [{"type": kind, "status": value, "reason": f"{kind}Reason", "message": "detail"}
            for kind, value in status.items()]


def test_claim_state_says_what_it_waits_for() -> None:
    ready = claim_state({"status": {"nodeName": "kwok-general-x", "conditions": conditions(
        Launched="True", Registered="True", Initialized="True")}})
    assert (ready.node, ready.waiting) == ("kwok-general-x", "")
    launching = claim_state({"status": {"conditions": conditions(Launched="Unknown")}})
    assert (launching.node, launching.waiting) == ("", "not launched (LaunchedReason: detail)")
    starting = claim_state({"status": {"nodeName": "n", "conditions": conditions(
        Launched="True", Registered="True", Initialized="Unknown")}})
    assert starting.waiting == "not initialized (InitializedReason: detail)" and starting.registered
    assert claim_state({}).waiting == "not launched"


def test_apply_needs_provision_and_the_live_cluster(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(yaml.safe_dump_all([NODE_POOL]))
    catalogue = tmp_path / "catalogue.yaml"
    catalogue.write_text(yaml.safe_dump({"instanceTypes": [
        {"name": "a", "architecture": "amd64", "capacity": {"cpu": "1", "memory": "1Gi"},
         "offerings": [{"zone": "z", "capacityType": "on-demand", "pricePerHour": 0.1}]}]}))
    for args in (["plan", "--apply"], ["plan", str(snapshot), "--provision", "--catalogue", str(catalogue), "--apply"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        assert "--apply" in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert "Traceback" not in result.output


def test_bind_of_a_plan_with_new_nodes_says_it_needs_apply(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"kind": "PlacementPlan", "placements": [
        {"namespace": "default", "name": "web-0", "node": "general-1"}],
        "provision": [{"node": "general-1", "nodePool": "general"}]}))
    result = CliRunner().invoke(main, ["bind", "--plan", str(plan), "-y"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        f"error: {plan}: provision: the plan adds new nodes, which bind cannot create: bind it with "
        "`kubeplace plan --provision --apply`"]


def test_min_values_is_carried_with_the_alternatives_the_chosen_node_stays_the_cheapest() -> None:
    """A NodePool keeping two families: the claim of the cheap c node lists the m type beside it
    (the chosen first, as the kwok provider takes the first of equal price), with minValues on
    the family; every offering it admits is dearer, so the provider launches the planned node;
    the claim passes Karpenter's rules (minValues no more than the values)."""
    pool = parse_node_pool({**NODE_POOL, "spec": {"template": {"spec": {
        "nodeClassRef": NODE_POOL["spec"]["template"]["spec"]["nodeClassRef"],
        "requirements": [{"key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": ["c", "m"],
                          "minValues": 2}]}}}})
    types = parse_catalogue([
        {"name": name, "architecture": "amd64", "operatingSystems": ["linux"],
         "resources": {"cpu": "4", "memory": memory}, "offerings": [{"Price": price, "Requirements": [
             {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
             {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}]}
        for name, memory, price in (("c-4x-amd64-linux", "8Gi", 0.08), ("m-4x-amd64-linux", "16Gi", 0.1))],
        "instance_types.json")
    (cheap,) = candidate_nodes([pool], types)
    claim = cheap.to_nodeclaim("general-1", {"cpu": 1000}, PoolIdentity("uid-1", {}))
    requirements = {r["key"]: r for r in claim["spec"]["requirements"]}
    assert requirements["karpenter.kwok.sh/instance-family"] == {
        "key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": ["c", "m"], "minValues": 2}
    assert requirements["node.kubernetes.io/instance-type"]["values"] == ["c-4x-amd64-linux", "m-4x-amd64-linux"]
    assert requirements["topology.kubernetes.io/zone"]["values"] == ["zone-a"]
    read = parse_node_claim({**claim, "metadata": {**claim["metadata"], "name": "general-x"}}, "claim")
    assert len(read.requirements) == len(claim["spec"]["requirements"])
    launched = min((t for t in types if t.name in requirements["node.kubernetes.io/instance-type"]["values"]),
                   key=lambda t: min(o.price for o in t.offerings))
    assert launched.name == cheap.instance_type.name
