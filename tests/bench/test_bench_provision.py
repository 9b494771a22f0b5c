"""``bench provision-scale``: plan --provision on a synthetic backlog, the greedy's cost beside it."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace_bench.provision_scale import ProvisionScaleSpec, catalogue_of, run_capacity_workload


def test_the_catalogue_has_every_offering_asked_for() -> None:
    types = catalogue_of(ProvisionScaleSpec(types=30, zones=3))
    assert len(types) == len({t.name for t in types}) == 30
    assert {(o.zone, o.capacity_type) for t in types for o in t.offerings} == {
        (zone, kind) for zone in ("zone-a", "zone-b", "zone-c") for kind in ("on-demand", "spot")}


def test_bench_provision_scale_reports_a_verified_plan_beside_the_greedy() -> None:
    result = CliRunner().invoke(main, ["bench", "provision-scale", "--pods", "150", "--types", "36", "--zones", "2",
                                       "--spot-pool", "--time-limit", "4", "-o", "json"])
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)
    assert run["verified"] and run["pods_placed"] == 150 and run["offerings"] == 36 * 2 * 2
    assert 0 < run["cost_per_hour"] <= run["greedy_cost_per_hour"]
    assert run["bound_per_hour"] is None or run["bound_per_hour"] <= run["cost_per_hour"]


def test_bench_provision_scale_plans_a_capacity_workload_offline() -> None:
    """``--workload``: the backlog of ``bench capacity`` from its catalogue (19 types, 114
    offerings) and NodePools, without a cluster; one row per workload."""
    result = CliRunner().invoke(main, ["bench", "provision-scale", "--workload", "batch", "--workload", "gpu-gangs",
                                       "--seed", "0", "--scale", "0.2", "--time-limit", "4", "-o", "json"])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)
    assert [run["workload"] for run in runs] == ["batch", "gpu-gangs"]
    assert [run["pods"] for run in runs] == [12, 4]
    for run in runs:
        assert run["verified"] and run["pods_placed"] == run["pods"] and run["offerings"] == 114
        assert 0 < run["cost_per_hour"] <= run["greedy_cost_per_hour"]
        assert run["bound_per_hour"] is not None and run["bound_per_hour"] <= run["cost_per_hour"]


def test_bench_provision_scale_refuses_a_workload_without_a_backlog() -> None:
    result = CliRunner().invoke(main, ["bench", "provision-scale", "--workload", "consolidation"])
    assert result.exit_code == 2 and "consolidation" in result.output


def test_the_batch_backlog_is_proved_optimal() -> None:
    """bench capacity's mixed-shape batch (60 pods, seed 0): the LP's bound stays 2% under the
    optimum there; the exact model over node slots finds 5.068/h and proves it."""
    run = run_capacity_workload("batch", 0, 1.0, 20.0)
    assert run.verified and run.pods_placed == 60
    assert run.status == "optimal" and run.gap == 0.0
    assert run.cost_per_hour == run.bound_per_hour == 5.068 and run.greedy_cost_per_hour == 5.376
