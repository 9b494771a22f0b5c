"""The two schedulers ``kubeplace bench throughput`` runs, as processes: starting them on a control
plane (``kubeplace serve`` of this checkout as the kubeplace user, the pinned kube-scheduler with its
client QPS raised), their CPU time and resident memory from ``/proc``, and serve's own counters."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Sequence

import urllib3

from kubeplace_bench.cluster import BenchError
from kubeplace_bench.controlplane import Component, ControlPlane, free_port, wait_for
from kubeplace_bench.controlplane_binaries import REPO_ROOT

KUBEPLACE, KUBE_SCHEDULER = "kubeplace", "kube-scheduler"
SCHEDULERS = (KUBEPLACE, KUBE_SCHEDULER)
SCHEDULER_NAMES = {KUBEPLACE: "kubeplace", KUBE_SCHEDULER: "default-scheduler"}


def process_stats(pid: int) -> tuple[float, float, float]:
    """(CPU seconds, resident MiB, peak resident MiB) of a live process, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    rss = hwm = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return cpu, rss, hwm


class Sampler:
    """Resident memory of a process every ``every`` seconds, in a thread."""

    def __init__(self, pid: int, every: float = 2.0) -> None:
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError, IndexError):
                self.samples.append((time.monotonic(), process_stats(self.pid)[1]))
            self._stop.wait(self.every)


def start_kube_scheduler(plane: ControlPlane, qps: int, timeout: float, extra_args: Sequence[str] = ()) -> Component:
    return plane.start_scheduler({"clientConnection": {"qps": qps, "burst": qps}}, extra_args, timeout=timeout)


def start_kubeplace(plane: ControlPlane, args: Sequence[str], timeout: float, index: int) -> tuple[Component, int]:
    """``kubeplace serve`` of this checkout as the kubeplace user; waits until it leads (its
    ``kubeplace_leader`` metric is 1). Returns it and its metrics port."""
    port = free_port()
    argv = [sys.executable, "-m", "kubeplace.cli.main", "serve", f"--kubeconfig={plane.kubeplace_kubeconfig}",
            f"--metrics-port={port}", "--metrics-address=127.0.0.1", *args]
    serve = plane.launch(f"kubeplace-serve-{index}", argv, env={"PYTHONPATH": str(REPO_ROOT)})
    try:
        wait_for(lambda: _leading(serve, port), timeout, "kubeplace serve to lead", interval=0.1)
    except TimeoutError as error:
        serve.stop()
        raise BenchError(f"{error}; last lines of {serve.log_path}:\n{serve.log_tail()}") from error
    return serve, port


def _leading(serve: Component, port: int) -> bool:
    if not serve.alive():
        raise BenchError(f"kubeplace serve exited with code {serve.process.returncode}; last lines of "
                         f"{serve.log_path}:\n{serve.log_tail()}")
    return "kubeplace_leader 1.0" in _metrics(port)


def _metrics(port: int) -> str:
    with contextlib.suppress(OSError, ValueError, urllib3.exceptions.HTTPError):
        return str(urllib3.request("GET", f"http://127.0.0.1:{port}/metrics", timeout=2, retries=False).data.decode())
    return ""


def serve_metrics(port: int) -> dict[str, float]:
    """A few of kubeplace serve's own counters (cycles, solve seconds, bindings)."""
    wanted = ("kubeplace_cycles_total", "kubeplace_solve_seconds_sum", "kubeplace_cycle_seconds_sum",
              "kubeplace_pods_bound_total", "kubeplace_pods_unschedulable_total")
    out: dict[str, float] = {}
    for line in _metrics(port).splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            out[name.removeprefix("kubeplace_")] = round(float(value), 2)
    return out
