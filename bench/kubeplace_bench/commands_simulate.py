"""``kubeplace bench openb-simulate``: the openb trace replayed in simulated time per scheduler,
with the wall and CPU time of each replay (the floor: <= 5 minutes per scheduler on one core), the
schedulers in one process each up to the CPUs (``--workers``);
``kubeplace openb trace``: the openb pod list as ``kubeplace simulate``'s trace file."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import click

from kubeplace.cli.options import FiniteFloatRange
from kubeplace.cli.render import dump, say, stdout_console, table
from kubeplace.simulate.cluster import Cluster
from kubeplace.simulate.engine import Case, Result, simulate
from kubeplace.simulate.names import SCHEDULERS
from kubeplace.simulate.output import COLUMNS, as_json, row, write_report
from kubeplace.simulate.sweep import setup_of
from kubeplace.simulate.trace import Trace, trace_document
from kubeplace_bench.simulate_openb import DEFAULT_NODES, DEFAULT_PODS, openb_cluster, openb_dir, openb_trace

_CSV = click.Path(path_type=Path, exists=True, dir_okay=False)


@click.command("openb-simulate")
@click.option("--nodes", "nodes_csv", type=_CSV, default=None,
              help=f"openb node list (default: {DEFAULT_NODES} in $KUBEPLACE_OPENB_DIR).")
@click.option("--pods", "pods_csv", type=_CSV, default=None,
              help=f"openb pod list with creation and deletion times (default: {DEFAULT_PODS}).")
@click.option("--scheduler", "schedulers", multiple=True, type=click.Choice(SCHEDULERS),
              help="Scheduler under test (repeatable; default: all).")
@click.option("--first", type=click.IntRange(min=1), default=None,
              help="Replay only the trace's first N pods (by arrival).")
@click.option("--until", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="Stop at this simulated second.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Local processes replaying at once (default: one per scheduler, up to the CPUs).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--report", "report_path", type=click.Path(path_type=Path, dir_okay=False), default=None)
def openb_simulate_command(nodes_csv: Path | None, pods_csv: Path | None, schedulers: tuple[str, ...],
                           first: int | None, until: float | None, workers: int | None, output: str,
                           report_path: Path | None) -> None:
    """Replay the openb trace (real creation and deletion times) with each scheduler."""
    nodes_csv = nodes_csv or openb_dir() / DEFAULT_NODES
    pods_csv = pods_csv or openb_dir() / DEFAULT_PODS
    cluster, trace = openb_cluster(nodes_csv), openb_trace(pods_csv, first)
    console = stdout_console()
    chosen = list(schedulers or SCHEDULERS)
    workers = min(len(chosen), workers or os.cpu_count() or 1)
    cases = []
    if workers <= 1:
        for scheduler in chosen:
            cases.append(Case(scheduler, _replayed(cluster, trace, scheduler, until)))
            if cases[-1].result.summary.interrupted:
                break
    else:  # (each replay is the same alone or beside others: the solver runs one worker, in slices)
        with ProcessPoolExecutor(workers) as pool:
            futures = {pool.submit(simulate, cluster, trace, scheduler, setup_of(None, 0), until): scheduler
                       for scheduler in chosen}
            done = {}
            for future in as_completed(futures):
                done[futures[future]] = _told(futures[future], future.result())
            cases = [Case(scheduler, done[scheduler]) for scheduler in chosen]
    if report_path is not None:
        write_report(report_path, cases, f"{pods_csv.name} on {nodes_csv.name}")
    if output == "json":
        console.out(dump(as_json(cases, samples=False), "json"), end="", highlight=False)
        return
    rows = table(*COLUMNS)
    for case in cases:
        rows.add_row(*row(case))
    console.print(rows)
    if any(c.result.summary.interrupted for c in cases):
        say(console, "interrupted: the results cover the simulated time reached")


def _replayed(cluster: Cluster, trace: Trace, scheduler: str, until: float | None) -> Result:
    return _told(scheduler, simulate(cluster, trace, scheduler, setup_of(None, 0), until))


def _told(scheduler: str, result: Result) -> Result:
    """The replay's wall and CPU seconds, on stderr."""
    s = result.summary
    click.echo(f"{scheduler}: {s.pods} pods over {s.end:.0f} simulated s in {s.wall_seconds:.1f} s wall, "
               f"{s.cpu_seconds:.1f} s CPU; {s.cycles} cycles, {s.refused} refused", err=True)
    return result


@click.command("trace")
@click.option("--pods", "pods_csv", type=_CSV, required=True, help="openb pod list.")
@click.option("-o", "--output", "output_path", type=click.Path(path_type=Path, dir_okay=False), required=True)
def openb_trace_command(pods_csv: Path, output_path: Path) -> None:
    """Write the pod list as a `kubeplace simulate` trace (arrival = creation_time, duration =
    deletion_time - creation_time)."""
    trace = openb_trace(pods_csv)
    output_path.write_text(dump(trace_document(trace.arrivals), "yaml"))
    click.echo(f"{len(trace.arrivals)} pods -> {output_path}")
