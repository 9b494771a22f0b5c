"""Karpenter's NodePools and NodeClaims, the instance-type catalogue (the kwok provider's JSON and
the YAML form of docs/capacity.md), a new node's allocatable and the candidate nodes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.capacity import admitted_offerings, candidate_node, candidate_nodes, unused_pools
from kubeplace.kube.catalogue import (
    CPU_LABEL,
    FAMILY_LABEL,
    KWOK_OVERHEAD,
    PRICE_UNIT,
    SIZE_LABEL,
    InstanceType,
    Offering,
    parse_catalogue,
)
from kubeplace.kube.errors import InputError
from kubeplace.kube.files import load_catalogue, load_snapshot
from kubeplace.kube.karpenter import check_limits, parse_node_pool
from kubeplace.kube.node_selector import Requirement
from kubeplace.kube.objects import NodePoolBudget, Taint
from tests.builders import node, pod

GI, MI = 2**30, 2**20


def kwok_offering(zone: str, capacity_type: str, price: Any = 0.5) -> dict[str, Any]:
    return {"Price": price, "Available": True, "Requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}


def kwok_type(name: str, cpu: str, memory: str, *offerings: dict[str, Any], **resources: str) -> dict[str, Any]:
    return {"name": name, "offerings": list(offerings) or [kwok_offering("test-zone-a", "on-demand")],
            "architecture": "amd64", "operatingSystems": ["linux"],
            "resources": {"cpu": cpu, "memory": memory, **resources}}


def node_pool(name: str = "default", *requirements: dict[str, Any], **spec: Any) -> dict[str, Any]:
    template_spec = {"requirements": list(requirements),
                     "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}
    template_spec.update(spec.pop("template_spec", {}))
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": spec.pop("labels", {})}, "spec": template_spec}, **spec}}


def req(key: str, operator: str, *values: str, **extra: Any) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values), **extra}


def write_yaml(path: Path, *documents: Any) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


# --- NodePools --------------------------------------------------------------------------------------


def test_a_node_pool_is_read_with_its_template_limits_weight_and_budgets(tmp_path: Path) -> None:
    raw = node_pool("spot", req("karpenter.sh/capacity-type", "In", "spot"),
                    req("failure-domain.beta.kubernetes.io/zone", "NotIn", "z9"),
                    req("karpenter.kwok.sh/instance-cpu", "Gte", "4", minValues=1),
                    labels={"team": "web"}, weight=50, limits={"cpu": 1000, "memory": "1000Gi"},
                    template_spec={"taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                                   "startupTaints": [{"key": "cni/not-ready", "effect": "NoExecute"}]},
                    disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s",
                                "budgets": [{"nodes": "20%", "reasons": ["Empty"]},
                                            {"nodes": "0", "schedule": "@daily", "duration": "10m"}]})
    snapshot = load_snapshot([write_yaml(tmp_path / "np.yaml", raw)])
    (pool,) = snapshot.node_pools
    assert pool.name == "spot" and pool.labels == {"team": "web"} and pool.weight == 50
    assert pool.requirements == (Requirement("karpenter.sh/capacity-type", "In", ("spot",)),
                                 Requirement("topology.kubernetes.io/zone", "NotIn", ("z9",)),  # normalised
                                 Requirement("karpenter.kwok.sh/instance-cpu", "Gte", ("4",)))
    assert pool.min_values == {"karpenter.kwok.sh/instance-cpu": 1}
    assert pool.limits == {"cpu": 1_000_000, "memory": 1000 * GI}  # millicores, bytes
    assert pool.taints == (Taint("dedicated", "web", "NoSchedule"),)
    assert pool.startup_taints == (Taint("cni/not-ready", "", "NoExecute"),)
    assert pool.consolidation_policy == "WhenEmpty" and pool.consolidate_after == "30s"
    assert pool.budgets == (NodePoolBudget("20%", ("Empty",)), NodePoolBudget("0", (), "@daily", "10m"))
    assert pool.budgets[0].allowed(11) == 3  # 20% of 11 rounds up
    assert "NodePool.karpenter.sh" not in snapshot.skipped_kinds


def test_a_node_pool_gets_the_crds_defaults() -> None:
    pool = parse_node_pool(node_pool("p", req("kubernetes.io/arch", "In", "amd64")))
    assert pool.weight == 0 and pool.budgets == (NodePoolBudget("10%"),)
    assert pool.consolidation_policy == "WhenEmptyOrUnderutilized" and pool.consolidate_after == "0s"


BAD_POOLS = [
    (node_pool("p", req("kubernetes.io/arch", "Near", "amd64")), "spec.template.spec.requirements[0].operator",
     'Unsupported value: "Near"'),
    (node_pool("p", req("kubernetes.io/arch", "In")), "spec.template.spec.requirements[0].values",
     "requirements with operator 'In' must have a value defined"),
    (node_pool("p", req("karpenter.kwok.sh/instance-cpu", "Gt", "x")), "spec.template.spec.requirements[0].values",
     "must have a single positive integer value"),
    (node_pool("p", req("karpenter.kwok.sh/instance-cpu", "Lt", "1", "2")),
     "spec.template.spec.requirements[0].values", "must have a single positive integer value"),
    (node_pool("p", req("karpenter.sh/nodepool", "In", "x")), "spec.template.spec.requirements[0].key",
     'label "karpenter.sh/nodepool" is restricted'),
    (node_pool("p", req("karpenter.sh/foo", "Exists")), "spec.template.spec.requirements[0].key",
     'label domain "karpenter.sh" is restricted'),
    (node_pool("p", req("kubernetes.io/hostname", "In", "n1")), "spec.template.spec.requirements[0].key",
     'label "kubernetes.io/hostname" is restricted'),
    (node_pool("p", req("karpenter.sh/capacity-type", "In", "cheap")), "spec.template.spec.requirements[0].values",
     "no valid values found in ['cheap']"),
    (node_pool("p", req("kubernetes.io/arch", "In", "amd64", minValues=2)),
     "spec.template.spec.requirements[0].minValues", "at least that many values"),
    (node_pool("p", req("kubernetes.io/arch", "In", "amd 64")), "spec.template.spec.requirements[0].values[0]",
     "Invalid value"),
    (node_pool("p", weight=0), "spec.weight", "0 is out of range"),
    (node_pool("p", weight=101), "spec.weight", "101 is out of range"),
    (node_pool("p", limits={"cpu": "lots"}), "spec.limits.cpu", ""),
    (node_pool("p", labels={"karpenter.sh/nodepool": "x"}), "spec.template.metadata.labels.karpenter.sh/nodepool",
     "restricted"),
    (node_pool("p", template_spec={"taints": [{"key": "a", "effect": "Sometimes"}]}),
     "spec.template.spec.taints[0].effect", "Unsupported value"),
    (node_pool("p", template_spec={"taints": [{"key": "a", "effect": "NoSchedule"}],
                                   "startupTaints": [{"key": "a", "effect": "NoSchedule"}]}),
     "spec.template.spec.startupTaints[0]", "duplicate taint Key/Effect pair a=NoSchedule"),
    (node_pool("p", disruption={"consolidationPolicy": "Always", "consolidateAfter": "0s"}),
     "spec.disruption.consolidationPolicy", "Unsupported value"),
    (node_pool("p", disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "150%"}]}),
     "spec.disruption.budgets[0].nodes", "should match"),
    (node_pool("p", disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "1", "schedule": "@daily"}]}),
     "spec.disruption.budgets[0]", "'schedule' must be set with 'duration'"),
    # consolidateAfter is required once disruption is given (the CRD defaults only a missing disruption)
    (node_pool("p", disruption={"consolidationPolicy": "WhenEmpty"}), "spec.disruption.consolidateAfter",
     "Required value"),
    (node_pool("p", disruption={"consolidateAfter": "30"}), "spec.disruption.consolidateAfter", "should match"),
    (node_pool("p", disruption={"consolidateAfter": "never"}), "spec.disruption.consolidateAfter", "should match"),
    (node_pool("p", disruption={"consolidateAfter": "9999999999h"}), "spec.disruption.consolidateAfter",
     "longer than Go's time.Duration"),
    (node_pool("p", template_spec={"expireAfter": "99999999999999s"}), "spec.template.spec.expireAfter",
     "longer than Go's time.Duration"),
    (node_pool("p", disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "3000000000"}]}),
     "spec.disruption.budgets[0].nodes", "int32"),
    (node_pool("p", disruption={"consolidateAfter": "0s", "budgets": [{"schedule": "0 0 * * 7", "duration": "1h"}]}),
     "spec.disruption.budgets[0].schedule", "day of week '7' is out of range 0-6"),
    (node_pool("p", disruption={"consolidateAfter": "0s", "budgets": [{"schedule": "0 0 L * *", "duration": "1h"}]}),
     "spec.disruption.budgets[0].schedule", "invalid day of month 'L'"),
    (node_pool("p", disruption={"consolidateAfter": "0s",
                                "budgets": [{"schedule": "0 0 * * * 2030", "duration": "1h"}]}),
     "spec.disruption.budgets[0].schedule", "expected exactly 5 fields"),
    (node_pool("p", disruption={"consolidateAfter": "0s", "budgets": [{"schedule": "@every", "duration": "1h"}]}),
     "spec.disruption.budgets[0].schedule", "should match"),
    (node_pool("p", disruption={"consolidateAfter": "0s", "budgets": [{"schedule": "0 0 31 2 *", "duration": "1h"}]}),
     "spec.disruption.budgets[0].schedule", "never matches a date"),
    (node_pool("p", disruption={"consolidateAfter": "0s", "budgets": [{"schedule": "5-1 * * * *", "duration": "1h"}]}),
     "spec.disruption.budgets[0].schedule", "beyond end of range"),
    (node_pool("p", disruption={"consolidateAfter": "0s", "budgets": [{"schedule": "@daily", "duration": "30s"}]}),
     "spec.disruption.budgets[0].duration", "should match"),
    (node_pool("p", disruption={"consolidateAfter": "0s",
                                "budgets": [{"schedule": "@daily", "duration": "99999999999h"}]}),
     "spec.disruption.budgets[0].duration", "longer than Go's time.Duration"),
    (node_pool("p", template_spec={"nodeClassRef": None}), "spec.template.spec.nodeClassRef", "Required value"),
]


@pytest.mark.parametrize(("raw", "field", "words"), BAD_POOLS, ids=[case[1] + ":" + case[2][:20] for case in BAD_POOLS])
def test_an_invalid_node_pool_is_one_line_naming_file_object_and_field(tmp_path: Path, raw: dict[str, Any],
                                                                       field: str, words: str) -> None:
    file = write_yaml(tmp_path / "np.yaml", raw)
    with pytest.raises(InputError) as caught:
        load_snapshot([file])
    message = str(caught.value)
    assert message.startswith(f"{file}: NodePool p: {field}: ") and words in message and "\n" not in message


def test_a_node_pool_limit_below_what_its_nodes_hold_is_refused_for_adding_nodes_only(tmp_path: Path) -> None:
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
             "metadata": {"name": "c1", "labels": {"karpenter.sh/nodepool": "p"}},
             "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                      "requirements": [req("karpenter.sh/nodepool", "In", "p")]},
             "status": {"capacity": {"cpu": "8", "memory": "32Gi"}, "nodeName": "n1"}}
    other = node("n2").cpu("4").label("karpenter.sh/nodepool", "p").manifest()  # launched, its claim not dumped
    file = write_yaml(tmp_path / "c.yaml", node_pool("p", limits={"cpu": "10"}), claim, other,
                      node("n1").cpu("8").label("karpenter.sh/nodepool", "p").manifest(), pod("a").cpu("1").manifest())
    result = CliRunner().invoke(main, ["plan", str(file), "-o", "json"])
    assert result.exit_code == 0, result.stderr  # a plan that adds no node does not refuse the cluster
    snapshot = load_snapshot([file])
    with pytest.raises(InputError) as caught:
        check_limits(snapshot.node_pools, snapshot.node_claims, snapshot.nodes)
    assert str(caught.value) == f"{file}: NodePool p: spec.limits.cpu: limit 10000m is below the 12000m its nodes " \
                                "already hold"
    within = [replace(snapshot.node_pools[0], limits={"cpu": 12000, "nodes": 2})]
    check_limits(within, snapshot.node_claims, snapshot.nodes)
    (claim_read,) = load_snapshot([write_yaml(tmp_path / "ok.yaml", claim)]).node_claims
    assert claim_read.node_pool == "p" and claim_read.capacity == {"cpu": 8000, "memory": 32 * GI}


def test_a_node_pool_named_twice_is_refused(tmp_path: Path) -> None:
    file = write_yaml(tmp_path / "np.yaml", node_pool("p"), node_pool("p"))
    with pytest.raises(InputError, match="NodePool p: duplicate NodePool"):
        load_snapshot([file])


# --- the catalogue ----------------------------------------------------------------------------------


def test_the_kwok_providers_own_catalogue_is_read_as_it_is() -> None:
    shipped = Path("/root/go/pkg/mod/sigs.k8s.io/karpenter@v1.13.0/kwok/cloudprovider/instance_types.json")
    if not shipped.exists():
        pytest.skip("the Karpenter module is not in the Go module cache")
    types = load_catalogue([shipped])
    assert len(types) == 144
    first = next(t for t in types if t.name == "c-1x-amd64-linux")
    assert first.capacity == {"cpu": 1000, "ephemeral-storage": 20 * GI, "memory": 2 * GI, "pods": 16}
    assert first.labels[FAMILY_LABEL] == "c" and first.labels[SIZE_LABEL] == "1" and first.labels[CPU_LABEL] == "1"
    assert first.offerings[0] == Offering("test-zone-a", "spot", 19003239, True, {
        "karpenter.sh/capacity-type": "spot", "topology.kubernetes.io/zone": "test-zone-a"})


def test_the_kwok_format_defaults_pods_derives_labels_and_makes_every_offering_available(tmp_path: Path) -> None:
    offering = kwok_offering("z1", "spot", 0.25) | {"Available": False}
    raw = [kwok_type("m5.2xlarge", "8", "32Gi", offering), kwok_type("n2-standard-4", "4", "16Gi")]
    file = tmp_path / "instance_types.json"
    file.write_text(json.dumps(raw))
    aws, gcp = sorted(load_catalogue([file]), key=lambda t: t.name)
    assert aws.capacity["pods"] == 110 and aws.labels[SIZE_LABEL] == "2xlarge" and aws.labels[FAMILY_LABEL] == "m5"
    assert gcp.labels[SIZE_LABEL] == "4" and gcp.labels[FAMILY_LABEL] == "n2"
    assert aws.offerings[0].available and aws.offerings[0].price == PRICE_UNIT // 4


@pytest.mark.parametrize(("entry", "field", "words"), [
    (kwok_type("a", "1", "1Gi", kwok_offering("z", "spot", -0.1)), "offerings[0].Price", "negative price -0.1"),
    (kwok_type("a", "1", "1Gi", {k: v for k, v in kwok_offering("z", "spot").items() if k != "Price"}),
     "offerings[0].Price", "missing price"),
    (kwok_type("a", "1", "1Gi", kwok_offering("z", "spot", "cheap")), "offerings[0].Price", "is not a number"),
    (kwok_type("a", "1", "1Gi", gpus="1"), "resources.gpus", "unknown resource name 'gpus'"),
    (kwok_type("a", "1", "1Gi", kwok_offering("z", "cheap")), "offerings[0].Requirements", "unknown capacity type"),
    (kwok_type("a", "many", "1Gi"), "resources.cpu", ""),
])
def test_a_bad_catalogue_entry_is_one_line_naming_file_instance_type_and_field(
        tmp_path: Path, entry: dict[str, Any], field: str, words: str) -> None:
    file = tmp_path / "types.json"
    file.write_text(json.dumps([entry]))
    with pytest.raises(InputError) as caught:
        load_catalogue([file])
    message = str(caught.value)
    assert message.startswith(f"{file}: instance type a: {field}: ") and words in message and "\n" not in message


YAML_CATALOGUE = """
instanceTypes:
- name: m6i.large
  architecture: amd64
  operatingSystems: [linux]
  capacity: {cpu: "2", memory: 8Gi, pods: 29, hugepages-2Mi: 512Mi}
  labels: {karpenter.k8s.aws/instance-family: m6i}
  overhead:
    kubeReserved: {cpu: 70m, memory: 574Mi}
    systemReserved: {cpu: 100m, memory: 100Mi}
    evictionThreshold: {memory: 100Mi}
  offerings:
  - {zone: us-east-1a, capacityType: on-demand, pricePerHour: 0.096}
  - {zone: us-east-1b, capacityType: spot, pricePerHour: 0.035, available: false}
