"""Where the benchmarks find the openb trace when none is given, and the gpu workload saying
which shapes it used."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeplace_bench import throughput_workloads
from kubeplace_bench.cluster_scenarios import OPENB_ENV, OPENB_NODES, OPENB_PODS, default_openb_dir

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,8,G2\nn1,32000,131072,4,V100M32\n"
PODS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\np0,4000,8192,1,1000,,LS,Running,0,,0\np1,2000,4096,1,500,,LS,Running,1,,1\n")


def trace_in(root: Path) -> Path:
    data = root / "shared" / "data" / "openb"
    data.mkdir(parents=True)
    (data / OPENB_NODES).write_text(NODES)
    (data / OPENB_PODS).write_text(PODS)
    return data


def test_the_trace_is_found_above_a_worktree_nested_deeper_than_the_checkout(tmp_path: Path) -> None:
    data = trace_in(tmp_path)
    module = tmp_path / "wt" / "h14-gpu" / "bench" / "cluster_scenarios.py"
    assert default_openb_dir({}, module) == data


def test_the_environment_variable_comes_first(tmp_path: Path) -> None:
    trace_in(tmp_path)
    assert default_openb_dir({OPENB_ENV: "/elsewhere"}, tmp_path / "a" / "b.py") == Path("/elsewhere")


def test_no_trace_anywhere_is_none(tmp_path: Path) -> None:
    (tmp_path / "shared" / "data" / "openb").mkdir(parents=True)  # no node list in it
    assert default_openb_dir({}, tmp_path / "a" / "b.py") is None


def test_the_gpu_workload_says_which_shapes_it_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = trace_in(tmp_path)
    monkeypatch.setenv(OPENB_ENV, str(data))
    traced = throughput_workloads.build("gpu", nodes=2, pods=None)
    assert any(n.startswith(f"shapes: the openb trace at {data} (the default)") for n in traced.notes)
    monkeypatch.setattr(throughput_workloads, "default_openb_dir", lambda: None)
    synthetic = throughput_workloads.build("gpu", nodes=2, pods=5)
    assert any(n.startswith("shapes: synthetic openb-like (no openb trace found") for n in synthetic.notes)


def test_synthetic_shapes_on_request_even_with_a_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OPENB_ENV, str(trace_in(tmp_path)))
    synthetic = throughput_workloads.build("gpu", nodes=2, pods=5, synthetic=True)
    assert any(n == "shapes: synthetic openb-like (--synthetic-gpu)" for n in synthetic.notes)
