"""``plan --provision``: the cheapest new nodes for the pods the existing nodes leave, every rule
kubeplace models applied to them as they would register, every plan verified."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.catalogue import PRICE_UNIT, InstanceType, parse_catalogue
from kubeplace.kube.errors import InconsistentAnswer
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.problem import Assignment
from kubeplace.plan.pipeline import Planned, make_plan, pods_per_node
from kubeplace.plan.provision import make_provision_plan, with_later
from tests.builders import Manifest, PodBuilder, node, pod, snapshot_of
from tests.volume_builders import claim, mounting, storage_class, volume

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def offering(zone: str, price: float, capacity_type: str = "on-demand") -> dict[str, Any]:
    return {"zone": zone, "capacityType": capacity_type, "pricePerHour": price}


def instance_type(name: str, cpu: int, memory_gi: int, *offerings: dict[str, Any], **extra: str) -> dict[str, Any]:
    return {"name": name, "architecture": "amd64", "operatingSystems": ["linux"],
            "capacity": {"cpu": str(cpu), "memory": f"{memory_gi}Gi", **extra}, "offerings": list(offerings)}


def catalogue(*types: dict[str, Any]) -> tuple[InstanceType, ...]:
    return tuple(parse_catalogue({"instanceTypes": list(types)}, "catalogue.yaml"))


def node_pool(name: str = "default", weight: int | None = None, limits: dict[str, Any] | None = None,
              taints: list[dict[str, str]] | None = None, requirements: list[dict[str, Any]] | None = None
              ) -> Manifest:
    spec: dict[str, Any] = {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
        "requirements": requirements or [], **({"taints": taints} if taints else {})}}}
    if weight is not None:
        spec["weight"] = weight
    if limits:
        spec["limits"] = limits
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def web(name: str, cpu: str = "1500m") -> PodBuilder:
    return pod(name).cpu(cpu).memory("1Gi").label("app", "web")


def provisioned(*objects: Any, types: tuple[InstanceType, ...], seconds: float = 5) -> Planned:
    snapshot = snapshot_of(*objects)
    planned = make_provision_plan(snapshot, types, Configuration(), Profile(),
                                  SolverSettings(time_limit=seconds, workers=1))
    assert not planned.violations, planned.violations
    assert planned.plan.summary.verified
    return planned


def nodes_of(planned: Planned) -> dict[str, str]:
    return {f"{p.namespace}/{p.name}": p.node for p in planned.plan.placements}


THREE_ZONES = catalogue(
    instance_type("small", 2, 8, offering("a", 0.1), offering("b", 0.1), offering("c", 0.12)),
    instance_type("large", 8, 32, offering("a", 0.35), offering("b", 0.35), offering("c", 0.2, "spot")))


def test_the_cheapest_nodes_are_bought_with_the_optimum_proved_on_a_small_case() -> None:
    """12 web pods spread over three zones (4 a zone, one large node each at best) and 5 batch
    pods of 3 CPUs: the cheapest answer packs the batch pods beside the web pods of zone c on
    spot nodes (0.35 + 0.35 + 3 x 0.2 = 1.30 per hour); Karpenter's way pays 1.60."""
    spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "web"}}}
    pods = [web(f"web-{i}").spec("topologySpreadConstraints", [spread]) for i in range(12)]
    pods += [pod(f"batch-{i}").cpu("3").memory("1Gi") for i in range(5)]
    planned = provisioned(node_pool(), *pods, types=THREE_ZONES)
    provision = planned.plan.provision
    assert provision is not None and planned.plan.summary.pods_placed == 17
    assert provision.cost == int(1.3 * PRICE_UNIT)
    assert provision.bound == provision.cost and provision.status == "optimal"
    assert provision.greedy_cost == int(1.6 * PRICE_UNIT)
    assert planned.plan.summary.status == "optimal"  # time was left for the profile's objective (3)
    zone_of = {n.name: n.template.offering.zone for n in provision.nodes}
    per_zone = Counter(zone_of[node] for key, node in nodes_of(planned).items() if key.startswith("default/web"))
    assert per_zone == {"a": 4, "b": 4, "c": 4}