- name: g5.xlarge
  architecture: amd64
  operatingSystems: [linux]
  capacity: {cpu: "4", memory: 16Gi, nvidia.com/gpu: 1}
  offerings:
  - {zone: us-east-1a, capacityType: on-demand, pricePerHour: 1.006}
"""


def test_the_yaml_form_holds_the_same_content_with_its_overhead(tmp_path: Path) -> None:
    file = tmp_path / "catalogue.yaml"
    file.write_text(YAML_CATALOGUE)
    gpu, m6i = load_catalogue([file])
    assert m6i.labels == {"karpenter.k8s.aws/instance-family": "m6i"} and m6i.offerings[1].available is False
    assert m6i.offerings[0].price == 96_000_000 and gpu.capacity["nvidia.com/gpu"] == 1 and gpu.capacity["pods"] == 110


def test_a_yaml_offering_without_a_price_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "catalogue.yaml"
    file.write_text(YAML_CATALOGUE.replace(", pricePerHour: 1.006", ""))
    with pytest.raises(InputError, match=r"catalogue.yaml: instance type g5.xlarge: offerings\[0\].pricePerHour: "
                                         r"missing price"):
        load_catalogue([file])


def test_allocatable_is_capacity_less_karpenters_overhead(tmp_path: Path) -> None:
    """Karpenter's ``InstanceType.Allocatable``: capacity - (kubeReserved + systemReserved +
    evictionThreshold), memory also less hugepages; the kwok provider reserves 100m and 10Mi."""
    kwok = parse_catalogue([kwok_type("c-4x-amd64-linux", "4", "16Gi", pods="110"),
                            kwok_type("m-16x-amd64-linux", "16", "128Gi")], "t.json")
    assert kwok[0].overhead == KWOK_OVERHEAD
    assert kwok[0].allocatable() == {"cpu": 4000 - 100, "memory": 16 * GI - 10 * MI, "pods": 110}
    assert kwok[1].allocatable() == {"cpu": 15900, "memory": 137428467712, "pods": 110}  # 128Gi - 10Mi
    file = tmp_path / "catalogue.yaml"
    file.write_text(YAML_CATALOGUE)
    _, m6i = load_catalogue([file])
    # 2 - 70m - 100m; 8Gi - 574Mi - 100Mi - 100Mi - 512Mi of hugepages
    assert m6i.allocatable() == {"cpu": 1830, "hugepages-2Mi": 512 * MI, "memory": 8 * GI - 1286 * MI, "pods": 29}


# --- candidate nodes --------------------------------------------------------------------------------


def catalogue() -> list[InstanceType]:
    return parse_catalogue([
        kwok_type("c-2x-amd64-linux", "2", "4Gi", kwok_offering("z1", "spot", 0.02),
                  kwok_offering("z1", "on-demand", 0.04), kwok_offering("z2", "on-demand", 0.04)),
        kwok_type("m-8x-arm64-linux", "8", "32Gi", kwok_offering("z1", "on-demand", 0.3)) | {"architecture": "arm64"},
    ], "types.json")


def test_a_node_pools_requirements_admit_offerings() -> None:
    pool = parse_node_pool(node_pool("p", req("karpenter.sh/capacity-type", "In", "on-demand"),
                                     req("kubernetes.io/arch", "NotIn", "arm64")))
    assert [(t.name, o.zone) for t, o in admitted_offerings(pool, catalogue())] == [
        ("c-2x-amd64-linux", "z1"), ("c-2x-amd64-linux", "z2")]
    big = parse_node_pool(node_pool("p", req("karpenter.kwok.sh/instance-cpu", "Gte", "8"),
                                    req("topology.kubernetes.io/zone", "In", "z1"), req("team", "In", "a")))
    assert [(t.name, o.capacity_type) for t, o in admitted_offerings(big, catalogue())] == [
        ("m-8x-arm64-linux", "on-demand")]
    none = parse_node_pool(node_pool("p", req("kubernetes.io/os", "DoesNotExist")))
    assert admitted_offerings(none, catalogue()) == []
    unavailable = [InstanceType("x", {"cpu": 1000}, "amd64", ("linux",), (Offering("z", "spot", 1, False),))]
    assert admitted_offerings(pool, unavailable) == []


def test_a_candidate_node_registers_as_karpenter_labels_and_taints_it() -> None:
    pool = parse_node_pool(node_pool(
        "web", req("team", "In", "a"), req("karpenter.sh/capacity-type", "In", "spot", "on-demand"),
        labels={"tier": "front"},
        template_spec={"taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                       "startupTaints": [{"key": "cni/not-ready", "effect": "NoSchedule"}]}))
    instance_type = catalogue()[0]
    candidate = candidate_node(pool, instance_type, instance_type.offerings[0])
    assert candidate.node.name == "web-c-2x-amd64-linux-z1-spot"
    assert candidate.node.labels == {
        "karpenter.sh/nodepool": "web", "tier": "front", "team": "a",
        "node.kubernetes.io/instance-type": "c-2x-amd64-linux", "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "z1", "karpenter.sh/capacity-type": "spot",
        "kubernetes.io/hostname": "web-c-2x-amd64-linux-z1-spot",
        FAMILY_LABEL: "c", SIZE_LABEL: "2", CPU_LABEL: "2", "karpenter.kwok.sh/instance-memory": "4Gi"}
    assert candidate.node.taints == (Taint("dedicated", "web", "NoSchedule"), Taint("cni/not-ready", "", "NoSchedule"))
    assert candidate.startup_taints == (Taint("cni/not-ready", "", "NoSchedule"),)
    assert candidate.offering.price == 20_000_000 and candidate.node.allocatable == instance_type.allocatable()


def test_one_candidate_per_node_pool_instance_type_zone_and_capacity_type_heaviest_pool_first() -> None:
    light = parse_node_pool(node_pool("a-on-demand", req("karpenter.sh/capacity-type", "In", "on-demand")))
    heavy = parse_node_pool(node_pool("z-spot", req("karpenter.sh/capacity-type", "In", "spot"), weight=10))
    found = [(c.node_pool.name, c.instance_type.name, c.offering.zone, c.offering.capacity_type)
             for c in candidate_nodes([light, heavy], catalogue())]
    assert found == [("z-spot", "c-2x-amd64-linux", "z1", "spot"),
                     ("a-on-demand", "c-2x-amd64-linux", "z1", "on-demand"),
                     ("a-on-demand", "c-2x-amd64-linux", "z2", "on-demand"),
                     ("a-on-demand", "m-8x-arm64-linux", "z1", "on-demand")]


def test_a_static_node_pool_has_no_candidate() -> None:
    """Karpenter's provisioner filters static NodePools (``spec.replicas``) out before scheduling."""
    static = parse_node_pool(node_pool("fixed", replicas=3))
    dynamic = parse_node_pool(node_pool("dynamic", req("kubernetes.io/arch", "In", "arm64")))
    assert static.replicas == 3 and candidate_nodes([static], catalogue()) == []
    assert {c.node_pool.name for c in candidate_nodes([static, dynamic], catalogue())} == {"dynamic"}
    assert unused_pools([static, dynamic], catalogue()) == [
        "NodePool fixed is not used: it is static (spec.replicas), and Karpenter's provisioner launches no node for it"]


