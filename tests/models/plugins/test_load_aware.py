"""models/plugins/load_aware/ (filter and score on measured load) and Overcommit (headroom by node
label and load, whose checks read LoadAware's measured load): every plan is checked by the
independent verifier, which checks the same rules itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import ConfigError, Configuration, SolverSettings
from kubeplace.models.config_load import parse_configuration
from kubeplace.models.framework import LoadBalanceTerm
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import Planned, make_plan
from kubeplace.plan.plan import Placement
from kubeplace_bench.rebalance_clusters import node as raw_node
from kubeplace_bench.rebalance_clusters import pod as raw_pod
from tests.builders import node, pod, snapshot_of
from tests.metrics_builders import node_metrics, pod_metrics

SOLVER = SolverSettings(backend="cpsat", time_limit=5, workers=1)
FAST = ["--time-limit", "5", "--workers", "1", "--metrics-max-age", "0"]


def config(*plugin_config: dict[str, Any], disabled: tuple[str, ...] = ()) -> Configuration:
    return parse_configuration({
        "apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementConfiguration",
        "profiles": [{"schedulerName": "kubeplace", "pluginConfig": list(plugin_config),
                      "plugins": {"disabled": list(disabled)}}],
    })  # fmt: skip


def planned(snap: Snapshot, conf: Configuration | None = None) -> Planned:
    conf = conf or config()
    result = make_plan(snap, conf, conf.profiles[0], SOLVER)
    assert verify_plan(snap, result.plan.placements, conf, conf.profiles[0]) == []
    assert result.violations == ()
    return result


def where(result: Planned) -> dict[str, str]:
    return {p.name: p.node for p in result.plan.placements}


def two_nodes(*extra: Any) -> Snapshot:
    """Equal nodes, equal requests; hot is measured at 83% CPU, cool at 10%."""
    return snapshot_of(node("hot").cpu("10").memory("32Gi"), node("cool").cpu("10").memory("32Gi"),
                       pod("a").cpu("1").memory("1Gi").on("hot"), pod("b").cpu("1").memory("1Gi").on("cool"),
                       node_metrics("hot", "8300m", "4Gi"), node_metrics("cool", "1", "4Gi"), *extra)


def test_a_node_above_its_cpu_threshold_takes_no_new_pod_with_the_schedulers_reason() -> None:
    snap = snapshot_of(node("hot").cpu("10").memory("32Gi"), pod("web").cpu("100m"), node_metrics("hot", "8300m"))
    result = planned(snap)
    assert result.plan.placements == ()
    assert result.plan.unplaced[0].reasons == (
        "0/1 nodes are available: 1 node(s) had cpu load 0.83 above threshold 0.70.",)


def test_reasons_are_counted_per_load_and_memory_has_its_own_threshold() -> None:
    snap = snapshot_of(node("n1").cpu("10").memory("10Gi"), node("n2").cpu("10").memory("10Gi"),
                       node("n3").cpu("10").memory("10Gi"), pod("web").cpu("100m"),
                       node_metrics("n1", "8300m"), node_metrics("n2", "1", "9Gi"), node_metrics("n3", "9100m"))
    (unplaced,) = planned(snap).plan.unplaced
    assert unplaced.reasons == ("0/3 nodes are available: 1 node(s) had cpu load 0.83 above threshold 0.70, "
                                "1 node(s) had cpu load 0.91 above threshold 0.70, "
                                "1 node(s) had memory load 0.90 above threshold 0.80.",)
    relaxed = config({"name": "LoadAware", "args": {"thresholds": {"cpu": 0.95}}})
    assert len(planned(snap, relaxed).plan.placements) == 1  # only cpu is checked now, and all are below 0.95


def test_daemonset_pods_are_not_kept_off_hot_nodes() -> None:
    snap = snapshot_of(node("hot").cpu("10"), pod("agent").cpu("100m").owner("DaemonSet", "agent"),
                       node_metrics("hot", "9"))
    assert where(planned(snap)) == {"agent": "hot"}


def test_measured_load_not_requests_is_balanced() -> None:
    """By requests both nodes are alike (1 CPU each); by measured load 'hot' is far busier, so
    the new pods go to 'cool' (with LoadAware disabled they split evenly)."""
    snap = two_nodes(pod("p1").cpu("1").memory("1Gi"), pod("p2").cpu("1").memory("1Gi"))
    with_load = planned(snap)
    assert where(with_load) == {"p1": "cool", "p2": "cool"}
    assert any(isinstance(t, LoadBalanceTerm) and t.measured for t in with_load.terms)
    assert not any(isinstance(t, LoadBalanceTerm) and t.resource == "cpu" and not t.measured for t in with_load.terms)
    without = planned(snap, config(disabled=("LoadAware",)))
    assert sorted(where(without).values()) == ["cool", "hot"]


def test_without_metrics_load_aware_does_nothing() -> None:
    snap = snapshot_of(node("n1").cpu("10").memory("8Gi"), node("n2").cpu("10").memory("8Gi"),
                       pod("x").cpu("3").on("n1"), *(pod(f"p{i}").cpu("1") for i in range(4)))
    on, off = planned(snap), planned(snap, config(disabled=("LoadAware",)))
    assert where(on) == where(off) and on.terms == off.terms
    assert on.aggregation.problem.measured is None


def test_pods_bound_since_the_last_scrape_count_at_their_requests() -> None:
    """'cool' was measured idle, but 6 CPUs were bound there after (no PodMetrics for them): the
    load-aware balance sees them, and the new pod goes to the other node."""
    snap = snapshot_of(node("cool").cpu("10").memory("32Gi"), node("other").cpu("10").memory("32Gi"),
                       pod("fresh").cpu("6").on("cool").created("2025-06-01T12:00:30Z"),
                       pod("steady").cpu("1").on("other").created("2025-06-01T10:00:00Z"),
                       node_metrics("cool", "100m"), node_metrics("other", "3"), pod_metrics("steady", "3"),
                       pod("new").cpu("1"))
    assert where(planned(snap)) == {"new": "other"}


@pytest.mark.parametrize(("args", "problem"), [
    ({"thresholds": {"cpu": 1.5}}, "thresholds.cpu: expected a number in (0, 1], got 1.5"),
    ({"thresholds": {"cpu": "high"}}, "thresholds.cpu: expected a number in (0, 1], got 'high'"),
    ({"thresholds": {"gpu": 0.5}}, "thresholds.gpu: expected one of cpu, memory (what the metrics API measures)"),
    ({"resources": [{"name": "cpu", "weight": -1}]}, "resources[0].weight: expected an integer >= 0, got -1"),
])
def test_bad_load_aware_args_are_one_line(args: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config({"name": "LoadAware", "args": args})
    assert str(caught.value) == f"profiles[0].pluginConfig[0].args: {problem}"


@pytest.mark.parametrize(("args", "problem"), [
    ({"headroom": 1.2}, "headroom: expected a number in (0, 1], got 1.2"),
    ({"headroom": 0}, "headroom: expected a number in (0, 1], got 0.0"),
    ({"loadThreshold": -0.1}, "loadThreshold: expected a number in (0, 1], got -0.1"),
    ({"nodeLabel": "=true"}, "nodeLabel: expected 'key=value' or 'key', got '=true'"),
])
def test_bad_overcommit_args_are_one_line(args: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config({"name": "Overcommit", "args": args})
    assert str(caught.value) == f"profiles[0].pluginConfig[0].args: {problem}"


def overcommit_cluster(*pods: Any) -> Snapshot:
    return snapshot_of(node("plain").cpu("4").memory("16Gi"),
                       node("oc-cool").cpu("4").memory("16Gi").label("overcommit", "true"),
                       node("oc-hot").cpu("4").memory("16Gi").label("overcommit", "true"),
                       node_metrics("plain", "100m"), node_metrics("oc-cool", "400m"), node_metrics("oc-hot", "2900m"),
                       *pods)


OVERCOMMIT = {"name": "Overcommit", "args": {"headroom": 0.75, "nodeLabel": "overcommit=true", "loadThreshold": 0.7}}


def test_headroom_fills_ordinary_nodes_to_75_percent_and_cool_overcommit_nodes_to_100() -> None:
    snap = overcommit_cluster(*(pod(f"p{i}").cpu("1").memory("1Gi") for i in range(12)))
    result = planned(snap, config(OVERCOMMIT, {"name": "LoadAware", "args": {"thresholds": {"cpu": 0.9}}}))
    per_node: dict[str, int] = {}
    for p in result.plan.placements:
        per_node[p.node] = per_node.get(p.node, 0) + 1
    assert per_node == {"plain": 3, "oc-cool": 4, "oc-hot": 3}  # oc-hot is measured at 0.72: ordinary
    assert len(result.plan.unplaced) == 2
    assert "Insufficient cpu" in result.plan.unplaced[0].reasons[0]
    off = planned(snap, config({"name": "LoadAware", "args": {"thresholds": {"cpu": 0.9}}}))
    assert len(off.plan.placements) == 12  # default headroom 1.0: the kubelet's limit only


def test_the_verifier_refuses_what_load_aware_and_overcommit_forbid() -> None:
    snap = overcommit_cluster(*(pod(f"p{i}").cpu("1").memory("1Gi") for i in range(4)))
    conf = config(OVERCOMMIT)
    profile = conf.profiles[0]
    onto_hot = verify_plan(snap, [Placement("default", "p0", "oc-hot", "uid-default-p0")], conf, profile)
    assert [(v.rule, v.detail) for v in onto_hot] == [("LoadAware", "node cpu load 0.72 above threshold 0.70")]
    four_on_plain = [Placement("default", f"p{i}", "plain", f"uid-default-p{i}") for i in range(4)]
    violations = verify_plan(snap, four_on_plain, conf, profile)
    assert [v.rule for v in violations] == ["Overcommit"]
    assert "cpu requests 4000m above 0.75 of allocatable 4000m (headroom 3000m)" in violations[0].detail
    four_on_cool = [Placement("default", f"p{i}", "oc-cool", f"uid-default-p{i}") for i in range(4)]
    assert verify_plan(snap, four_on_cool, conf, profile) == []


def test_batch_resources_are_ordinary_extended_resources() -> None:
    """Koordinator publishes reclaimed capacity as kubernetes.io/batch-cpu (milli) and batch-memory
    (bytes): they fill by the kubelet's rule like any extended resource."""
    batch = node("colo").cpu("8").memory("32Gi").allocatable("kubernetes.io/batch-cpu", 3000)
    snap = snapshot_of(batch.allocatable("kubernetes.io/batch-memory", str(8 << 30)), node("other").cpu("8"),
                       *(pod(f"be{i}").request("kubernetes.io/batch-cpu", 1000)
                         .request("kubernetes.io/batch-memory", str(2 << 30)) for i in range(4)))
    result = planned(snap)
    assert where(result) == {"be0": "colo", "be1": "colo", "be2": "colo"} or len(result.plan.placements) == 3
    assert {p.node for p in result.plan.placements} == {"colo"}
    assert "Insufficient kubernetes.io/batch-cpu" in result.plan.unplaced[0].reasons[0]


