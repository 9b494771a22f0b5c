"""``kubeplace bench simulate-ray``: one sweep of 16 heavy cases run three ways in one run (one
process, ``--workers`` local processes, a local Ray started with ``--workers`` CPUs), the wall time
of each and its ratio to the serial run, and a check that the three give the same results (the
floor: Ray <= 0.6x serial, Ray's start-up included).

Every case is kubeplace's own scheduler (its serve cycle) on a 6-node cluster with GPUs, replaying
a synthetic trace of ``--jobs`` jobs with gangs: 4 traces x 4 seeds, each case several seconds of
CPU, so that starting processes or Ray is small beside the cases."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import yaml

from kubeplace.cli.render import say, stdout_console, table
from kubeplace.kube.errors import KubeplaceError
from kubeplace.kube.objects import GPU
from kubeplace.simulate.engine import Case
from kubeplace.simulate.generate import DEFAULT_SHAPES, generate
from kubeplace.simulate.names import KUBEPLACE
from kubeplace.simulate.sweep import CaseSpec, clockless, read_sweep, run_cases
from kubeplace.simulate.trace import API_VERSION

TRACES = 4
SEEDS = 4
FLOOR = 0.6
"""Ray's wall time over the serial one that the benchmark must not exceed."""


def write_sweep(folder: Path, jobs: int) -> Path:
    """A sweep of TRACES x SEEDS kubeplace cases: 6 nodes of 16 CPUs (every other with 4 GPUs) and
    TRACES synthetic traces of ``jobs`` jobs (Poisson arrivals, 10% gangs of 2 or 4)."""
    nodes = []
    for k in range(6):
        allocatable = {"cpu": "16", "memory": "64Gi", "pods": "110", **({GPU: "4"} if k % 2 else {})}
        nodes.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": f"node-{k}", "labels": {"kubeplace.io/pool": "gpu" if k % 2 else "cpu"}},
                      "status": {"allocatable": allocatable, "capacity": dict(allocatable)}})
    (folder / "cluster.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    traces = []
    for t in range(TRACES):
        name = f"trace-{t}.yaml"
        document = generate(jobs, 0.05, 600, DEFAULT_SHAPES, gang_fraction=0.1, gang_sizes=(2, 4), seed=t)
        (folder / name).write_text(yaml.safe_dump(document))
        traces.append(name)
    sweep = {"apiVersion": API_VERSION, "kind": "Sweep", "clusters": ["cluster.yaml"], "traces": traces,
             "schedulers": [KUBEPLACE], "seeds": list(range(SEEDS))}
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return path


def _timed(run: Callable[[], list[Case | None]]) -> tuple[float, list[Case | None]]:
    started = time.monotonic()
    cases = run()
    return time.monotonic() - started, cases


def _on_ray(specs: list[CaseSpec], workers: int) -> tuple[float, float, list[Case | None]]:
    """Wall seconds from starting a local Ray to the last result, of which the start-up, and the
    results."""
    try:
        from kubeplace.simulate.ray_sweep import connected, run_cases_on_ray
    except ImportError:
        raise KubeplaceError("Ray is not installed: pip install 'kubeplace[ray]'") from None
    started = time.monotonic()
    with connected("auto", workers):
        startup = time.monotonic() - started
        cases = run_cases_on_ray(specs, "auto", workers)
        return time.monotonic() - started, startup, cases


@click.command("simulate-ray")
@click.option("--jobs", type=click.IntRange(min=1), default=280, show_default=True,
              help="Jobs per trace (the cases' weight).")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Local processes, and the CPUs of the local Ray.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def simulate_ray_command(jobs: int, workers: int, output: str) -> None:
    """A 16-case sweep serially, in local processes and on a local Ray: wall times, ratios, same results."""
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="kubeplace-simulate-ray-") as folder:
        specs = read_sweep(write_sweep(Path(folder), jobs))
        serial_s, serial = _timed(lambda: run_cases(specs, workers=1))
        local_s, local = _timed(lambda: run_cases(specs, workers=workers))
        ray_s, startup_s, on_ray = _on_ray(specs, workers)
    identical = clockless(serial) == clockless(local) == clockless(on_ray) and None not in serial
    case_cpu = [c.result.summary.cpu_seconds for c in serial if c is not None]
    doc: dict[str, Any] = {
        "cases": len(specs), "jobs_per_trace": jobs, "workers": workers,
        "case_cpu_seconds": {"min": min(case_cpu), "mean": sum(case_cpu) / len(case_cpu), "max": max(case_cpu)},
        "serial_seconds": serial_s, "local_seconds": local_s, "ray_seconds": ray_s, "ray_startup_seconds": startup_s,
        "local_ratio": local_s / serial_s, "ray_ratio": ray_s / serial_s, "identical": identical,
        "floor": FLOOR, "floor_met": ray_s / serial_s <= FLOOR,
        "load_average_1m": {"before": load_before, "after": os.getloadavg()[0]},
    }
    if output == "json":
        click.echo(json.dumps(doc, indent=2))
    else:
        console = stdout_console()
        rows = table("RUN", "WORKERS", "WALL S", "RATIO TO SERIAL")
        rows.add_row("serial", "1", f"{serial_s:.1f}", "1.00")
        rows.add_row("local processes", str(workers), f"{local_s:.1f}", f"{local_s / serial_s:.2f}")
        rows.add_row("local Ray", str(workers), f"{ray_s:.1f}", f"{ray_s / serial_s:.2f}")
        console.print(rows)
        c = doc["case_cpu_seconds"]
        say(console, f"{len(specs)} cases, each {c['min']:.1f}-{c['max']:.1f} s CPU (mean {c['mean']:.1f}); "
                     f"Ray's start-up {startup_s:.1f} s (counted); load average {load_before:.1f} -> "
                     f"{doc['load_average_1m']['after']:.1f}")
        say(console, f"results identical in the three runs: {'yes' if identical else 'NO'}; "
                     f"floor Ray <= {FLOOR}x serial: {'met' if doc['floor_met'] else 'NOT met'}")
    if not identical:
        raise KubeplaceError("the three runs of the sweep gave different results")