def test_each_new_node_carries_the_template_it_was_bought_as() -> None:
    """A plan's new node is its template named ``<nodePool>-<n>``: the node the verifier checked the
    plan against is the template's, and its price in the plan is the template's."""
    spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "web"}}}
    planned = provisioned(node_pool(), *(web(f"web-{i}").spec("topologySpreadConstraints", [spread])
                                         for i in range(3)), types=THREE_ZONES)
    provision = planned.plan.provision
    assert provision is not None and len(provision.nodes) == 3
    assert provision.registered == tuple(n.template.to_node(n.name) for n in provision.nodes)
    assert [n.name for n in provision.nodes] == ["default-1", "default-2", "default-3"]
    assert provision.cost == sum(n.template.price for n in provision.nodes)
    listed = provision.to_dict()["provision"]
    assert [d["pricePerHour"] for d in listed] == [n.template.offering.price / PRICE_UNIT for n in provision.nodes]


def test_spread_counts_the_existing_nodes_pods_and_new_zones() -> None:
    """Zone a already runs 3 web pods on a full node: the 3 pending ones go to new nodes in b
    and c, never a, though a is as cheap."""
    spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "web"}}}
    full = node("old-a").cpu("4500m").memory("8Gi").label(ZONE, "a")
    running = [web(f"run-{i}").spec("topologySpreadConstraints", [spread]).on("old-a") for i in range(3)]
    pending = [web(f"web-{i}").spec("topologySpreadConstraints", [spread]) for i in range(3)]
    planned = provisioned(node_pool(), full, *running, *pending, types=THREE_ZONES)
    provision = planned.plan.provision
    assert provision is not None and planned.plan.summary.pods_placed == 3
    zones = Counter(n.template.offering.zone for n in provision.nodes for _ in n.pods)
    assert zones["a"] == 0 and zones["b"] >= 1 and zones["c"] >= 1


def test_hostname_anti_affinity_puts_one_pod_on_each_new_node() -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "web"}}}]}}
    pods = [web(f"web-{i}", "500m").spec("affinity", anti) for i in range(4)]
    planned = provisioned(node_pool(), *pods, types=THREE_ZONES)
    provision = planned.plan.provision
    assert provision is not None and planned.plan.summary.pods_placed == 4
    assert len(provision.nodes) == 4 and all(len(n.pods) == 1 for n in provision.nodes)
    assert {n.template.instance_type.name for n in provision.nodes} == {"small"}


def test_a_gang_with_a_zone_topology_key_runs_in_one_zone() -> None:
    gang = [pod(f"w-{i}").cpu("3").memory("1Gi").label("kubeplace.io/gang", "train")
            .label("kubeplace.io/gang-min-member", "6").annotation("kubeplace.io/gang-topology-key", ZONE)
            .annotation("kubeplace.io/gang-min-member", "6") for i in range(6)]
    planned = provisioned(node_pool(), *gang, types=THREE_ZONES)
    provision = planned.plan.provision
    assert provision is not None and planned.plan.summary.pods_placed == 6
    assert {n.template.offering.zone for n in provision.nodes} == {"c"}  # the spot nodes of c are the cheapest


def test_node_pool_limits_cap_the_new_nodes_and_the_rest_says_why() -> None:
    """A limit of 16 CPUs is two large nodes: 5 pods of 3 CPUs fit (2 a node), the sixth not."""
    pods = [pod(f"batch-{i}").cpu("3").memory("1Gi") for i in range(6)]
    types = catalogue(instance_type("large", 8, 32, offering("a", 0.35)))
    planned = provisioned(node_pool(limits={"cpu": "16"}), *pods, types=types)
    provision = planned.plan.provision
    assert provision is not None and len(provision.nodes) == 2
    assert planned.plan.summary.pods_placed == 4 and len(planned.plan.unplaced) == 2
    assert sum(int(n.template.instance_type.name == "large") * 8 for n in provision.nodes) <= 16


