"""``kubeplace bench simulate-fidelity``: ``kubeplace simulate`` against the real control plane
on one short trace (:mod:`kubeplace_bench.fidelity`).

Registered on the ``bench`` group (bench/commands.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from kubeplace.cli.options import FiniteFloatRange

DEFAULTS_NOTE = "the default: 260 jobs, about 340 pods with gangs, about 4 minutes per scheduler"


def _seed_range(ctx: click.Context, param: click.Parameter, value: str | None) -> range | None:
    if value is None:
        return None
    first, _, last = value.partition("-")
    if not (first.isdigit() and (last.isdigit() or not last)) or int(last or first) < int(first):
        raise click.BadParameter(f"{value!r}: FIRST-LAST (e.g. 1-8) or one seed")
    return range(int(first), int(last or first) + 1)


@click.command("simulate-fidelity")
@click.option("--jobs", type=click.IntRange(min=1), default=260, show_default=True,
              help=f"Jobs of the generated trace ({DEFAULTS_NOTE}).")
@click.option("--seed", type=int, default=7, show_default=True, help="The trace generator's seed.")
@click.option("--compress", type=FiniteFloatRange(min=1), default=10.0, show_default=True,
              help="The trace's times are divided by this factor.")
@click.option("--tick", type=FiniteFloatRange(min=0.1), default=1.0, show_default=True,
              help="Arrivals are rounded to this many (compressed) seconds.")
@click.option("--nodes", type=click.IntRange(min=1), default=8, show_default=True,
              help="kwok nodes of 16 CPU / 64 GiB / 4 GPUs.")
@click.option("--schedulers", default="kube-scheduler,kubeplace", show_default=True,
              help="Comma-separated: kube-scheduler, kubeplace (run in this order).")
@click.option("--build", is_flag=True,
              help="Build the control plane binaries if they are not cached (10-25 minutes, needs Go).")
@click.option("--dump-cycles", "dump", type=click.Path(file_okay=False, path_type=Path),
              help="Write each scheduler's log on both sides (serve's decisions and cycles; the kube-scheduler's "
                   "live log at -v=5) and each pod's timeline in both replays to this folder.")
@click.option("--scan-seeds", "scan_seeds", metavar="FIRST-LAST", callback=_seed_range,
              help="No control plane: for each seed, the trace's contention and the simulation's own spread "
                   "(which traces a live run can be compared with).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def fidelity_command(jobs: int, seed: int, compress: float, tick: float, nodes: int, schedulers: str, build: bool,
                     dump: Path | None, scan_seeds: range | None, output: str) -> None:
    """The same trace replayed by `kubeplace simulate` and on a real control plane (kwok nodes,
    pods created at their arrival and deleted at their end), with the real kube-scheduler and with
    `kubeplace serve`: pods bound and allocation over time and at the end, difference in points."""
    from kubeplace_bench.commands_throughput import choices, on_control_plane
    from kubeplace_bench.fidelity import SCHEDULERS, TraceSpec, run, table

    order = choices(schedulers, SCHEDULERS, "--schedulers")
    spec = TraceSpec(jobs=jobs, seed=seed, compress=compress, tick=tick, nodes=nodes)
    if scan_seeds is not None:
        from kubeplace_bench import fidelity_scan

        scanned = fidelity_scan.scan(spec, scan_seeds, order, lambda line: click.echo(line, err=True))
        click.echo(json.dumps(scanned, indent=2) if output == "json" else fidelity_scan.table(scanned))
        return
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
    doc = on_control_plane(build, lambda plane, say: run(plane, spec, order, say, dump=dump))
    click.echo(json.dumps(doc, indent=2) if output == "json" else table(doc))
