"""The openb pod list as a simulation trace: arrivals at creation_time, durations from deletion_time."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.simulate.engine import simulate
from kubeplace.simulate.names import API_LATENCY
from kubeplace.simulate.sweep import setup_of
from kubeplace.simulate.trace import parse_trace, trace_document
from kubeplace_bench.simulate_openb import openb_cluster, openb_trace

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,32768,2,V100M32\n"
HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
          "scheduled_time\n")


def test_pods_arrive_at_creation_and_run_until_deletion(tmp_path: Path) -> None:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(HEADER + "p0,4000,8192,1,1000,,LS,Running,0,100,0\n"
                                                "p1,4000,8192,2,1000,,LS,Running,10,50,10\n"
                                                "p2,1000,1024,0,0,,LS,Running,20,,20\n")
    trace = openb_trace(tmp_path / "pods.csv")
    assert [(a.key, a.at, a.duration) for a in trace.arrivals] == [
        ("openb/p0", 0.0, 100.0), ("openb/p1", 10.0, 40.0), ("openb/p2", 20.0, None)]
    assert parse_trace(trace_document(trace.arrivals), "t").arrivals[1].duration == 40.0
    result = simulate(openb_cluster(tmp_path / "nodes.csv"), trace, "fgd", setup_of(None, 0))
    starts = {r.key: r.start for r in result.pods}
    # p1 needs both GPUs: after p0, which left its duration after its binding landed
    assert starts == pytest.approx({"openb/p0": API_LATENCY, "openb/p1": 100.0 + 2 * API_LATENCY,
                                    "openb/p2": 20.0 + API_LATENCY})
    assert result.summary.refused == 0


def test_a_deletion_before_creation_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pods.csv").write_text(HEADER + "p0,4000,8192,1,1000,,LS,Running,50,10,50\n")
    with pytest.raises(InputError, match="deletion_time 10 before creation_time 50"):
        openb_trace(tmp_path / "pods.csv")


def test_openb_simulate_replays_its_schedulers_at_once_the_same_as_one_after_the_other(tmp_path: Path) -> None:
    """``bench openb-simulate --scheduler kubeplace --scheduler fgd``: one process per scheduler
    (a saturating openb list takes minutes per scheduler), the same results as in one process."""
    import json

    from click.testing import CliRunner

    from kubeplace_bench.commands_simulate import openb_simulate_command

    (tmp_path / "nodes.csv").write_text(NODES + "n1,16000,65536,4,V100M32\n")
    (tmp_path / "pods.csv").write_text(HEADER + "".join(
        f"p{k},{1000 * (1 + k % 3)},4096,{k % 3},{(1000, 500, 1000)[k % 3] if k % 3 else 0},,LS,Running,{k},,{k}\n"
        for k in range(12)))
    args = ["--nodes", str(tmp_path / "nodes.csv"), "--pods", str(tmp_path / "pods.csv"),
            "--scheduler", "kubeplace", "--scheduler", "fgd", "-o", "json"]

    def clockless(out: str) -> object:
        document = json.loads(out)
        for case in document["cases"] if isinstance(document, dict) and "cases" in document else document:
            case["summary"] = {k: v for k, v in case["summary"].items() if k not in ("wall_seconds", "cpu_seconds")}
        return document

    at_once = CliRunner().invoke(openb_simulate_command, [*args, "--workers", "2"])
    alone = CliRunner().invoke(openb_simulate_command, [*args, "--workers", "1"])
    assert at_once.exit_code == alone.exit_code == 0, at_once.output
    assert "fgd: 12 pods" in at_once.stderr and "kubeplace: 12 pods" in at_once.stderr
    assert clockless(at_once.stdout) == clockless(alone.stdout)