def test_taints_of_the_template_apply_to_the_new_nodes() -> None:
    """The gpu NodePool's nodes carry its taint: only the pod that tolerates it goes there; the
    other, which no other NodePool can host, is not placed, with the reason."""
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    types = catalogue(instance_type("gpu", 8, 32, offering("a", 2.0), **{"nvidia.com/gpu": "1"}))
    tolerant = pod("trainer").cpu("1").memory("1Gi").gpu(1).tolerate("dedicated", "gpu", "NoSchedule")
    intolerant = pod("stray").cpu("1").memory("1Gi").gpu(1)
    planned = provisioned(node_pool("gpu", taints=[taint]), tolerant, intolerant, types=types)
    provision = planned.plan.provision
    assert provision is not None and [n.pods for n in provision.nodes] == [("default/trainer",)]
    (stray,) = planned.plan.unplaced
    assert any("no new node can host it" in r and "untolerated taint" in r for r in stray.reasons), stray.reasons


def test_the_higher_weight_node_pool_is_used_first_though_dearer() -> None:
    types = catalogue(instance_type("small", 2, 8, offering("a", 0.1), offering("b", 0.3, "spot")))
    spot = node_pool("spot", weight=50, requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}])
    on_demand = node_pool("on-demand", requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
    planned = provisioned(spot, on_demand, pod("p").cpu("1").memory("1Gi"), types=types)
    provision = planned.plan.provision
    assert provision is not None
    assert [(n.template.node_pool.name, n.name) for n in provision.nodes] == [("spot", "spot-1")]


def test_pods_fitting_the_existing_nodes_buy_nothing() -> None:
    planned = provisioned(node_pool(), node("n1").cpu("4").memory("8Gi"), pod("p").cpu("1").memory("1Gi"),
                          types=THREE_ZONES)
    provision = planned.plan.provision
    assert provision is not None and provision.nodes == () and provision.cost == 0 == provision.bound
    assert nodes_of(planned) == {"default/p": "n1"}


def test_existing_nodes_take_what_they_can_first() -> None:
    """The existing node has room for 2 of the 5 pods; new nodes are bought for the 3 others
    only (0.20/h: two small nodes, or one large spot node), not for 5 (0.30/h). With the nodes
    bought, the final plan may balance the pods over old and new nodes (the profile's objective)."""
    pods = [pod(f"p{i}").cpu("1").memory("1Gi") for i in range(5)]
    planned = provisioned(node_pool(), node("n1").cpu("2").memory("8Gi"), *pods, types=THREE_ZONES)
    provision = planned.plan.provision
    assert provision is not None and planned.plan.summary.pods_placed == 5
    assert provision.cost == int(0.2 * PRICE_UNIT) == provision.bound


def write(path: Path, *documents: Any) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def test_the_command_reads_node_pools_without_nodes_and_prints_the_interface(tmp_path: Path) -> None:
    snapshot = write(tmp_path / "cluster.yaml", node_pool(), *(pod(f"p{i}").cpu("1").memory("1Gi").manifest()
                                                               for i in range(3)))
    types = write(tmp_path / "types.yaml", {"instanceTypes": [instance_type("small", 2, 8, offering("a", 0.1))]})
    result = CliRunner().invoke(main, ["plan", str(snapshot), "--provision", "--catalogue", str(types),
                                       "-o", "json", "--time-limit", "3"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["provisionCostPerHour"] == 0.2 and doc["provisionBound"] == 0.2 and doc["provisionGap"] == 0.0
    assert doc["provisionGreedyCostPerHour"] == 0.2
    assert [(n["node"], n["nodePool"], n["instanceType"], n["zone"], n["capacityType"], n["pricePerHour"])
            for n in doc["provision"]] == [("default-1", "default", "small", "a", "on-demand", 0.1),
                                           ("default-2", "default", "small", "a", "on-demand", 0.1)]
    assert sorted(p for n in doc["provision"] for p in n["pods"]) == ["default/p0", "default/p1", "default/p2"]
    assert {p["node"] for p in doc["placements"]} == {"default-1", "default-2"}
    table = CliRunner().invoke(main, ["plan", str(snapshot), "--provision", "--catalogue", str(types),
                                      "--time-limit", "3", "--report", str(tmp_path / "plan.html")])
    assert "NEW NODE" in table.stdout and "Provision: 2 new node(s), 0.2000/h" in table.stdout
    html = (tmp_path / "plan.html").read_text()
    assert "new node default-1: NodePool default, small in a (on-demand), 0.1000/h" in html
    assert "Provision: 2 new node(s)" in html


def test_provision_without_a_catalogue_is_one_line_exit_2(tmp_path: Path) -> None:
    snapshot = write(tmp_path / "cluster.yaml", node_pool(), pod("p").cpu("1").manifest())
    result = CliRunner().invoke(main, ["plan", str(snapshot), "--provision"])
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "--catalogue" in result.stderr, result.stderr
    types = write(tmp_path / "types.yaml", {"instanceTypes": [instance_type("small", 2, 8, offering("a", 0.1))]})
    alone = CliRunner().invoke(main, ["plan", str(snapshot), "--catalogue", str(types)])
    assert alone.exit_code == 2 and "--provision" in alone.stderr
    no_pools = write(tmp_path / "bare.yaml", pod("p").cpu("1").manifest())
    bare = CliRunner().invoke(main, ["plan", str(no_pools), "--provision", "--catalogue", str(types)])
    assert bare.exit_code == 2 and bare.stderr.strip().count("\n") == 0, bare.stderr


def test_gpu_pods_get_devices_on_the_cheapest_gpu_nodes() -> None:
    """Three pods of 4 GPUs: one 8-GPU node and one 4-GPU node (5.5/h) beat three 4-GPU nodes
    (6.0/h) and two 8-GPU ones (7.0/h); each pod gets its own devices."""
    types = catalogue(instance_type("g4", 32, 128, offering("a", 2.0), **{"nvidia.com/gpu": "4"}),
                      instance_type("g8", 64, 256, offering("a", 3.5), **{"nvidia.com/gpu": "8"}))
    pods = [pod(f"train-{i}").cpu("4").memory("16Gi").gpu(4) for i in range(3)]
    planned = provisioned(node_pool(), *pods, types=types)
    provision = planned.plan.provision
    assert provision is not None and planned.plan.summary.pods_placed == 3
    assert sorted(n.template.instance_type.name for n in provision.nodes) == ["g4", "g8"]
    assert provision.cost == int(5.5 * PRICE_UNIT) == provision.bound
    per_node: dict[str, set[int]] = {}
    for p in planned.plan.placements:
        assert len(p.gpus) == 4 and not per_node.setdefault(p.node, set()) & set(p.gpus)
        per_node[p.node] |= set(p.gpus)


def test_limits_count_what_the_node_pool_already_holds() -> None:
    """A limit of 2 nodes, one already there (labelled with the NodePool, no room left): one new
    node only, the pods it cannot take are left with the reason."""
    full = node("default-old").cpu("1").memory("1Gi").label("karpenter.sh/nodepool", "default")
    pods = [pod(f"batch-{i}").cpu("3").memory("1Gi") for i in range(4)]
    types = catalogue(instance_type("large", 8, 32, offering("a", 0.35)))
    planned = provisioned(node_pool(limits={"nodes": "2"}), full, *pods, types=types)
    provision = planned.plan.provision
    assert provision is not None and [n.name for n in provision.nodes] == ["default-1"]
    assert planned.plan.summary.pods_placed == 2 and len(planned.plan.unplaced) == 2
    assert all("no new node can host it: the NodePools whose nodes could (default) are at their spec.limits"
               in u.reasons for u in planned.plan.unplaced), planned.plan.unplaced


def test_no_node_and_no_offer_that_fits_leaves_the_pod_with_the_reason() -> None:
    planned = provisioned(node_pool(), pod("huge").cpu("100").memory("1Gi"), types=THREE_ZONES)
    provision = planned.plan.provision
    assert provision is not None and provision.nodes == () and planned.plan.summary.pods_placed == 0
    (huge,) = planned.plan.unplaced
    expected = "no new node can host it: 0/6 nodes are available: 6 Insufficient cpu"
    assert any(r.startswith(expected) for r in huge.reasons), huge.reasons


def test_a_node_pool_at_its_limits_hands_over_to_the_next_by_weight() -> None:
    """The spot NodePool (weight 50) may have one node: the first pod goes there, the two others
    to the on-demand NodePool, dearer but the next in Karpenter's order."""
    types = catalogue(instance_type("small", 2, 8, offering("a", 0.3), offering("a", 0.1, "spot")))
    spot = node_pool("spot", weight=50, limits={"nodes": "1"}, requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}])
    on_demand = node_pool("on-demand", requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
    pods = [pod(f"p{i}").cpu("1500m").memory("1Gi") for i in range(3)]
    planned = provisioned(spot, on_demand, *pods, types=types)
    provision = planned.plan.provision
    assert provision is not None and planned.plan.summary.pods_placed == 3
    assert sorted(n.name for n in provision.nodes) == ["on-demand-1", "on-demand-2", "spot-1"]
    assert provision.cost == int(0.7 * PRICE_UNIT)


def test_a_bound_volume_pins_the_new_node_to_its_zone() -> None:
    """The pod's claim is bound to a volume in zone b (a CSI one any node of b can mount): its new
    node is bought in b, though c's spot nodes are cheaper."""
    pv = volume("pv-b", zone="b", storage_class="standard", claim_ref=("default", "data"),
                csi=("ebs.csi.aws.com", "vol-1"))
    pvc = claim("data", volume="pv-b", storage_class="standard")
    worker = mounting(pod("db").cpu("6").memory("8Gi"), "data")
    planned = provisioned(node_pool(), storage_class("standard", provisioner="ebs.csi.aws.com"), pv, pvc, worker,
                          types=THREE_ZONES)
    provision = planned.plan.provision
    assert provision is not None
    assert [(n.template.offering.zone, n.pods) for n in provision.nodes] == [("b", ("default/db",))]


def test_a_limit_below_what_the_node_pool_holds_is_one_line_exit_2(tmp_path: Path) -> None:
    held = node("default-old").cpu("4").memory("8Gi").label("karpenter.sh/nodepool", "default").manifest()
    snapshot = write(tmp_path / "cluster.yaml", node_pool(limits={"cpu": "1"}), held, pod("p").cpu("1").manifest())
    types = write(tmp_path / "types.yaml", {"instanceTypes": [instance_type("small", 2, 8, offering("a", 0.1))]})
    result = CliRunner().invoke(main, ["plan", str(snapshot), "--provision", "--catalogue", str(types)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().count("\n") == 0
    assert "NodePool default" in result.stderr and "spec.limits.cpu" in result.stderr, result.stderr


def test_no_offering_a_node_pool_admits_is_the_reason() -> None:
    arm = node_pool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}])
    planned = provisioned(arm, pod("p").cpu("1").memory("1Gi"), types=THREE_ZONES)
    (p,) = planned.plan.unplaced
    assert planned.plan.provision is not None and planned.plan.provision.nodes == ()
    assert any("no offering of the catalogue is available and admitted by a NodePool's requirements" in r
               for r in p.reasons), p.reasons


def test_a_pod_provisioned_for_again_is_seeded_on_its_new_node_only() -> None:
    """A repair round provisions again for the pods the plan left out: their earlier intended
    nodes are dropped, so that the seed of the next plan holds each pod once."""
    earlier = (("ns/a", "default-1"), ("ns/b", "default-1"), ("ns/c", "default-2"))
    later = (("ns/b", "default-3"),)
    assert with_later(earlier, later) == (("ns/a", "default-1"), ("ns/c", "default-2"), ("ns/b", "default-3"))


def test_a_seed_naming_a_pod_twice_places_it_once() -> None:
    """The plan on the grown cluster takes the provisioning's placement as a seed: a pod listed
    twice in it counts once (the seed held more pods of the class than it has, and won)."""
    snapshot = snapshot_of(node("n1").cpu("4").memory("8Gi"), *[pod(f"p{i}").cpu("1") for i in range(2)])
    intended = (("default/p0", "n1"), ("default/p0", "n1"), ("default/p1", "n1"))
    planned = make_plan(snapshot, Configuration(), Profile(), SolverSettings(time_limit=1, workers=1),
                        intended=intended)
    assert sorted(p.name for p in planned.plan.placements) == ["p0", "p1"]
    assert planned.plan.summary.verified


def test_an_answer_placing_more_pods_of_a_class_than_it_has_is_a_clear_error() -> None:
    snapshot = snapshot_of(node("n1").cpu("4").memory("8Gi"), *[pod(f"p{i}").cpu("1") for i in range(2)])
    planned = make_plan(snapshot, Configuration(), Profile(), SolverSettings(time_limit=1, workers=1))
    three = Assignment(np.array([0]), np.array([0]), np.array([3]))
    with pytest.raises(InconsistentAnswer, match="places 3 pods of the class of default/p0, which has 2"):
        pods_per_node(planned.aggregation, three, snapshot.pending)


INSTANCE_TYPE = "node.kubernetes.io/instance-type"
TWO_TYPES = catalogue(instance_type("small", 2, 8, offering("a", 0.1)),
                      instance_type("large", 8, 32, offering("a", 0.4)))


def static(name: str, replicas: int = 2) -> Manifest:
    pool = node_pool(name)
    pool["spec"]["replicas"] = replicas
    return pool


def test_a_static_node_pool_is_never_offered() -> None:
    """Karpenter's provisioner leaves static NodePools out: the pods go to the dynamic one, dearer
    as it is, and with only a static NodePool they stay pending, saying why."""
    dynamic = node_pool("dynamic", requirements=[{"key": INSTANCE_TYPE, "operator": "In", "values": ["large"]}])
    planned = provisioned(static("fixed"), dynamic, *(web(f"w{i}") for i in range(3)), types=TWO_TYPES)
    provision = planned.plan.provision
    assert provision is not None and planned.plan.summary.pods_placed == 3
    assert {(n.template.node_pool.name, n.template.instance_type.name) for n in provision.nodes} == {
        ("dynamic", "large")}
    alone = provisioned(static("fixed"), web("w0"), types=TWO_TYPES)
    assert alone.plan.provision is not None and alone.plan.provision.nodes == ()
    (w0,) = alone.plan.unplaced
    assert ("NodePool fixed is not used: it is static (spec.replicas), and Karpenter's provisioner launches no node "
            "for it") in w0.reasons, w0.reasons


def test_min_values_the_catalogue_cannot_meet_leaves_the_node_pool_unused_with_karpenters_words() -> None:
    three = node_pool("three", requirements=[{"key": INSTANCE_TYPE, "operator": "In",
                                              "values": ["small", "large", "huge"], "minValues": 3}])
    planned = provisioned(three, web("w0"), types=TWO_TYPES)
    assert planned.plan.provision is not None and planned.plan.provision.nodes == ()
    (w0,) = planned.plan.unplaced
    assert ("NodePool three is not used: NodePool requirements filtered out all compatible available instance types "
            f"due to minValues incompatibility (minValues requirement is not met for label(s) ['{INSTANCE_TYPE}'])"
            in w0.reasons), w0.reasons


def test_min_values_met_buys_the_cheapest_type_with_room_for_its_alternative() -> None:
    """Two instance types kept: the small nodes (the large one their alternative) are bought, each
    packed as the small type holds; a pod that asks for the small type alone, or one only the large
    type holds, has fewer than two types compatible and stays pending with Karpenter's words."""
    two = node_pool("two", requirements=[{"key": INSTANCE_TYPE, "operator": "In", "values": ["small", "large"],
                                          "minValues": 2}])
    planned = provisioned(two, *(web(f"w{i}") for i in range(3)), types=TWO_TYPES)
    provision = planned.plan.provision
    assert provision is not None and [n.template.instance_type.name for n in provision.nodes] == ["small"] * 3
    assert planned.plan.summary.pods_placed == 3 and provision.cost == provision.bound == int(0.3 * PRICE_UNIT)
    only_small = web("only-small").selector(INSTANCE_TYPE, "small")
    refused = provisioned(two, only_small, web("big", "5"), types=TWO_TYPES)
    assert refused.plan.provision is not None and refused.plan.provision.nodes == ()
    words = ("no new node can host it: pod didn’t schedule because NodePool couldn’t meet minValues requirements, "
             f"minValues requirement is not met for label(s) ['{INSTANCE_TYPE}'] (NodePool two)")
    unplaced = {u.name: u.reasons for u in refused.plan.unplaced}
    assert set(unplaced) == {"only-small", "big"}
    assert words in unplaced["only-small"] and words in unplaced["big"], unplaced
