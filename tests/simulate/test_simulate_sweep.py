"""Sweeps: the product of the axes, in order, the same results in local processes as in one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.simulate import sweep
from kubeplace.simulate.sweep import clockless, read_sweep, run_cases
from kubeplace.simulate.world import World
from tests.simulate.sim_builders import small_sweep

CHECKOUT = Path(__file__).resolve().parents[2]


def test_a_sweep_is_the_product_of_its_axes_in_order(tmp_path: Path) -> None:
    specs = read_sweep(small_sweep(tmp_path))
    assert [(s.scheduler, s.seed, s.label) for s in specs] == [
        ("kubeplace", 0, "seed 0"), ("kubeplace", 1, "seed 1"), ("fgd", 0, "seed 0"), ("fgd", 1, "seed 1")]
    assert specs[0].cluster == (tmp_path / "cluster.yaml",)


def test_processes_give_the_results_of_one_process(tmp_path: Path) -> None:
    specs = read_sweep(small_sweep(tmp_path))
    serial = run_cases(specs, workers=1)
    parallel = run_cases(specs, workers=2)
    assert all(c is not None for c in serial + parallel)
    assert clockless(serial) == clockless(parallel)
    assert [c.result.summary.scheduler for c in serial if c is not None] == ["kubeplace", "kubeplace", "fgd", "fgd"]
    assert all(c.result.summary.refused == 0 and c.result.summary.never_started == 0 for c in serial
               if c is not None)


def test_the_workers_read_no_file_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases' inputs are read once and handed to the processes (a saturating openb trace takes
    about 30 s to read): a trace file gone once read is not missed."""
    specs = read_sweep(small_sweep(tmp_path))
    read = sweep.read_trace

    def read_once(path: Path) -> Any:
        trace = read(path)
        path.unlink()
        return trace

    monkeypatch.setattr(sweep, "read_trace", read_once)
    cases = run_cases(specs[::2], workers=2)
    assert [c.result.summary.scheduler for c in cases if c is not None] == ["kubeplace", "fgd"]


def test_simulate_runs_its_cases_in_one_process_per_cpu_by_default(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``kubeplace simulate --scheduler A --scheduler B`` replays A and B at once on two CPUs."""
    asked = []

    def recorded(specs: Any, workers: int | None = None, on_done: Any = None) -> list[None]:
        asked.append((len(specs), workers))
        return [None] * len(specs)

    monkeypatch.setattr(sweep, "run_cases", recorded)
    small_sweep(tmp_path)
    args = ["simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--workload", str(tmp_path / "trace.yaml"),
            "--scheduler", "kubeplace", "--scheduler", "fgd", "-o", "json"]
    CliRunner().invoke(main, args)
    CliRunner().invoke(main, [*args, "--workers", "1"])
    assert asked == [(2, None), (2, 1)]


BLOCK_RAY = """
import sys
class NoRay:
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("no ray here")
sys.meta_path.insert(0, NoRay())
from kubeplace.cli.main import main
main()
"""


def test_without_ray_installed_only_the_ray_option_needs_it(tmp_path: Path) -> None:
    sweep = small_sweep(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", BLOCK_RAY, "simulate", "sweep", str(sweep), *args], cwd=CHECKOUT,
                              capture_output=True, text=True, timeout=300)

    refused = run("--ray", "auto")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == "error: --ray: Ray is not installed: pip install 'kubeplace[ray]'\n"
    local = run("--workers", "2")
    assert local.returncode == 0, local.stderr
    assert "[4/4]" in local.stderr and "kubeplace" in local.stdout


def _cut_short_in_the_second_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C inside the second case, as the terminal's SIGINT reaches the replay."""
    real = sweep.simulate
    calls: list[int] = []

    def interrupted(self: World, until: float, departures: bool = True) -> int:
        raise KeyboardInterrupt

    def second_cut(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) != 2:
            return real(*args, **kwargs)
        with monkeypatch.context() as patch:
            patch.setattr(World, "happen", interrupted)
            return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "simulate", second_cut)


@pytest.mark.parametrize("output", ["json", "table"])
def test_ctrl_c_keeps_stdout_whole_and_does_not_count_the_case_cut_short(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str) -> None:
    """stdout is the results alone (with -o json, one JSON document: the case cut short says
    ``interrupted`` in its summary); the line saying how many finished goes to stderr, and the
    case cut short is not among them."""
    path = small_sweep(tmp_path)
    _cut_short_in_the_second_case(monkeypatch)
    report = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["simulate", "sweep", str(path), "--workers", "1", "-o", output,
                                       "--report", str(report)])
    assert result.exit_code == 0, result.output
    assert "interrupted" not in result.stdout.replace('"interrupted": ', "")
    assert result.stderr.splitlines()[1:] == [
        "case 2 seed 1: interrupted at simulated second 0.649, 0/0 started",
        "interrupted: 1 of 4 case(s) finished, 1 cut short (its results cover the simulated time it reached); "
        "the results cover what ran"]
    if output == "json":
        cases = json.loads(result.stdout)
        assert [(c["case"], c["summary"]["interrupted"]) for c in cases] == [("seed 0", False), ("seed 1", True)]
    else:
        assert [line.split()[:2] for line in result.stdout.splitlines()[1:]] == [["seed", "0"], ["seed", "1"]]
    assert "interrupted: the results cover the simulated time until then" in report.read_text()


def test_ctrl_c_between_two_replays_still_writes_the_cases_finished(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the second case reads its files or sets up its world, outside the replay."""
    path = small_sweep(tmp_path)
    real = sweep.simulate
    calls: list[int] = []

    def second_refused(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "simulate", second_refused)
    result = CliRunner().invoke(main, ["simulate", "sweep", str(path), "--workers", "1", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert [c["summary"]["interrupted"] for c in json.loads(result.stdout)] == [False]
    assert result.stderr.splitlines()[-1] == "interrupted: 1 of 4 case(s) finished; the results cover what ran"


def test_ctrl_c_in_the_single_simulation_keeps_its_json_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In one process (``--workers 1``; by default the cases run in one process per CPU, whose
    Ctrl-C at the terminal is the next test's)."""
    small_sweep(tmp_path)
    _cut_short_in_the_second_case(monkeypatch)
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--workload",
                                       str(tmp_path / "trace.yaml"), "--scheduler", "fgd", "--seed", "0,1,2",
                                       "--workers", "1", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert [c["summary"]["interrupted"] for c in json.loads(result.stdout)] == [False, True]
    assert result.stderr.startswith("interrupted: 1 of 3 case(s) finished, 1 cut short")


def test_ctrl_c_at_the_terminal_with_local_processes_keeps_the_json_whole(tmp_path: Path) -> None:
    """SIGINT to the whole process group, as a terminal's Ctrl-C (the worker processes get it
    too), once the first of six cases has finished."""
    path = small_sweep(tmp_path)
    document = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**document, "schedulers": ["kubeplace"], "seeds": list(range(6))}))
    process = subprocess.Popen([sys.executable, "-m", "kubeplace.cli.main", "simulate", "sweep", str(path),
                                "--workers", "2", "-o", "json"], cwd=CHECKOUT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first.startswith("[1/6] case "), first
        os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 0 and "Traceback" not in stderr, stderr
    finished = int(stderr.split("interrupted: ")[1].split(" of ")[0])
    assert 1 <= finished < 6
    assert sum(not c["summary"]["interrupted"] for c in json.loads(stdout)) == finished
