"""``kubeplace simulate``: replay a workload trace on a cluster in simulated time, per scheduler.

    kubeplace simulate --cluster SNAPSHOT --workload TRACE [--scheduler NAME ...] [--config FILE ...]
    kubeplace simulate generate --jobs N --rate R --mean-duration S [-o TRACE]
    kubeplace simulate sweep SWEEP.yaml [--workers N]

Registered in cli/main.py. The trace format, the metrics and the sweep file: docs/simulate.md.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kubeplace.cli.options import FiniteFloatRange, KubeplaceGroup, int_list
from kubeplace.cli.render import dump, stdout_console, table
from kubeplace.kube.errors import InputError, expect_int
from kubeplace.models.config_load import MAX_SEED
from kubeplace.simulate.cluster import POOL_LABEL
from kubeplace.simulate.names import API_LATENCY, KUBEPLACE, MAX_SECONDS, SCHEDULERS

if TYPE_CHECKING:  # (the simulation and its report load when a simulation runs, not for every command)
    from kubeplace.simulate.engine import Case

_FILE = click.Path(path_type=Path, exists=True, dir_okay=False)


def _pool_count(values: Sequence[str], flag: str, number: type[int] | type[float]) -> tuple[tuple[str, float], ...]:
    out = []
    for value in values:
        pool, _, count = value.rpartition("=")
        try:
            parsed = number(count)
        except ValueError:
            parsed = -1
        if not pool or not math.isfinite(parsed) or parsed < 0:
            raise InputError(f"bad value {value!r}", field=flag, expected="POOL=COUNT" if number is int
                             else "POOL=FACTOR (a number >= 0)")
        out.append((pool, float(parsed)))
    return tuple(out)


def _print(cases: Sequence[Case | None], output: str, report: Path | None, title: str) -> None:
    """The cases that ran, on stdout (a case Ctrl-C cut short included, its summary saying
    ``interrupted``), and, when some did not finish, one line on stderr saying how many did:
    stdout stays one JSON document, and a case cut short is not counted as finished."""
    from kubeplace.simulate.output import COLUMNS, as_json, row, write_report

    done = [c for c in cases if c is not None]
    if report is not None and done:
        write_report(report, done, title)
    console = stdout_console()
    if output == "json":
        console.out(dump(as_json(done), "json"), end="", highlight=False)
    else:
        rows = table(*COLUMNS)
        for case in done:
            rows.add_row(*row(case))
        console.print(rows)
    cut = sum(c.result.summary.interrupted for c in done)
    finished = len(done) - cut
    if finished < len(cases):
        click.echo(f"interrupted: {finished} of {len(cases)} case(s) finished"
                   + (f", {cut} cut short (its results cover the simulated time it reached)" if cut else "")
                   + "; the results cover what ran", err=True)


@click.group("simulate", cls=KubeplaceGroup, invoke_without_command=True)
@click.option("--cluster", "cluster_paths", multiple=True, type=click.Path(path_type=Path, exists=True),
              help="Snapshot files or directories with the Node objects (and pods running for good).")
@click.option("--workload", type=_FILE, default=None, help="The trace (kind: Trace, docs/simulate.md).")
@click.option("--scheduler", "schedulers", multiple=True, type=click.Choice(SCHEDULERS),
              help="Scheduler under test (repeatable; default: all).")
@click.option("--config", "configs", multiple=True, type=_FILE,
              help="kubeplace configuration variant (repeatable; kubeplace's cases only).")
@click.option("--add", "add", multiple=True, metavar="POOL=COUNT", help="Add COUNT copies of a pool's first node.")
@click.option("--remove-pool", multiple=True, metavar="POOL", help="Remove a pool's nodes.")
@click.option("--scale-pool", multiple=True, metavar="POOL=FACTOR", help="Scale a pool's node count.")
@click.option("--pool-label", default=POOL_LABEL, show_default=True, help="The node label naming its pool.")
@click.option("--seed", "seeds", default="0", show_default=True, callback=int_list, help="Seeds (comma-separated).")
@click.option("--until", type=FiniteFloatRange(min=0, min_open=True, max=MAX_SECONDS), default=None,
              help="Stop at this simulated second (default: when nothing more can happen).")
@click.option("--api-latency", "latency", type=FiniteFloatRange(min=0, max=60), default=API_LATENCY, show_default=True,
              help="Seconds from a binding decided to its pod started (the API call and the watch).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Local processes running cases at once (default: one per case, up to the CPUs).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--report", "report_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write an HTML report with time-series charts here.")
@click.pass_context
def simulate_command(ctx: click.Context, cluster_paths: tuple[Path, ...], workload: Path | None,
                     schedulers: tuple[str, ...], configs: tuple[Path, ...], add: tuple[str, ...],
                     remove_pool: tuple[str, ...], scale_pool: tuple[str, ...], pool_label: str, seeds: list[int],
                     until: float | None, latency: float, workers: int | None, output: str,
                     report_path: Path | None) -> None:
    """Replay a workload trace on a cluster in simulated time with each scheduler: kubeplace's
    own serve cycle and the kube-scheduler, best-fit and FGD emulations; every placement is
    checked by the independent verifier. Prints allocation over time and queueing delay."""
    if ctx.invoked_subcommand is not None:
        return
    from kubeplace.simulate.cluster import NodeEdits
    from kubeplace.simulate.sweep import CaseSpec, run_cases

    if not cluster_paths or workload is None:
        raise InputError("give --cluster and --workload (or a subcommand: generate, sweep)", field="--cluster")
    for seed in seeds:
        expect_int(seed, "--seed", 0, MAX_SEED)
    edits = NodeEdits(tuple((p, int(c)) for p, c in _pool_count(add, "--add", int)), tuple(remove_pool),
                      _pool_count(scale_pool, "--scale-pool", float), pool_label)
    specs = []
    for scheduler in schedulers or SCHEDULERS:
        for config in (configs or (None,)) if scheduler == KUBEPLACE else (None,):
            for seed in seeds:
                label = " ".join(part for part in (scheduler, config.stem if config and len(configs) > 1 else "",
                                                   f"seed {seed}" if len(seeds) > 1 else "") if part)
                specs.append(CaseSpec(cluster_paths, workload, scheduler, config, seed, edits, until, label,
                                      latency))
    _print(run_cases(specs, workers), output, report_path, f"{workload} on {', '.join(map(str, cluster_paths))}")


@simulate_command.command("generate")
@click.option("--jobs", type=click.IntRange(min=0), default=1000, show_default=True, help="Jobs (pods or gangs).")
@click.option("--rate", type=FiniteFloatRange(min=0, min_open=True), default=0.1, show_default=True,
              help="Arrivals per second (Poisson).")
@click.option("--mean-duration", type=FiniteFloatRange(min=0, min_open=True), default=600.0, show_default=True,
              help="Mean run time, seconds (exponential).")
@click.option("--shape", "shapes", multiple=True, metavar="NAME=CPU/MEMORY[/GPUS]:WEIGHT",
              help="A pod shape of the mix (repeatable; default: small, large and 1-GPU pods).")
@click.option("--gang-fraction", type=FiniteFloatRange(0, 1), default=0.0, show_default=True,
              help="Share of jobs that are gangs.")
@click.option("--gang-sizes", default="4", show_default=True, callback=int_list, help="Gang sizes to draw from.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("-o", "--output", "output_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the trace here (default: stdout).")
def generate_command(jobs: int, rate: float, mean_duration: float, shapes: tuple[str, ...], gang_fraction: float,
                     gang_sizes: list[int], seed: int, output_path: Path | None) -> None:
    """Write a synthetic trace: Poisson arrivals of a mix of pod shapes, some of them gangs."""
    from kubeplace.simulate.generate import DEFAULT_SHAPES, generate, parse_shape

    document = generate(jobs, rate, mean_duration, [parse_shape(s) for s in shapes] or DEFAULT_SHAPES,
                        gang_fraction, gang_sizes, seed)
    text = dump(document, "yaml")
    if output_path is None:
        sys.stdout.write(text)
        return
    try:
        output_path.write_text(text)
    except OSError as e:
        raise InputError(f"cannot write: {e.strerror or e}", file=str(output_path)) from None


@simulate_command.command("sweep")
@click.argument("sweep_path", type=_FILE)
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Local processes (default: the CPUs); with --ray auto, the CPUs of the Ray it starts.")
@click.option("--ray", "ray_address", metavar="auto|ADDRESS", default=None,
              help="Run one Ray task per case: auto (this machine's Ray, started if none), ray://HOST:PORT or "
                   "HOST:PORT (needs kubeplace[ray]).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--report", "report_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write an HTML report with time-series charts here.")
def sweep_command(sweep_path: Path, workers: int | None, ray_address: str | None, output: str,
                  report_path: Path | None) -> None:
    """Run every case of a sweep file (the product of its axes) and print one comparison table."""
    from kubeplace.simulate.sweep import read_sweep, run_cases

    specs = read_sweep(sweep_path)
    if ray_address is None:
        cases = run_cases(specs, workers, _progress(len(specs)))
    else:
        try:
            from kubeplace.simulate.ray_sweep import run_cases_on_ray
        except ImportError:
            raise InputError("Ray is not installed: pip install 'kubeplace[ray]'", field="--ray") from None
        cases = run_cases_on_ray(specs, ray_address, workers, _progress(len(specs)))
    _print(cases, output, report_path, str(sweep_path))


def _progress(total: int) -> Callable[[int, Case], None]:
    """One line on stderr per case as it finishes (in the order they finish); a case Ctrl-C cut
    short is said so, and not counted."""
    done = 0

    def on_done(index: int, case: Case) -> None:
        nonlocal done
        s = case.result.summary
        if s.interrupted:
            click.echo(f"case {index + 1} {case.label}: interrupted at simulated second {s.end:g}, "
                       f"{s.started}/{s.pods} started", err=True)
            return
        done += 1
        click.echo(f"[{done}/{total}] case {index + 1} {case.label}: {s.started}/{s.pods} started, "
                   f"{s.wall_seconds:.1f} s", err=True)

    return on_done
