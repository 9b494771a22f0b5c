"""The cluster bench's scenarios for the inter-pod rules, offline: what each is expected to place is
possible, and kubeplace leaves only pods that carry these rules.

The kube-scheduler's numbers are measured on the real control plane (tests/e2e/test_bench_cluster_e2e.py).
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kubeplace.kube.objects import Snapshot
from kubeplace.kube.parse import build_snapshot
from kubeplace.models.config import SolverSettings
from kubeplace.models.config_load import parse_configuration
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Placement
from kubeplace_bench.cluster import KUBEPLACE, KUBEPLACE_CONFIG
from kubeplace_bench.cluster_rules import RACK, RULE_SCENARIOS, ZONE
from kubeplace_bench.cluster_scenarios import Scenario

Manifest = dict[str, Any]
NAMESPACE = "bench-kubeplace"


def pending(scenario: Scenario, witness: Mapping[str, str] | None = None) -> list[Manifest]:
    """Every pod of the workload as the runner creates it; followers pinned to their leader's rack
    in ``witness``."""
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in scenario.nodes}
    pods = []
    for template in scenario.pods:
        pods.append(copy.deepcopy(template))
    for group in scenario.followers:
        for template in group.pods:
            body = copy.deepcopy(template)
            if witness is not None:
                body["spec"]["nodeSelector"] = {group.key: labels[witness[group.leader]][group.key]}
            pods.append(body)
    for body in pods:
        body["metadata"]["namespace"] = NAMESPACE
        body["spec"]["schedulerName"] = KUBEPLACE
    return pods


def snapshot_of(scenario: Scenario, pods: list[Manifest]) -> Snapshot:
    return build_snapshot([(o, "bench") for o in (*scenario.nodes, *pods)], scheduler_name=KUBEPLACE)


# --------------------------------------------------------------------------- the witness layouts


def _by_shape(scenario: Scenario) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in [p["metadata"]["name"] for p in pending(scenario)]:
        out.setdefault(name.split("-", 1)[1], []).append(name)
    return out


def _nodes(scenario: Scenario, prefix: str) -> list[str]:
    return [n["metadata"]["name"] for n in scenario.nodes if n["metadata"]["name"].startswith(prefix)]


def _ha_witness(scenario: Scenario, out: dict[str, str]) -> None:
    """Per zone: the first half of its nodes hold a web and an api replica, the other half a db replica."""
    shapes = _by_shape(scenario)
    for zone in "abc":
        nodes = _nodes(scenario, f"web-{zone}-")
        half = len(nodes) // 2
        for i, n in enumerate(nodes[:half]):
            out[shapes["web"][half * "abc".index(zone) + i]] = n
            out[shapes["api"][half * "abc".index(zone) + i]] = n
        for i, n in enumerate(nodes[half:]):
            out[shapes["db"][half * "abc".index(zone) + i]] = n
    for i, name in enumerate(shapes.get("batch", [])):
        out[name] = _nodes(scenario, f"web-{'abc'[i % 3]}-")[-1]


def _rack_witness(scenario: Scenario, out: dict[str, str]) -> None:
    """The k-th 4-pod group in the k-th 4-node rack, the k-th 2-pod group in the k-th 2-node rack."""
    racks: dict[int, list[str]] = {4: [], 2: []}
    for n in scenario.nodes:
        if RACK in n["metadata"]["labels"] and n["metadata"]["name"].endswith("-0"):
            rack = n["metadata"]["labels"][RACK]
            racks[len([m for m in scenario.nodes if m["metadata"]["labels"].get(RACK) == rack])].append(rack)
    groups: dict[str, list[str]] = {}
    for p in pending(scenario):
        shape = p["metadata"]["name"].split("-", 1)[1]
        if shape.startswith(("big", "small")):
            groups.setdefault(shape.rsplit("-", 1)[0], []).append(p["metadata"]["name"])
    for group, members in groups.items():
        size = 4 if group.startswith("big") else 2
        rack = racks[size][int(group.removeprefix("big").removeprefix("small"))]
        rack_nodes = [n["metadata"]["name"] for n in scenario.nodes if n["metadata"]["labels"].get(RACK) == rack]
        out.update(zip(members, rack_nodes, strict=True))


def witness(scenario: Scenario) -> dict[str, str]:
    out: dict[str, str] = {}
    if _nodes(scenario, "web-"):
        _ha_witness(scenario, out)
    _rack_witness(scenario, out)
    return out


# --------------------------------------------------------------------------- the rules, checked apart


def _matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """matchLabels and In / NotIn / Exists, the shapes these scenarios use."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        value = labels.get(e["key"])
        if e["operator"] == "In" and value not in e["values"]:
            return False
        if e["operator"] == "NotIn" and value in e["values"]:
            return False
        if e["operator"] == "Exists" and value is None:
            return False
    return True


