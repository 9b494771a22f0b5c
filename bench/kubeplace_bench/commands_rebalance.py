"""``kubeplace bench rebalance``: kubeplace's moves against the descheduler and the greedy defrag.

Registered on the ``bench`` group (cli/bench.py) as ``bench.add_command(rebalance_bench_command)``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kubeplace.cli.options import EXIT_INPUT, FiniteFloatRange


@click.command("rebalance")
@click.option("--seed", type=int, default=0, show_default=True, help="Cluster generator seed (and solver seed).")
@click.option("--nodes", type=click.IntRange(min=4), default=200, show_default=True,
              help="Nodes of the generated fragmented cluster.")
@click.option("--openb-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Directory of the openb CSVs (default: $KUBEPLACE_OPENB_DIR, else shared/data/openb above "
                   "the checkout, if there).")
@click.option("--openb-nodes", type=click.IntRange(min=4), default=250, show_default=True,
              help="Nodes sampled from openb.")
@click.option("--no-openb", is_flag=True, help="Skip the openb cluster.")
@click.option("--time-limit", type=FiniteFloatRange(min=0.1), default=20.0, show_default=True,
              help="kubeplace's solver budget per run, seconds.")
@click.option("--defrag-seeds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Seeds per defragmentation case.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def rebalance_bench_command(seed: int, nodes: int, openb_dir: Path | None, openb_nodes: int, no_openb: bool,
                            time_limit: float, defrag_seeds: int, output: str) -> None:
    """Balance after moves, kubeplace vs LowNodeUtilization (kubeplace gets no more moves than the
    emulation made), and the moves that make room for a pending GPU job: kubeplace, the optimum
    (exact backend on small cases) and the greedy "evict from the emptiest node"."""
    from kubeplace.kube.errors import KubeplaceError
    from kubeplace_bench.cluster_scenarios import default_openb_dir
    from kubeplace_bench.rebalance import run, table

    data = None if no_openb else (openb_dir or default_openb_dir())
    if data is not None and not data.is_dir():
        if openb_dir is not None:
            click.echo(f"error: --openb-dir {openb_dir}: no such directory", err=True)
            sys.exit(EXIT_INPUT)
        data = None

    def say(message: str) -> None:
        click.echo(message, err=True)

    try:
        doc = run(seed, nodes, data, openb_nodes, time_limit, defrag_seeds, say)
    except KubeplaceError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_INPUT)
    click.echo(json.dumps(doc, indent=2) if output == "json" else table(doc))
