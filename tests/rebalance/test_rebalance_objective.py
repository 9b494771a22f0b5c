"""Rebalance optimises and reports the profile's own objective: the score plugins' terms, measured
by the same evaluator as ``plan`` (``models.evaluate``), whatever the objective is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.framework import FragmentationTerm, LoadBalanceTerm, NodesUsedTerm, Objective
from kubeplace.models.linear import LinearBuilder
from kubeplace.models.linear_terms import SCALE, balance_cut
from kubeplace.rebalance.layout import build_layout
from kubeplace.rebalance.movable import Rules
from kubeplace.rebalance.solve import Settings, rebalance
from kubeplace.rebalance.state import state_of
from kubeplace_bench.rebalance_clusters import node, pod

HEADER = "apiVersion: kubeplace.io/v1alpha1\nkind: PlacementConfiguration\n"
FAST = ["--time-limit", "5", "--workers", "1"]


def fragmented() -> list[dict[str, Any]]:
    """Three 2-GPU nodes: a 1-GPU pod on a, another on b, a 2-GPU pod on c. The lone free GPU
    of a and of b is useless to the 2-GPU shape; moving b's pod to a frees b whole."""
    return [node("a", 16000, 65536, 2), node("b", 16000, 65536, 2), node("c", 16000, 65536, 2),
            pod("one-a", "ml", 1000, 1024, 1, node_name="a", owner=("ReplicaSet", "ra")),
            pod("one-b", "ml", 1000, 1024, 1, node_name="b", owner=("ReplicaSet", "rb")),
            pod("two-c", "ml", 2000, 2048, 2, node_name="c", owner=("ReplicaSet", "rc"))]


def write(tmp_path: Path, objects: list[dict[str, Any]], objective: str) -> tuple[Path, Path]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(objects))
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + f"profiles:\n- objective: {objective}\n")
    return cluster, config


def cli(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_a_defrag_profile_rebalances_by_fragmentation(tmp_path: Path) -> None:
    cluster, config = write(tmp_path, fragmented(), "defrag")
    doc = cli("rebalance", str(cluster), "--config", str(config), "-o", "json", *FAST)
    s = doc["summary"]
    assert s["profile"] == "defrag"
    assert s["objective_before"] == pytest.approx(1.0)  # one GPU stranded: half of a's and half of b's
    assert s["objective_after"] == pytest.approx(0.0)
    assert [(m["name"], m["from"], m["to"]) for m in doc["moves"]] in (
        [("one-b", "b", "a")], [("one-a", "a", "b")])


def hot() -> list[dict[str, Any]]:
    """Three 4-CPU nodes, every pod (500m) on a."""
    return [node(n, 4000, 16384) for n in "abc"] + [
        pod(f"p{i}", "web", 500, 256, node_name="a", owner=("ReplicaSet", "web")) for i in range(6)]


@pytest.mark.parametrize("objective", ["balance", "binpack"])
def test_rebalance_reports_what_plan_reports(tmp_path: Path, objective: str) -> None:
    cluster, config = write(tmp_path, hot(), objective)
    rebalanced = cli("rebalance", str(cluster), "--config", str(config), "-o", "json", *FAST)["summary"]
    planned = cli("plan", str(cluster), "--config", str(config), "-o", "json", *FAST)["summary"]
    assert rebalanced["profile"] == planned["profile"] == objective
    assert rebalanced["objective_before"] == pytest.approx(planned["objective_before"])
    assert rebalanced["objective_after"] <= rebalanced["objective_before"]


def test_the_profile_flag_chooses_the_objective_and_its_terms(tmp_path: Path) -> None:
    cluster, config = write(tmp_path, fragmented(), "balance")
    doc = cli("rebalance", str(cluster), "--config", str(config), "--profile", "binpack", "-o", "json", *FAST)
    assert doc["summary"]["profile"] == "binpack"
    assert doc["summary"]["objective_before"] == 3 and doc["summary"]["objective_after"] == 2  # nodes in use
    state = state_of([(o, "t") for o in fragmented()])
    terms = {o: build_layout(state, Rules(), Configuration(), Profile(objective=o)).terms for o in Objective}
    assert all(isinstance(t, LoadBalanceTerm) for t in terms[Objective.BALANCE])
    assert terms[Objective.BINPACK] == (NodesUsedTerm(1),)
    assert terms[Objective.DEFRAG] == (FragmentationTerm(1),)


def test_the_exact_objective_is_the_models_evaluator() -> None:
    state = state_of([(o, "t") for o in fragmented()])
    layout = build_layout(state, Rules(), Configuration(), Profile(objective=Objective.DEFRAG))
    plan = rebalance(layout, Settings(solver=SolverSettings(time_limit=5, workers=1)))
    assert plan.objective_before == pytest.approx(layout.value(layout.x0)) == pytest.approx(1.0)
    assert plan.objective_after == pytest.approx(0.0) and len(plan.moves) == 1


def test_one_balance_linearisation_exact_at_its_breakpoints() -> None:
    """The cut the plan and the rebalance share: at a breakpoint its least cost is the exact
    w * (u - mu)^2 in units of 1/SCALE (up to rounding), and never above it elsewhere."""
    lb = LinearBuilder()
    cols = lb.add_vars(np.zeros(1, np.int64), np.array([10]))
    cut = balance_cut(lb, cols, np.array([1000]), np.array([10]), used=0, capacity=10_000, resource="cpu",
                      weight=2, mu=0.3)
    assert cut is not None
    for pods in range(11):
        values = np.zeros(lb.n_vars, np.int64)
        values[cols[0]] = pods
        cut.hint(values)
        u = pods / 10
        exact = SCALE * 2 * (u - 0.3) ** 2
        assert values[cut.cost] <= exact + 2
        if round(u / 0.05, 6).is_integer():
            assert values[cut.cost] == pytest.approx(exact, abs=2)
