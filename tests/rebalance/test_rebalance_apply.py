"""Evicting: dry runs write nothing, 429 is skipped and never retried, a changed cluster stops the
run, the lease keeps runs apart, kubeplace-scheduled targets go to a ConfigMap; and the CLI on files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import Conflict, DisruptionBudget, NotFound
from kubeplace.rebalance.apply import (
    EVICTED,
    GONE,
    LEASE_NAME,
    PLANNED,
    SKIPPED_PDB,
    TARGETS_CONFIGMAP,
    LeaseHeld,
    apply_moves,
)
from kubeplace.rebalance.solve_moves import Move
from kubeplace_bench.rebalance_clusters import node, pdb, pod


class FakeCluster:
    """Records every call; pods live in a dict, evictions may be told to answer 429/404."""

    def __init__(self, pods: dict[str, dict[str, Any]], refuse: set[str] = frozenset(), gone: set[str] = frozenset()):
        self.pods, self.refuse, self.gone = pods, set(refuse), set(gone)
        self.calls: list[tuple[str, ...]] = []
        self.leases: dict[str, dict[str, Any]] = {}
        self.config_maps: dict[str, dict[str, str]] = {}

    def list_nodes(self) -> list[dict[str, Any]]:
        self.calls.append(("list_nodes",))
        return [{"metadata": {"name": n}} for n in ("a", "b", "c")]

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(("read_pod", name))
        if name not in self.pods:
            raise NotFound("gone", status=404)
        return self.pods[name]

    def evict(self, namespace: str, name: str, uid: str, dry_run: bool = False) -> None:
        self.calls.append(("evict", name))
        if name in self.refuse:
            raise DisruptionBudget("HTTP 429: Cannot evict pod as it would violate the pod's disruption budget.",
                                   status=429)
        if name in self.gone:
            raise NotFound("HTTP 404", status=404)
        self.pods.pop(name, None)

    def read_lease(self, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(("read_lease",))
        if name not in self.leases:
            raise NotFound("no lease", status=404)
        return json.loads(json.dumps(self.leases[name]))

    def write_lease(self, namespace: str, lease: dict[str, Any], create: bool) -> dict[str, Any]:
        self.calls.append(("write_lease", "create" if create else "update"))
        name = lease["metadata"]["name"]
        if create and name in self.leases:
            raise Conflict("exists", status=409)
        self.leases[name] = json.loads(json.dumps(lease))
        return json.loads(json.dumps(lease))

    def write_config_map(self, namespace: str, name: str, data: dict[str, str]) -> None:
        self.calls.append(("write_config_map", name))
        self.config_maps[name] = dict(data)

    @property
    def writes(self) -> list[tuple[str, ...]]:
        return [c for c in self.calls if c[0] in ("evict", "write_lease", "write_config_map")]


def running(name: str, node_name: str = "a") -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"nodeName": node_name}}


def moves(*names: str, scheduler: str = "default-scheduler") -> list[Move]:
    return [Move("ns", n, f"uid-{n}", "a", "b", "balance", "ReplicaSet/rs", scheduler) for n in names]


def test_dry_run_writes_nothing() -> None:
    cluster = FakeCluster({"p1": running("p1")})
    report = apply_moves(cluster, moves("p1"), dry_run=True)
    assert cluster.calls == []
    assert [o.outcome for o in report.outcomes] == [PLANNED]


def test_429_is_reported_and_never_retried_and_404_is_gone() -> None:
    cluster = FakeCluster({n: running(n) for n in ("p1", "p2", "p3")}, refuse={"p2"}, gone={"p3"})
    report = apply_moves(cluster, moves("p1", "p2", "p3"), dry_run=False)
    assert [o.outcome for o in report.outcomes] == [EVICTED, SKIPPED_PDB, GONE]
    assert "disruption budget" in report.outcomes[1].message
    assert [c for c in cluster.calls if c[0] == "evict"] == [("evict", "p1"), ("evict", "p2"), ("evict", "p3")]
    assert not report.complete and report.evicted == 1
    assert cluster.leases[LEASE_NAME]["spec"]["holderIdentity"] is None  # released


def test_a_changed_cluster_stops_the_run_before_the_wave() -> None:
    cluster = FakeCluster({"p1": running("p1"), "p2": running("p2", node_name="c")})
    report = apply_moves(cluster, moves("p1", "p2"), dry_run=False, wave_size=1)
    assert [o.outcome for o in report.outcomes] == [EVICTED, "not run"]
    assert "p2 is on c, planned a" in report.stopped
    assert ("evict", "p2") not in cluster.calls


def test_a_replaced_pod_stops_the_run() -> None:
    cluster = FakeCluster({"p1": {"metadata": {"name": "p1", "uid": "other"}, "spec": {"nodeName": "a"}}})
    report = apply_moves(cluster, moves("p1"), dry_run=False)
    assert "was replaced" in report.stopped and not any(c[0] == "evict" for c in cluster.calls)


def test_a_held_lease_refuses_a_second_run() -> None:
    cluster = FakeCluster({"p1": running("p1")})
    from kubeplace.rebalance.apply import Lease

    Lease(cluster, "kubeplace-system", "first").acquire()
    with pytest.raises(LeaseHeld, match="held by first"):
        apply_moves(cluster, moves("p1"), dry_run=False, holder="second")
    assert not any(c[0] == "evict" for c in cluster.calls)


def test_kubeplace_scheduled_targets_go_to_the_configmap_and_the_report_file(tmp_path: Path) -> None:
    cluster = FakeCluster({"p1": running("p1")})
    report = apply_moves(cluster, moves("p1", scheduler="kubeplace"), dry_run=False, report_path=tmp_path / "r.json")
    assert report.targets_configmap == f"kubeplace-system/{TARGETS_CONFIGMAP}"
    entries = json.loads(cluster.config_maps[TARGETS_CONFIGMAP]["targets.json"])
    assert entries == [{"namespace": "ns", "evicted": "p1", "owner": "ReplicaSet/rs", "from": "a", "to": "b"}]
    assert "expires" in cluster.config_maps[TARGETS_CONFIGMAP]
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["outcome"] == EVICTED


def test_an_interrupted_run_leaves_a_report(tmp_path: Path) -> None:
    cluster = FakeCluster({n: running(n) for n in ("p1", "p2")})
    original = cluster.evict

    def evict(namespace: str, name: str, uid: str, dry_run: bool = False) -> None:
        if name == "p2":
            raise KeyboardInterrupt
        original(namespace, name, uid, dry_run)

    cluster.evict = evict  # type: ignore[method-assign]
    report = apply_moves(cluster, moves("p1", "p2"), dry_run=False, report_path=tmp_path / "r.json")
    assert report.interrupted
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["interrupted"] and [r["outcome"] for r in saved["results"]] == [EVICTED, "not run"]


# --------------------------------------------------------------------------- CLI on files


def cluster_file(tmp_path: Path) -> Path:
    objects = [node(n, 4000, 16384) for n in ("a", "b", "c", "d")]
    objects += [pod(f"p{i}", "ns", 500, 256, node_name="a", labels={"app": "web"}) for i in range(8)]
    objects += [pod("agent", "kube-system", 100, 64, node_name="a", owner=("DaemonSet", "agent")),
                pdb("web", "ns", "web", 3)]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, ["rebalance", *args, "--time-limit", "5", "--workers", "1"])


def test_cli_plans_on_files_as_json(tmp_path: Path) -> None:
    result = invoke(str(cluster_file(tmp_path)), "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["moves"]) == 3  # the PDB allows 3 disruptions
    assert {m["from"] for m in doc["moves"]} == {"a"}
    assert set(doc["moves"][0]) >= {"namespace", "name", "from", "to"}
    assert doc["summary"]["pods_moved"] == 3
    assert doc["summary"]["objective_after"] < doc["summary"]["objective_before"]
    assert {"pod": "kube-system/agent", "reason": "DaemonSet pod"} in doc["excluded"]
    assert doc["apply"]["dry_run"] is True


def test_cli_table_and_yaml_and_budgets(tmp_path: Path) -> None:
    path = str(cluster_file(tmp_path))
    table = invoke(path, "--max-moves", "1")
    assert table.exit_code == 0, table.output
    assert "POD" in table.stdout and "dry run: nothing evicted" in table.stdout
    assert "1 pod(s) moved" in table.stdout
    doc = yaml.safe_load(invoke(path, "--max-moves-per-node", "2", "-o", "yaml").stdout)
    assert doc["summary"]["pods_moved"] == 2


def test_cli_make_room(tmp_path: Path) -> None:
    from kubeplace_bench.rebalance_clusters import defrag

    objects, key = defrag(2, n_nodes=4)
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    result = invoke(str(path), "--make-room-for", key, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["summary"]["fits"] and doc["summary"]["proven_minimal"]
    none = invoke(str(path), "--make-room-for", key, "--max-moves", "0")
    assert none.exit_code == 1 and "none within the budget" in none.stdout


@pytest.mark.parametrize("args, message", [
    (["--exclude-selector", "a in (b"], "--exclude-selector"),
    (["--make-room-for", "ns/nothing"], "no pending pod or gang ns/nothing"),
    (["--apply"], "--apply needs the live cluster"),
])  # fmt: skip
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = invoke(str(cluster_file(tmp_path)), *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert message in result.stderr or "a in (b" in result.stderr


def test_cli_malformed_file_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\napiVersion: v1\nmetadata: [\n")
    result = invoke(str(bad))
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
