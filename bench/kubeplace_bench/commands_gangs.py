"""``kubeplace bench gangs``: gangs placed whole by kubeplace vs a coscheduling baseline, and
batch-window throughput (see :mod:`bench.gangs`). ``gangs_command`` is added to the ``bench``
group by ``cli/main.py``."""

from __future__ import annotations

import json

import click

from kubeplace.cli.options import FiniteFloatRange, int_list
from kubeplace.models.config import SolverSettings


@click.command("gangs")
@click.option("--seeds", default="1,2,3", show_default=True, callback=int_list, help="Workload seeds.")
@click.option("--nodes", type=click.IntRange(min=1), default=300, show_default=True)
@click.option("--gangs", type=click.IntRange(min=1), default=500, show_default=True,
              help="At most this many gangs (fewer when the cluster is full first).")
@click.option("--time-limit", type=FiniteFloatRange(min=0.05), default=30.0, show_default=True,
              help="kubeplace's solver budget for the whole batch, seconds.")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--throughput/--no-throughput", default=True, show_default=True,
              help="Also run 1,000 gangs of 3-8 pods over a simulated minute on 5,000 nodes.")
@click.option("--throughput-nodes", type=click.IntRange(min=1), default=5000, show_default=True)
@click.option("--throughput-gangs", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option("--window", type=FiniteFloatRange(min=0.01), default=1.0, show_default=True,
              help="Batch window of the throughput run, simulated seconds.")
@click.option("--window-time-limit", type=FiniteFloatRange(min=0.05), default=2.0, show_default=True,
              help="Solver budget per window in the throughput run.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def gangs_command(seeds: list[int], nodes: int, gangs: int, time_limit: float, workers: int, throughput: bool,
                  throughput_nodes: int, throughput_gangs: int, window: float, window_time_limit: float,
                  output: str) -> None:
    """Mixed-shape gang workloads that fit by construction: the fraction of gangs placed whole
    by kubeplace (one plan of the whole batch) and by one-pod-at-a-time coscheduling."""
    from kubeplace_bench import gangs as g

    rows = g.compare(seeds, nodes, gangs, SolverSettings(time_limit=time_limit, workers=workers))
    doc: dict[str, object] = {"feasible_workloads": rows}
    if throughput:
        doc["throughput"] = g.throughput(seeds[0], nodes=throughput_nodes, gangs=throughput_gangs, window=window,
                                         options=SolverSettings(time_limit=window_time_limit, workers=workers))
    if output == "json":
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo(_table(rows))
    if throughput:
        t = doc["throughput"]
        assert isinstance(t, dict)
        lat = t["batch_latency_seconds"]
        click.echo(f"\nthroughput: {t['gangs']} gangs / {t['pods']} pods on {t['nodes']} nodes, {t['windows']} windows "
                   f"of {t['window_seconds']}s: {t['gangs_placed']} gangs placed; batch latency p50 {lat['p50']}s "
                   f"p90 {lat['p90']}s p99 {lat['p99']}s max {lat['max']}s; {t['pods_per_second']} pods/s")
    click.echo("\n" + json.dumps(doc))


def _table(rows: list[dict[str, object]]) -> str:
    head = (f"{'seed':>4} {'nodes':>5} {'gangs':>5} {'pods':>5}  {'kubeplace':>15} {'s':>7}  "
            f"{'coscheduling':>15} {'s':>6}")
    lines = [head]
    for r in rows:
        kp, co = r["kubeplace"], r["coscheduling"]
        assert isinstance(kp, dict) and isinstance(co, dict)
        lines.append(f"{r['seed']:>4} {r['nodes']:>5} {r['gangs']:>5} {r['pods']:>5}  "
                     f"{kp['gangs_placed']:>5} ({kp['fraction']:6.1%}) {kp['seconds']:>7.2f}  "
                     f"{co['gangs_placed']:>5} ({co['fraction']:6.1%}) {co['seconds']:>6.2f}")
    return "\n".join(lines)
