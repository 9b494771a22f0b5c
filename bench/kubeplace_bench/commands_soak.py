"""``kubeplace bench soak``: ``serve``'s own cycle for days of simulated churn (``simulate.soak``),
with the size of every table it keeps and its memory sampled over time."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

import click

from kubeplace.cli.options import FiniteFloatRange
from kubeplace.simulate.soak import Soak, SoakSpec, mean_thirds, run_soak, thirds


def soak_document(soak: Soak) -> dict[str, Any]:
    """The soak as JSON: its spec, times, counts, each measure's thirds and every sample."""
    series = soak.series()
    return {"spec": asdict(soak.spec), "wall_seconds": round(soak.wall_seconds, 1),
            "cpu_seconds": round(soak.cpu_seconds, 1), "peak_rss_bytes": soak.peak_rss, "counts": dict(soak.counts),
            "measures": {name: _measure(values) for name, values in series.items()},
            "growing": soak.growing(),
            "samples": [{"at": s.at, "tables": dict(s.tables), "memory_blocks": s.blocks, "memory_rss": s.rss,
                         **({"memory_traced": s.traced} if soak.spec.trace_malloc else {})} for s in soak.samples]}


def _measure(values: list[int]) -> dict[str, Any]:
    """Start, middle and end values, and the maximum over each third."""
    if not values:
        return {"start": 0, "middle": 0, "end": 0, "max_thirds": [0, 0, 0], "mean_thirds": [0.0, 0.0, 0.0]}
    return {"start": values[0], "middle": values[len(values) // 2], "end": values[-1],
            "max_thirds": list(thirds(values)), "mean_thirds": [round(m, 1) for m in mean_thirds(values)]}


def soak_table(soak: Soak) -> str:
    doc = soak_document(soak)
    counts = ", ".join(f"{k} {v:,}" for k, v in doc["counts"].items())
    lines = [f"soak: {soak.spec.days:g} simulated days, {len(soak.samples)} samples every {soak.spec.every:g} s; "
             f"wall {doc['wall_seconds']:,} s, CPU {doc['cpu_seconds']:,} s, peak RSS {soak.peak_rss / 2**20:,.0f} MiB",
             counts, "",
             f"{'measure':<22} {'start':>12} {'middle':>12} {'end':>12} {'max 1st 3rd':>12} {'max 2nd 3rd':>12} "
             f"{'max 3rd 3rd':>12} {'mean 2nd 3rd':>12} {'mean 3rd 3rd':>12}  flat"]
    growing = set(doc["growing"])
    for name, m in doc["measures"].items():
        scale = 2**20 if name in ("memory_rss", "memory_traced") else 1
        cells = [m["start"], m["middle"], m["end"], *m["max_thirds"], *m["mean_thirds"][1:]]
        unit = " MiB" if scale > 1 else ""
        flat = "-" if name == "memory_rss" or name.startswith("store_") else ("NO" if name in growing else "yes")
        lines.append(f"{name + unit:<22} " + " ".join(f"{c / scale:>12,.0f}" for c in cells) + f"  {flat}")
    lines.append("")
    lines.append(f"growing: {', '.join(sorted(growing)) or 'none'}")
    return "\n".join(lines)


@click.command("soak")
@click.option("--days", type=FiniteFloatRange(min=0, min_open=True), default=30.0, show_default=True,
              help="Simulated days.")
@click.option("--every", type=FiniteFloatRange(min=1), default=3600.0, show_default=True,
              help="Simulated seconds between two samples.")
@click.option("--max-backoff", type=FiniteFloatRange(min=0.1), default=10.0, show_default=True,
              help="serve's --max-backoff: a pod that cannot be placed comes back on an event that may help it "
                   "once this backoff is over.")
@click.option("--job-rate", type=FiniteFloatRange(min=0, min_open=True), default=1 / 60, show_default=True,
              help="Ordinary jobs arriving per second.")
@click.option("--period", type=FiniteFloatRange(min=60), default=1800.0, show_default=True,
              help="Seconds between two high-priority jobs, gangs, pods too big, nodes going away.")
@click.option("--nodes", type=click.IntRange(min=2, max=1000), default=6, show_default=True,
              help="Nodes of the simulated cluster (a node at a time goes away and comes back).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--tracemalloc", "trace_malloc", is_flag=True, help="Also sample tracemalloc's traced memory (slower).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
def soak_command(days: float, every: float, max_backoff: float, job_rate: float, period: float, nodes: int,
                 seed: int, trace_malloc: bool, output: str) -> None:
    """serve's own cycle for DAYS simulated days of churn (jobs, preemptions, gangs that time
    out, pods that never fit, nodes going and coming back): the size of every table it keeps
    and its memory over time, at the start, middle and end and the maximum of each third. Exit
    1 when a table or the Python heap is not flat (the last third's mean over 10% and 16 entries
    above the middle third's)."""
    soak = run_soak(SoakSpec(days=days, every=every, nodes=nodes, job_rate=job_rate, period=period,
                             max_backoff=max_backoff, seed=seed, trace_malloc=trace_malloc))
    click.echo(json.dumps(soak_document(soak), indent=2) if output == "json" else soak_table(soak))
    if soak.growing():
        sys.exit(1)
