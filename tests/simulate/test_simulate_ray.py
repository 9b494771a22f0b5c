"""Sweeps on a real local Ray (two CPUs, tests/simulate/conftest.py): the results of one
process, streamed as they finish, a worker killed mid-case retried and counted once, Ctrl-C
returning what finished, an unreachable address refused in one line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.simulate.engine import Case
from kubeplace.simulate.sweep import clockless, read_sweep, run_cases
from tests.simulate.sim_builders import small_sweep

pytest.importorskip("ray", reason="Ray is not installed (pip install 'kubeplace[ray]')")

from kubeplace.simulate.ray_sweep import run_cases_on_ray  # (after the skip: it imports Ray)

pytestmark = pytest.mark.slow


def _json_without_clock(document: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for entry in document:
        del entry["summary"]["wall_seconds"], entry["summary"]["cpu_seconds"]
    return document


def test_ray_gives_the_results_of_one_process_in_the_sweeps_order(tmp_path: Path, local_ray: ModuleType) -> None:
    sweep = str(small_sweep(tmp_path))
    runner = CliRunner()
    serial = runner.invoke(main, ["simulate", "sweep", sweep, "--workers", "1", "-o", "json"])
    on_ray = runner.invoke(main, ["simulate", "sweep", sweep, "--ray", "auto", "-o", "json"])
    assert serial.exit_code == 0 and on_ray.exit_code == 0, on_ray.output
    assert _json_without_clock(json.loads(on_ray.stdout)) == _json_without_clock(json.loads(serial.stdout))
    assert [e["case"] for e in json.loads(on_ray.stdout)] == ["seed 0", "seed 1", "seed 0", "seed 1"]
    progress = [line for line in on_ray.stderr.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] for line in progress] == ["[1/4", "[2/4", "[3/4", "[4/4"]


def _descendant_of_this_process(pid: int) -> bool:
    while pid > 1:
        if pid == os.getpid():
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def _running_case_workers() -> list[int]:
    """The Ray worker processes of this test session running a case now (Ray titles a busy
    worker ``ray::<function>``)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.startswith(b"ray::simulate_case") and _descendant_of_this_process(int(entry.name)):
            out.append(int(entry.name))
    return out


def test_a_worker_killed_mid_case_is_retried_and_counted_once(tmp_path: Path, local_ray: ModuleType) -> None:
    specs = read_sweep(small_sweep(tmp_path))
    killed: list[int] = []
    stop = threading.Event()

    def kill_the_first_busy_worker() -> None:
        while not stop.is_set() and not killed:
            busy = _running_case_workers()
            if busy:
                os.kill(busy[0], signal.SIGKILL)
                killed.append(busy[0])
            time.sleep(0.05)

    done: list[int] = []
    killer = threading.Thread(target=kill_the_first_busy_worker)
    killer.start()
    try:
        on_ray = run_cases_on_ray(specs, "auto", on_done=lambda k, case: done.append(k))
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was running a case"
    assert sorted(done) == [0, 1, 2, 3]
    assert clockless(on_ray) == clockless(run_cases(specs, workers=1))


def test_ctrl_c_cancels_the_rest_and_returns_what_finished(tmp_path: Path, local_ray: ModuleType) -> None:
    specs = read_sweep(small_sweep(tmp_path))

    def interrupt(k: int, case: Case) -> None:
        raise KeyboardInterrupt

    results = run_cases_on_ray(specs, "auto", on_done=interrupt)
    assert sum(c is not None for c in results) == 1  # the rest cancelled, not waited for
    started = time.monotonic()
    while local_ray.available_resources().get("CPU", 0) < 2 and time.monotonic() - started < 120:
        time.sleep(0.1)  # (the cancelled tasks' workers are killed: their CPUs come back)
    assert local_ray.available_resources().get("CPU", 0) == 2


def test_an_unreachable_address_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sweep = str(small_sweep(tmp_path))
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        result = CliRunner().invoke(main, ["simulate", "sweep", sweep, "--ray", address])
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr.startswith(f"error: --ray: cannot reach Ray at {address} within 5 s: ")
        assert result.stderr.count("\n") == 1
    bad = CliRunner().invoke(main, ["simulate", "sweep", sweep, "--ray", "nowhere"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: --ray: bad address 'nowhere'")


def test_ctrl_c_at_the_terminal_writes_the_cases_finished(tmp_path: Path) -> None:
    """The CLI starting its own local Ray, and SIGINT sent to its whole process group, as a
    terminal's Ctrl-C does (Ray's own processes get it too). Eight kubeplace cases of a few
    seconds each: when the first has finished, several are left to cancel."""
    path = small_sweep(tmp_path)
    document = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**document, "schedulers": ["kubeplace"], "seeds": list(range(8))}))
    sweep = str(path)
    checkout = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "kubeplace.cli.main", "simulate", "sweep", sweep, "--ray", "auto",
               "--workers", "2", "-o", "json"]
    process = subprocess.Popen(command, cwd=checkout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first.startswith("[1/8] case "), first
        os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "interrupted: " in stderr and " of 8 case(s) finished" in stderr
    finished = int(stderr.split("interrupted: ")[1].split(" of ")[0])
    assert 1 <= finished < 8
    cases = json.loads(stdout)  # (stdout one JSON document, the cases that ran)
    assert sum(not c["summary"]["interrupted"] for c in cases) == finished


def test_an_address_connects_to_a_running_ray(tmp_path: Path, local_ray: ModuleType) -> None:
    """``--ray HOST:PORT`` from another process: the session's Ray by its GCS address."""
    sweep = str(small_sweep(tmp_path))
    address = local_ray.get_runtime_context().gcs_address
    checkout = Path(__file__).resolve().parents[2]
    on_ray = subprocess.run([sys.executable, "-m", "kubeplace.cli.main", "simulate", "sweep", sweep, "--ray", address,
                             "-o", "json"], cwd=checkout, capture_output=True, text=True, timeout=300)
    assert on_ray.returncode == 0, on_ray.stderr
    serial = CliRunner().invoke(main, ["simulate", "sweep", sweep, "--workers", "1", "-o", "json"])
    assert _json_without_clock(json.loads(on_ray.stdout)) == _json_without_clock(json.loads(serial.stdout))