def families() -> list[InstanceType]:
    """Two families, c dearer than m per zone in z2 only."""
    return parse_catalogue([
        kwok_type("c-2x-amd64-linux", "2", "4Gi", kwok_offering("z1", "on-demand", 0.04),
                  kwok_offering("z2", "on-demand", 0.06)),
        kwok_type("m-2x-amd64-linux", "2", "8Gi", kwok_offering("z1", "on-demand", 0.05),
                  kwok_offering("z2", "on-demand", 0.05)),
        kwok_type("m-4x-amd64-linux", "4", "16Gi", kwok_offering("z1", "on-demand", 0.1)),
    ], "types.json")


def test_min_values_the_catalogue_cannot_meet_leaves_the_node_pool_unused() -> None:
    three = parse_node_pool(node_pool("three", req(FAMILY_LABEL, "In", "c", "m", "r", minValues=3)))
    assert candidate_nodes([three], families()) == []
    assert unused_pools([three], families()) == [
        "NodePool three is not used: NodePool requirements filtered out all compatible available instance types due "
        f"to minValues incompatibility (minValues requirement is not met for label(s) ['{FAMILY_LABEL}'])"]
    undefined = parse_node_pool(node_pool("rack", req("example.com/rack", "Exists", minValues=1)))
    assert candidate_nodes([undefined], families()) == [] and len(unused_pools([undefined], families())) == 1


