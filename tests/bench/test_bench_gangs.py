"""The gang benchmark: workloads feasible by construction, both schedulers, the command."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.models.config import SolverSettings
from kubeplace_bench.gangs import feasible_workload, run_coscheduling, run_kubeplace, to_snapshot


def test_workloads_are_deterministic_mixed_and_within_capacity() -> None:
    w = feasible_workload(7, nodes=20, gangs=30)
    again = feasible_workload(7, nodes=20, gangs=30)
    assert w.gangs == again.gangs and (w.capacity == again.capacity).all()
    assert all(2 <= len(g) <= 64 for g in w.gangs)
    assert any(len(set(g)) > 1 for g in w.gangs)  # a launcher and workers of another shape
    load = np.array([[cpu, mem, gpu, 1] for g in w.gangs for cpu, mem, gpu in g]).sum(axis=0)
    assert (load <= w.capacity.sum(axis=0)).all()


def test_snapshot_declares_every_gang_with_its_min_member() -> None:
    w = feasible_workload(3, nodes=10, gangs=5)
    snap = to_snapshot(w)
    assert len(snap.pod_groups) == len(w.gangs) and len(snap.pending) == w.pods
    assert [g.min_member for g in snap.pod_groups] == [len(g) for g in w.gangs]


def test_both_schedulers_place_an_easy_workload_whole() -> None:
    w = feasible_workload(1, nodes=10, gangs=4, max_pods=4)
    kp = run_kubeplace(w, SolverSettings(time_limit=2, workers=1))
    co = run_coscheduling(w)
    assert kp.gangs_placed == co.gangs_placed == len(w.gangs) and kp.detail["violations"] == 0


def test_bench_gangs_command_prints_a_table_and_json() -> None:
    result = CliRunner().invoke(main, ["bench", "gangs", "--seeds", "1", "--nodes", "8", "--gangs", "4",
                                       "--time-limit", "2", "--no-throughput"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].split()[:4] == ["seed", "nodes", "gangs", "pods"]
    doc = json.loads(result.output.strip().splitlines()[-1])
    assert doc["feasible_workloads"][0]["seed"] == 1
    bad = CliRunner().invoke(main, ["bench", "gangs", "--seeds", "x"])
    assert bad.exit_code == 2
