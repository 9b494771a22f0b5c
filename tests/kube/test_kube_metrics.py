"""Measured usage from the metrics API: files as `kubectl get --raw` prints them, the live API,
freshness, and the load a node is measured at."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.client import Cluster
from kubeplace.kube.errors import InputError
from kubeplace.kube.files import load_snapshot
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.metrics import fresh_metrics, measured_load
from tests.builders import node, pod, snapshot_of
from tests.kube.fake_apiserver import FakeApiServer, serving
from tests.kube.test_kube_client import write_kubeconfig
from tests.metrics_builders import NOW, NOW_EPOCH, metrics_list, node_metrics, pod_metrics

NODES = [node("n1").cpu("4").memory("8Gi"), node("n2").cpu("4").memory("8Gi")]
PODS = [pod("running").cpu("1").memory("1Gi").on("n1").created("2025-06-01T11:00:00Z"), pod("web").cpu("500m")]


def write_dump(tmp_path: Path, *documents: object) -> Path:
    """A directory of JSON files, one per document (``kubectl get -o json`` and ``--raw`` output)."""
    for index, document in enumerate(documents):
        (tmp_path / f"{index}.json").write_text(json.dumps(document))
    return tmp_path


def cluster_list() -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "List", "items": [b.manifest() for b in [*NODES, *PODS]]}


def test_node_metrics_list_as_kubectl_prints_it_is_parsed_into_integer_units(tmp_path: Path) -> None:
    raw = metrics_list("NodeMetrics", node_metrics("n1", "1500000001n", "2097152Ki"), node_metrics("n2", "250m"))
    snap = load_snapshot([write_dump(tmp_path, cluster_list(), raw)])
    assert snap.node_metrics["n1"].usage == {"cpu": 1501, "memory": 2 << 30}  # nanocores round up to milli
    assert snap.node_metrics["n2"].usage["cpu"] == 250
    assert snap.node_metrics["n1"].timestamp == NOW_EPOCH
    assert snap.skipped_kinds == {}


def test_pod_metrics_sum_their_containers(tmp_path: Path) -> None:
    two = pod_metrics("running", "100m", "100Mi")
    two["containers"].append({"name": "side", "usage": {"cpu": "50m", "memory": "28Mi"}})
    snap = load_snapshot([write_dump(tmp_path, cluster_list(), metrics_list("PodMetrics", two))])
    assert snap.pod_metrics["default/running"].usage == {"cpu": 150, "memory": 128 << 20}


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("timestamp", "yesterday", "timestamp: invalid timestamp 'yesterday'"),
    ("timestamp", None, "timestamp: missing timestamp"),
    ("usage", {"cpu": "lots"}, "usage.cpu: invalid quantity"),
])
def test_a_bad_metrics_object_is_one_line_naming_file_object_and_field(tmp_path: Path, field: str, value: object,
                                                                      expected: str) -> None:
    bad = node_metrics("n1", "1")
    bad[field] = value
    path = write_dump(tmp_path, cluster_list(), bad)
    with pytest.raises(InputError) as caught:
        load_snapshot([path])
    assert f"{path / '1.json'}: NodeMetrics n1: {expected}" in str(caught.value)
    result = CliRunner().invoke(main, ["plan", str(path)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and "NodeMetrics n1" in result.stderr


def test_stale_metrics_are_ignored_with_one_warning_and_max_age_zero_keeps_them(tmp_path: Path) -> None:
    path = write_dump(tmp_path, cluster_list(), node_metrics("n1", "3900m"), node_metrics("n2", "100m"))
    result = CliRunner().invoke(main, ["plan", str(path), "-o", "json", "--time-limit", "2", "--workers", "1"])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "ignored the metrics of 2 node(s)" in warnings[0] and "older than 300s" in warnings[0]
    kept = CliRunner().invoke(main, ["plan", str(path), "-o", "json", "--metrics-max-age", "0", "--time-limit", "2",
                                     "--workers", "1"])
    assert kept.exit_code == 0 and "warning" not in kept.stderr
    assert json.loads(kept.stdout)["placements"][0]["node"] == "n2"  # n1 is measured hot
    bad = CliRunner().invoke(main, ["plan", str(path), "--metrics-max-age", "-1"])
    assert bad.exit_code == 2 and "--metrics-max-age" in bad.stderr


def test_fresh_metrics_keep_what_is_young_enough() -> None:
    snap = snapshot_of(*NODES, node_metrics("n1", "1", timestamp="2025-06-01T11:58:00Z"),
                       node_metrics("n2", "1", timestamp="2025-06-01T11:50:00Z"))
    fresh = fresh_metrics(snap, 300, NOW_EPOCH)
    assert list(fresh.node_metrics) == ["n1"]
    assert len(fresh.notes) == 1 and "1 node(s)" in fresh.notes[0]
    assert fresh_metrics(snap, 0, NOW_EPOCH) == snap


def test_metrics_dated_in_the_future_are_stale_not_fresh_forever() -> None:
    snap = snapshot_of(*NODES, node_metrics("n1", "1", timestamp="2025-06-01T11:58:00Z"),
                       node_metrics("n2", "1", timestamp="9999-12-31T23:59:59Z"),
                       pod_metrics("web", "1", timestamp="2025-06-01T12:00:01Z"))
    fresh = fresh_metrics(snap, 300, NOW_EPOCH)
    assert list(fresh.node_metrics) == ["n1"] and not fresh.pod_metrics
    (line,) = fresh.notes
    assert "1 node(s) and 1 pod(s) older than 300s or dated in the future" in line
    assert "2 of them dated in the future" in line
    assert fresh_metrics(snap, 0, NOW_EPOCH) == snap  # no limit: kept as they are


def test_measured_load_adds_the_requests_of_pods_the_metrics_cannot_include_yet() -> None:
    snap = snapshot_of(*NODES, node_metrics("n1", "2", "2Gi"), node_metrics("n2", "1", "1Gi"),
                       pod("measured").cpu("1").memory("1Gi").on("n1").created("2025-06-01T10:00:00Z"),
                       pod("new").cpu("500m").memory("512Mi").on("n1").created("2025-06-01T10:00:00Z"),
                       pod("late").cpu("250m").on("n2").created("2025-06-01T12:00:30Z"),
                       pod_metrics("measured", "900m"))
    loads = measured_load(snap)
    assert loads["n1"].usage == {"cpu": 2500, "memory": (2 << 30) + (512 << 20)} and loads["n1"].estimated == 1
    assert loads["n2"].usage["cpu"] == 1250  # created after n2 was measured
    without_pod_metrics = snapshot_of(*NODES, node_metrics("n1", "2"), pod("old").cpu("1").on("n1")
                                      .created("2025-06-01T10:00:00Z"))
    assert measured_load(without_pod_metrics)["n1"].usage["cpu"] == 2000


@pytest.fixture
def api() -> FakeApiServer:
    return FakeApiServer([b.manifest() for b in NODES], [b.manifest() for b in PODS], [])


@pytest.fixture
def cluster(api: FakeApiServer, tmp_path: Path) -> Iterator[Cluster]:
    with serving(api) as url:
        yield connect(str(write_kubeconfig(tmp_path / "config", url)), None)


def test_live_metrics_come_from_the_metrics_api(cluster: Cluster, api: FakeApiServer) -> None:
    api.lists["/apis/metrics.k8s.io/v1beta1/nodes"] = ("NodeMetricsList", "metrics.k8s.io/v1beta1",
                                                       [node_metrics("n1", "3")])
    api.lists["/apis/metrics.k8s.io/v1beta1/pods"] = ("PodMetricsList", "metrics.k8s.io/v1beta1",
                                                      [pod_metrics("running", "2")])
    snap = load_live_snapshot(cluster)
    assert snap.node_metrics["n1"].usage["cpu"] == 3000 and snap.node_metrics["n1"].timestamp == NOW_EPOCH
    assert snap.pod_metrics["default/running"].usage["cpu"] == 2000
    assert snap.notes == ()


def test_a_missing_metrics_api_is_a_warning_not_an_error(cluster: Cluster) -> None:
    snap = load_live_snapshot(cluster)
    assert snap.node_metrics == {} and len(snap.nodes) == 2
    assert len(snap.notes) == 1 and snap.notes[0].startswith("metrics API not available (list nodes.metrics.k8s.io: "
                                                              "HTTP 404")
    assert NOW  # the fixtures' clock