def test_min_values_gives_each_candidate_dearer_alternatives_and_their_least_room() -> None:
    """Each candidate keeps two families among what its NodeClaim admits, all dearer than itself
    (so that the provider still launches it); the dearest have none and are left out; the node's
    allocatable is the least of the candidate's and its alternatives'."""
    pool = parse_node_pool(node_pool("two", req(FAMILY_LABEL, "In", "c", "m", minValues=2)))
    assert unused_pools([pool], families()) == []
    found = {(c.instance_type.name, c.offering.zone): [(a.instance_type.name, a.offering.zone) for a in c.alternatives]
             for c in candidate_nodes([pool], families())}
    assert found == {("c-2x-amd64-linux", "z1"): [("m-2x-amd64-linux", "z1")],
                     ("m-2x-amd64-linux", "z2"): [("c-2x-amd64-linux", "z2")]}
    cheap = next(c for c in candidate_nodes([pool], families()) if c.instance_type.name.startswith("c"))
    assert cheap.node.allocatable == cheap.instance_type.allocatable()  # m-2x holds more of everything
    roomy = next(c for c in candidate_nodes([pool], families()) if c.instance_type.name.startswith("m"))
    assert roomy.node.allocatable["memory"] == 4 * GI - 10 * MI  # c-2x's