def rule_violations(scenario: Scenario, pods: list[Manifest], where: Mapping[str, str]) -> list[str]:
    """Final-state checks of required (anti-)affinity and DoNotSchedule spread over the placed pods."""
    node_labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in scenario.nodes}
    placed = [p for p in pods if p["metadata"]["name"] in where]
    problems = []
    for p in placed:
        name, affinity = p["metadata"]["name"], p["spec"].get("affinity") or {}
        here = node_labels[where[name]]
        for term in (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution", []):
            key = term["topologyKey"]
            for q in placed:
                if q is not p and _matches(term["labelSelector"], q["metadata"]["labels"]) \
                        and node_labels[where[q["metadata"]["name"]]].get(key) == here.get(key):
                    problems.append(f"{name} and {q['metadata']['name']} share {key}")
        for term in (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution", []):
            key = term["topologyKey"]
            domains = {node_labels[where[q["metadata"]["name"]]].get(key) for q in placed
                       if _matches(term["labelSelector"], q["metadata"]["labels"])}
            if domains != {here.get(key)}:
                problems.append(f"{name}'s affinity group spans {key} {sorted(map(str, domains))}")
        for c in p["spec"].get("topologySpreadConstraints") or []:
            key = c["topologyKey"]
            counts = Counter({labels[key]: 0 for labels in node_labels.values() if key in labels})
            for q in placed:
                if _matches(c["labelSelector"], q["metadata"]["labels"]):
                    counts[node_labels[where[q["metadata"]["name"]]][c["topologyKey"]]] += 1
            if max(counts.values()) - min(counts.values()) > c["maxSkew"]:
                problems.append(f"{name}: {c['topologyKey']} counts {dict(counts)}")
    return problems


SCENARIOS: list[tuple[str, Callable[[int], Scenario]]] = sorted(RULE_SCENARIOS.items())


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("name", "build"), SCENARIOS)
def test_what_kubeplace_is_expected_to_place_is_possible(name: str, build: Callable[[int], Scenario],
                                                         seed: int) -> None:
    scenario = build(seed)
    assert scenario.expected is not None
    where = witness(scenario)
    pods = pending(scenario, where)
    assert len(where) == len(pods) == scenario.workload_pods == scenario.expected.kubeplace, name
    snapshot = snapshot_of(scenario, pods)
    config = parse_configuration(KUBEPLACE_CONFIG)
    whole_node = tuple(range(8))  # every GPU pod here takes all 8 devices of its node
    placements = [Placement(NAMESPACE, pod, node, gpus=whole_node if node.startswith("gpu-") else ())
                  for pod, node in where.items()]
    # The verifier refuses to place pods with rules kubeplace does not model yet; those rules are
    # checked here, apart.
    violations = verify_plan(snapshot, placements, config, config.profiles[0])
    assert [v for v in violations if v.rule != "Unmodelled"] == [], name
    assert rule_violations(scenario, pods, where) == [], name
    assert scenario.expected.kube_scheduler < scenario.expected.kubeplace


def test_the_checks_catch_a_broken_layout() -> None:
    scenario = RULE_SCENARIOS["ha-web"](0)
    where = witness(scenario)
    in_a = next(n for n in where if n.endswith("-web") and where[n].startswith("web-a-"))
    in_b = next(n for n in where if n.endswith("-web") and where[n].startswith("web-b-"))
    where[in_b] = where[in_a]  # two web replicas on one host, zone a gets one more
    problems = rule_violations(scenario, pending(scenario, where), where)
    assert any("share kubernetes.io/hostname" in p for p in problems)
    assert any(f"{ZONE} counts" in p for p in problems)

    scenario = RULE_SCENARIOS["lws-racks"](0)
    where = witness(scenario)
    where["p00001-big0-1"] = where["p00004-big1-0"]  # a member of group big0 on a node of big1's rack
    problems = rule_violations(scenario, pending(scenario, where), where)
    assert any(f"affinity group spans {RACK}" in p for p in problems)
    assert any(f"share {RACK}" in p for p in problems)


@pytest.mark.parametrize(("name", "build"), SCENARIOS)
def test_kubeplace_places_every_pod_of_the_first_wave(name: str, build: Callable[[int], Scenario]) -> None:
    scenario = build(0)
    pods = pending(scenario)[: len(scenario.pods)]  # the first wave: followers come after their leader
    snapshot = snapshot_of(scenario, pods)
    config = parse_configuration(KUBEPLACE_CONFIG)
    plan = make_plan(snapshot, config, config.profiles[0], SolverSettings(time_limit=5, workers=1, seed=0)).plan
    assert verify_plan(snapshot, plan.placements, config, config.profiles[0]) == [], name
    assert plan.unplaced == () and plan.summary.pods_left_to_default_scheduler == 0, name
