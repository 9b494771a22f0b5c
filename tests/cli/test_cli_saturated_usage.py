"""Sums of requests saturate at FULL (2^55) in the model; the utilisation kubeplace prints is the
true figure (or, where the true one is not known, '>' the saturated one), never the saturated sum
as if it were the load: a node whose pods ask for 5x its allocatable near the quantity limit is
at 500%, not 400% (plan's summary in text and JSON, --preempt, rebalance's reasons, the report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from tests.builders import node, pod

FAST = ("--time-limit", "5", "--workers", "1")
NEAR_LIMIT = {"memory": "9007199254740991", "cpu": "9007199254740"}
"""Just under 2^53 bytes, and milli-CPU."""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def cluster(tmp_path: Path, resource: str, owner: bool = False, nodes: int = 1) -> Path:
    big = NEAR_LIMIT[resource]
    other = {"memory": "8Gi", "cpu": "4"}
    other[resource] = big
    objects = [node(f"n{k + 1}").cpu(other["cpu"]).memory(other["memory"]) for k in range(nodes)]
    for i in range(5):  # bound: 5x the node's allocatable of the resource
        p = pod(f"big{i}").cpu("100m").memory("1Gi").on("n1")
        p = p.memory(big) if resource == "memory" else p.cpu(big)
        objects.append(p.owner("ReplicaSet", "big") if owner else p)
    objects.append(pod("web").cpu("100m").memory("1Gi"))
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([o.manifest() for o in objects]))
    return path


@pytest.mark.parametrize("resource", ["memory", "cpu"])
def test_plan_says_the_true_utilisation_beyond_the_saturated_sums(tmp_path: Path, resource: str) -> None:
    path = cluster(tmp_path, resource)
    code, out, err = run("plan", str(path), *FAST)
    assert code in (0, 1), err
    assert f"{resource} 500.0% -> 500.0%" in out, out
    code, out, err = run("plan", str(path), "-o", "json", *FAST)
    use = json.loads(out)["summary"]["utilisation"][resource]
    assert use["before"] == pytest.approx(5.0) and use["after"] == pytest.approx(5.0), use
    code, out, err = run("plan", str(path), "--preempt", "-o", "json", *FAST)
    assert code in (0, 1), err
    assert json.loads(out)["summary"]["utilisation"][resource]["before"] == pytest.approx(5.0)


def test_the_report_says_the_true_utilisation(tmp_path: Path) -> None:
    path = cluster(tmp_path, "memory")
    report = tmp_path / "report.html"
    code, _, err = run("plan", str(path), "--report", str(report), *FAST)
    assert code in (0, 1), err
    assert "500.0% → 500.0%" in report.read_text()


@pytest.mark.parametrize("resource", ["memory", "cpu"])
def test_rebalance_never_prints_a_saturated_sum_as_the_load(tmp_path: Path, resource: str) -> None:
    path = cluster(tmp_path, resource, owner=True, nodes=2)
    code, out, err = run("rebalance", str(path), *FAST)
    assert code in (0, 1), err
    why = next(line for line in out.splitlines() if "balance" in line and "->" in line)
    assert "n1 >400%->400%, n2 0%->100%" in why, out  # 5 pods: more than 4x is all the model knows


@pytest.mark.parametrize("command", ["plan", "rebalance"])
def test_a_node_near_the_quantity_limit_keeps_its_balance_term(tmp_path: Path, command: str) -> None:
    """Nodes of 9 billion CPUs, one two-thirds full: its balance cut's offsets passed int64 (a
    traceback in plan and rebalance); a node of more than MAX_GRAINS grains counts coarser ones."""
    big = NEAR_LIMIT["cpu"]
    objects = [node("n1").cpu(big).memory("8Gi"), node("n2").cpu(big).memory("8Gi"),
               *(pod(f"w{i}").cpu(str(int(big) // 3)).memory("1Gi").on("n1").owner("ReplicaSet", "w")
                 for i in range(2)), pod("web").cpu(str(int(big) // 3)).memory("1Gi")]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([o.manifest() for o in objects]))
    code, out, err = run(command, str(path), *FAST)
    assert code in (0, 1) and "Traceback" not in out + err, (code, out, err)
    if command == "plan":
        assert "web" in out and "cpu 33.3% -> 50.0%" in out, out
    else:
        assert "balance cpu: n1 67%->33%, n2 0%->33%" in out, out


@pytest.mark.parametrize("command", ["plan", "rebalance"])
def test_a_huge_balance_weight_is_no_traceback(tmp_path: Path, command: str) -> None:
    """Cuts whose coefficients pass what the rows hold are left out (the exact objective still
    counts the node), not an OverflowError."""
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubeplace.io/v1alpha1\nkind: PlacementConfiguration\nprofiles:\n"
                      "- pluginConfig: [{name: Balance, args: {resources: [{name: cpu, weight: 1000000000000000},"
                      " {name: memory, weight: 9223372036854775807}]}}]\n")
    demo = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
    code, out, err = run(command, str(demo), "--config", str(config), *FAST)
    assert code in (0, 1) and "Traceback" not in out + err, (code, out, err)
