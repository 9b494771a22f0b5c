"""`kubeplace plan --preempt`: the victims in every output, the order in the summary, the
cluster's PodDisruptionBudgets read only then."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from tests.builders import namespace, node, pod
from tests.kube.fake_apiserver import FakeApiServer, serving
from tests.kube.test_kube_client import write_kubeconfig
from tests.models.test_preemption_rules import pdb, running

SCENARIOS = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"
FAST = ["--time-limit", "5", "--workers", "1"]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_preempt_lists_victims_and_their_preemptors_in_json_and_yaml() -> None:
    cluster = str(SCENARIOS / "preempt-lowest-victims" / "cluster.yaml")
    for output in ("json", "yaml"):
        code, out, err = run("plan", cluster, "--preempt", "-o", output, *FAST)
        assert code == 0, err
        doc = json.loads(out) if output == "json" else yaml.safe_load(out)
        assert [(p["name"], p["node"]) for p in doc["placements"]] == [("high", "n2")]
        assert doc["preemptions"] == [
            {"namespace": "default", "name": "l1", "node": "n2", "priority": 100, "for": ["default/high"],
             "uid": "uid-default-l1"},
            {"namespace": "default", "name": "l2", "node": "n2", "priority": 100, "for": ["default/high"],
             "uid": "uid-default-l2"}]
        summary = doc["summary"]
        assert summary["verified"] is True
        assert summary["preemption"]["order"][:2] == ["pods placed net of pods evicted, by priority",
                                                      "highest victim priority"]
        assert summary["preemption"] | {"order": None} == {
            "order": None, "attempts": 1, "victims": 2, "preemptors": 1, "highestVictimPriority": 100,
            "pdbViolations": 0, "victimCost": 2, "status": "optimal"}


def test_preempt_table_shows_the_victims_and_the_order() -> None:
    code, out, _ = run("plan", str(SCENARIOS / "preempt-never" / "cluster.yaml"), "--preempt", *FAST)
    assert code == 0
    assert "EVICT" in out and "low" in out and "default/high" in out
    assert "Preemption: 1 pod(s) evicted for 1 pod(s), highest victim priority 100" in out
    assert ("Preemption order: pods placed net of pods evicted, by priority > highest victim priority > "
            "PodDisruptionBudget violations > victims, weighted by priority > the profile's objective") in out
    assert "preemption: not eligible due to preemptionPolicy=Never." in out


def test_without_preempt_nothing_is_evicted_and_no_preemption_keys() -> None:
    code, out, _ = run("plan", str(SCENARIOS / "preempt-never" / "cluster.yaml"), "-o", "json", *FAST)
    assert code == 0
    doc = json.loads(out)
    assert "preemptions" not in doc and "preemption" not in doc["summary"] and doc["placements"] == []


def test_preempt_reads_the_clusters_budgets(tmp_path: Path) -> None:
    nodes = [node("n1").cpu(4).manifest(), node("n2").cpu(4).manifest()]
    pods = [running("guarded", "n1", 4, 1).label("app", "db").manifest(), running("free", "n2", 4, 1).manifest(),
            pod("high").cpu(4).priority(10).manifest()]
    api = FakeApiServer(nodes, pods, [namespace("default").manifest()], [pdb("db", 0)])
    with serving(api) as url:
        kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", url))
        code, out, err = run("plan", "--kubeconfig", kubeconfig, "--preempt", "-o", "json", *FAST)
        assert code == 0, err
        assert run("plan", "--kubeconfig", kubeconfig, "-o", "json", *FAST)[0] == 0
    assert [v["name"] for v in json.loads(out)["preemptions"]] == ["free"]
    listed = [path for _, path, _, _ in api.requests if "poddisruptionbudgets" in path]
    assert len(listed) == 1  # by --preempt only