def test_rebalance_moves_pods_off_a_hot_node(tmp_path: Path) -> None:
    """By requests the cluster is nearly balanced; by measured load 'hot' runs at 90%, 'cool' at 10%.
    The rebalancer, balancing measured load, moves pods from 'hot' to 'cool'."""
    objects = [raw_node("hot", 10000, 32768), raw_node("cool", 10000, 32768),
               *(raw_pod(f"h{i}", "app", 500, 512, node_name="hot") for i in range(4)),
               *(raw_pod(f"c{i}", "app", 250, 512, node_name="cool") for i in range(4)),
               node_metrics("hot", "9", "8Gi"), node_metrics("cool", "1", "8Gi"),
               *(pod_metrics(f"h{i}", "2", ns="app") for i in range(4)),
               *(pod_metrics(f"c{i}", "200m", ns="app") for i in range(4))]
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(objects))
    result = CliRunner().invoke(main, ["rebalance", str(cluster), "-o", "json", *FAST])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["summary"]["objective_before"] == pytest.approx(0.32)  # cpu load 0.9 and 0.1 as measured
    moves = doc["moves"]
    assert moves and {(m["from"], m["to"]) for m in moves} == {("hot", "cool")}
    assert "cpu load" in moves[0]["why"] or "memory load" in moves[0]["why"]
    plain = CliRunner().invoke(main, ["rebalance", str(cluster), "-o", "json", "--time-limit", "5", "--workers", "1"])
    assert "ignored the metrics of 2 node(s)" in plain.stderr  # stale at the default age: requests only
    assert json.loads(plain.stdout)["summary"]["objective_before"] == pytest.approx(0.005)  # cpu requests 0.2 and 0.1


def test_the_load_aware_example_keeps_the_hot_node_empty_and_fills_the_overcommit_node() -> None:
    example = Path(__file__).parents[3] / "examples" / "load-aware"
    result = CliRunner().invoke(main, ["plan", str(example / "cluster"), "--config", str(example / "config.yaml"),
                                       "-o", "json", *FAST])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    nodes = [p["node"] for p in doc["placements"]]
    assert "hot" not in nodes and nodes.count("plain") == 4 and nodes.count("colo") == 6
    assert doc["summary"]["verified"] is True
