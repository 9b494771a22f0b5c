"""``kubeplace bench serve-cycles``: the CPU a serve cycle costs at cluster scale, in process, beside
another checkout's (see :mod:`kubeplace_bench.serve_cycles`)."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("serve-cycles")
@click.option("--nodes", type=click.IntRange(min=2), default=2000, show_default=True)
@click.option("--bound", type=click.IntRange(min=0), default=2500, show_default=True,
              help="Pods running before the first gang.")
@click.option("--cycles", type=click.IntRange(min=1), default=40, show_default=True,
              help="Gangs measured, one per cycle.")
@click.option("--gang", type=click.IntRange(min=1), default=5, show_default=True, help="Pods per gang.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs of each side (alternating); the median is reported.")
@click.option("--baseline", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              help="Another kubeplace checkout (e.g. main's) measured alike, side by side.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def serve_cycles_command(nodes: int, bound: int, cycles: int, gang: int, seed: int, rounds: int,
                         baseline: Path | None, output: str) -> None:
    """CPU ms per gang of a serve scheduler in process: its cycle (snapshot, plan, verify, bind to a
    recording client) and its watch events (JSON decoded, stored, handled); no HTTP."""
    from kubeplace_bench.serve_cycles import compare, table

    doc = compare(baseline, nodes, bound, cycles, gang, seed, rounds)
    click.echo(json.dumps(doc, indent=2) if output == "json" else table(doc) + "\n" + json.dumps(doc))
