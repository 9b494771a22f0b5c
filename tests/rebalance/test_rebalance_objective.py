"""Rebalance optimises and reports the profile's own objective: the score plugins' terms, measured
by the same evaluator as ``plan`` (``models.evaluate``), whatever the objective is."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.framework import FragmentationTerm, LoadBalanceTerm, NodesUsedTerm, Objective, PreferenceTerm
from kubeplace.models.linear import LinearBuilder
from kubeplace.models.linear_terms import SCALE, balance_cut
from kubeplace.models.preferences import POINTS_PER_UNIT
from kubeplace.models.terms import objective_value
from kubeplace.rebalance.cluster_state import state_of
from kubeplace.rebalance.layout import build_layout
from kubeplace.rebalance.model import Budgets, build_moves, objective_goal
from kubeplace.rebalance.movable import Rules
from kubeplace.rebalance.solve_moves import Settings, complete_hint, rebalance
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


def prefers(host: str) -> dict[str, Any]:
    """A preferred node affinity for the node named ``host`` (weight 100)."""
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}}]}}


def crossed() -> list[dict[str, Any]]:
    """Two like nodes, each running the pod that prefers the other: swapping them keeps the balance
    as it is and wins both pods their preferred node (NodeAffinity's score)."""
    return [node("a", 4000, 16384), node("b", 4000, 16384),
            pod("wants-b", "web", 500, 256, node_name="a", owner=("ReplicaSet", "rb"), affinity=prefers("b")),
            pod("wants-a", "web", 500, 256, node_name="b", owner=("ReplicaSet", "ra"), affinity=prefers("a"))]


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_rebalance_optimises_the_preferences_of_the_profile(backend: str) -> None:
    """The default profile's preference terms are in the move model's goal, as in ``plan``'s: the
    exact stage swaps the pods (before, the goal held the balance only, and nothing moved)."""
    state = state_of([(o, "test") for o in crossed()])
    config = Configuration()
    layout = build_layout(state, Rules(), config, config.profile(None))
    assert {type(t) for t in layout.terms} == {LoadBalanceTerm, PreferenceTerm}
    plan = rebalance(layout, Settings(solver=SolverSettings(backend=backend, time_limit=5.0, workers=1)))
    assert sorted((m.name, m.source, m.target) for m in plan.moves) == [("wants-a", "b", "a"), ("wants-b", "a", "b")]
    balance_only = tuple(t for t in layout.terms if isinstance(t, LoadBalanceTerm))
    assert plan.objective_before == pytest.approx(layout.value(layout.x0))
    assert plan.objective_after == pytest.approx(evaluate_terms(layout, balance_only))
    assert plan.objective_before - plan.objective_after == pytest.approx(2 * 2 * 100 / POINTS_PER_UNIT)


def evaluate_terms(layout: Any, terms: tuple[Any, ...]) -> float:
    """The exact value of ``terms`` for the layout as it runs now."""
    return objective_value(layout.problem, layout.assignment(layout.x0), terms)


def spread_out() -> list[dict[str, Any]]:
    """Four replicas with a ScheduleAnyway spread over hostnames and a preferred anti-affinity
    among themselves (a self-counted preference each), three on a, one on b, and a pod preferring c."""
    spread = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
               "labelSelector": {"matchLabels": {"app": "r"}}}]
    anti = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                           "labelSelector": {"matchLabels": {"app": "r"}}}}]}}
    replicas = [pod(f"r{i}", "web", 500, 256, node_name="a" if i < 3 else "b", labels={"app": "r"},
                    owner=("ReplicaSet", "r"), affinity=anti) for i in range(4)]
    for r in replicas:
        r["spec"]["topologySpreadConstraints"] = spread
    return [node("a", 4000, 16384), node("b", 4000, 16384), node("c", 4000, 16384), *replicas,
            pod("wants-c", "web", 500, 256, node_name="a", owner=("ReplicaSet", "c"), affinity=prefers("c"))]


def test_the_move_models_preference_goal_is_the_exact_preference_value() -> None:
    """At the current placement and at another one, the move model's goal of the preference terms
    (node preferences and self-counted domain preferences) counts SCALE per unit of the exact value."""
    state = state_of([(o, "test") for o in spread_out()])
    config = Configuration()
    full = build_layout(state, Rules(), config, config.profile(None))
    prefs = tuple(t for t in full.terms if isinstance(t, PreferenceTerm))
    assert len(prefs) >= 2
    layout = replace(full, terms=prefs)
    model = build_moves(layout, Budgets())
    mu = np.zeros(len(layout.problem.resources))
    goal = objective_goal(model, mu)
    everywhere = layout.x0.copy()
    everywhere[:, :] = 0
    for c in range(layout.n_classes):  # every pod of the class on the class's first candidate node
        first = int(model.pair_node[model.pair_cls == c][-1])
        everywhere[c, first] = layout.x0[c].sum()
    for y in (layout.x0, everywhere):
        values = complete_hint(model, goal, y)
        linear = sum(c * int(values[v]) for v, c in goal)
        assert linear == round(SCALE * layout.value(y)), y
