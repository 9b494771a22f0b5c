"""``kubeplace bench synthetic``: plan synthetic clusters of a given size on each backend,
side by side with a one-pod-at-a-time default-scheduler emulation."""

from __future__ import annotations

import json
from pathlib import Path

import click
import yaml

from kubeplace.cli.options import FiniteFloatRange, int_list
from kubeplace.cli.render import progress, stdout_console, table
from kubeplace_bench.phases import PHASES
from kubeplace_bench.scale import run_scale
from kubeplace_bench.synthetic import RULES, SyntheticSpec, as_list, manifests

COLUMNS = ("nodes", "pods", "backend", "classes", "seconds_snapshot", "seconds_plan", "seconds_verify",
           "cpu_seconds_plan", "cpu_seconds_verify",
           "pods_placed", "default_scheduler_placed", "default_scheduler_seconds", "greedy_objective", "objective",
           "status", "plan_peak_mib", "peak_mib")


@click.command("synthetic")
@click.option("--nodes", "node_counts", default="500", callback=int_list,
              help="Node counts, comma-separated (e.g. 500,5000).")
@click.option("--pods", "pod_counts", default="2000", callback=int_list, help="Pending pod counts, one per node count.")
@click.option("--backend", "backends", default="cpsat", help="Backends, comma-separated (cpsat,milp,highs,cbc).")
@click.option("--time-limit", type=FiniteFloatRange(min=0.1), default=10.0, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--rules", type=click.Choice(RULES), default="none", show_default=True,
              help="mix: hostname anti-affinity, zone spread and rack groups on part of the pods.")
@click.option("--write-list", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Only write the cluster (first size) as one YAML List file, as kubectl prints it.")
@click.option("--phases", is_flag=True, default=False,
              help="Also time the plan's phases (aggregation, greedy, solve, explain, verification, ...): "
                   "a column each, wall/CPU seconds.")
@click.option("--default-scheduler/--no-default-scheduler", default=True, show_default=True,
              help="Also run the one-pod-at-a-time default-scheduler emulation on the same cluster.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
def synthetic_command(node_counts: list[int], pod_counts: list[int], backends: str, time_limit: float, seed: int,
                      rules: str, write_list: Path | None, phases: bool, default_scheduler: bool,
                      output: str) -> None:
    """Time from a loaded snapshot to a verified plan, pods placed and peak memory."""
    if len(node_counts) != len(pod_counts):
        raise click.BadParameter("give one pod count per node count", param_hint="--pods")
    sizes = list(zip(node_counts, pod_counts, strict=True))
    if write_list is not None:
        spec = SyntheticSpec(sizes[0][0], sizes[0][1], seed, rules=rules)
        with write_list.open("w") as f:
            yaml.dump(as_list(manifests(spec)), f, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
                      sort_keys=False)
        click.echo(f"wrote {write_list}")
        return
    results = []
    for n, p in sizes:
        for b in backends.split(","):
            with progress(True, time_limit, label=f"{n} nodes, {p} pods, {b}") as on_event:
                results.append(run_scale(SyntheticSpec(n, p, seed, rules=rules), b, time_limit, on_event,
                                         phases, default_scheduler).to_dict())
    if output == "json":
        click.echo(json.dumps({"runs": results}, indent=2))
        return
    phase_names = [name for name, _, _ in PHASES] if phases else []
    rows = table(*(c.upper() for c in COLUMNS), *(f"s_{name}".upper() for name in phase_names))
    for r in results:
        rows.add_row(*(str(r[c]) for c in COLUMNS),
                     *(f"{r['phase_seconds'][name]}/{r['phase_cpu_seconds'][name]}" if name in r["phase_seconds"]
                       else "-" for name in phase_names))
    stdout_console().print(rows)