def daemon_set(name: str, template: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]}}}


def test_daemon_set_pods_that_would_land_on_a_new_node_come_off_its_allocatable(tmp_path: Path) -> None:
    everywhere = daemon_set("logs", pod("x").cpu("100m").memory("128Mi").tolerate("", operator="Exists").manifest())
    arm_only = daemon_set("arm", pod("x").cpu("1").selector("kubernetes.io/arch", "arm64").manifest())
    untolerating = daemon_set("plain", pod("x").cpu("200m").limit("memory", "64Mi").manifest())
    file = write_yaml(tmp_path / "ds.yaml", everywhere, arm_only, untolerating,
                      node_pool("web", template_spec={"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}),
                      node_pool("any"))
    snapshot = load_snapshot([file])
    assert [p.key for p in snapshot.daemon_pods] == ["kube-system/arm", "kube-system/logs", "kube-system/plain"]
    assert "DaemonSet.apps" not in snapshot.skipped_kinds
    pools = {pool.name: pool for pool in snapshot.node_pools}
    amd, arm = catalogue()
    tainted = candidate_node(pools["web"], amd, amd.offerings[0], snapshot.daemon_pods)
    assert tainted.daemon_overhead == {"cpu": 100, "memory": 128 * MI, "pods": 1}  # only logs tolerates the taint
    assert tainted.node.allocatable == {"cpu": 2000 - 100 - 100, "memory": 4 * GI - 10 * MI - 128 * MI, "pods": 109}
    open_arm = candidate_node(pools["any"], arm, arm.offerings[0], snapshot.daemon_pods)
    assert open_arm.daemon_overhead == {"cpu": 1300, "memory": 192 * MI, "pods": 3}  # limits stand in for requests
    assert open_arm.node.allocatable["cpu"] == 8000 - 100 - 1300


def test_a_bad_daemon_set_template_names_the_daemon_set_and_its_field(tmp_path: Path) -> None:
    bad = daemon_set("logs", pod("x").request("cpu", "lots").manifest())
    file = write_yaml(tmp_path / "ds.yaml", bad)
    with pytest.raises(InputError) as caught:
        load_snapshot([file])
    assert str(caught.value).startswith(f"{file}: DaemonSet logs: spec.template.spec.containers[0].resources")


def test_a_catalogue_entry_without_a_name_is_named_by_its_place(tmp_path: Path) -> None:
    file = tmp_path / "catalogue.yaml"
    file.write_text("instanceTypes:\n- {architecture: amd64, offerings: []}\n")
    with pytest.raises(InputError, match=r"catalogue.yaml: instance type instanceTypes\[0\]: name: Required value"):
        load_catalogue([file])
    file.write_text("kind: Pod\n")
    with pytest.raises(InputError, match=r"catalogue\.yaml: not an instance-type catalogue"):
        load_catalogue([file])
