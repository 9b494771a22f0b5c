"""``kubeplace bench load-aware``: load-aware vs requests-only plans on a cluster with skewed
measured load (see :mod:`bench.load_aware`)."""

from __future__ import annotations

import json

import click

from kubeplace.cli.options import FiniteFloatRange
from kubeplace.models.config import SolverSettings


@click.command("load-aware")
@click.option("--nodes", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--pods", type=click.IntRange(min=1), default=600, show_default=True)
@click.option("--hot-share", type=FiniteFloatRange(0, 1), default=0.25, show_default=True,
              help="Share of the nodes measured hot (60-95% CPU); the others 15-45%.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--time-limit", type=FiniteFloatRange(min=0.05), default=10.0, show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def load_aware_command(nodes: int, pods: int, hot_share: float, seed: int, time_limit: float, workers: int,
                       output: str) -> None:
    """Same snapshot, two plans: kubeplace's load-aware plan and a requests-only plan (LoadAware
    disabled): max and p95 CPU load after placement as metrics would see it, nodes above the 0.7
    threshold, pods put on nodes that were already hot."""
    from kubeplace_bench.load_aware import compare, table

    doc = compare(nodes, pods, hot_share, seed, SolverSettings(time_limit=time_limit, workers=workers, seed=seed))
    click.echo(json.dumps(doc, indent=2) if output == "json" else table(doc))
