"""``kubeplace bench ...`` and ``kubeplace openb ...``: benchmarks and the openb converter.

Two click groups, which the ``kubeplace`` command loads only when one of them is invoked::

    kubeplace openb convert --nodes CSV --pods CSV -o DIR
    kubeplace bench openb --nodes CSV --pods CSV --time-limit S [-o json|table] [--placements-out FILE]
    kubeplace bench openb-replay --nodes CSV --pods CSV --seeds 1,2,3 --window N [-o json|table]

Bad input is one line on stderr and exit code 2, as everywhere in kubeplace.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from kubeplace.cli.options import FiniteFloatRange, KubeplaceGroup, int_list
from kubeplace.models.framework import Objective

_CSV = click.Path(path_type=Path, exists=True, dir_okay=False)




@click.group(cls=KubeplaceGroup)
def openb() -> None:
    """Alibaba's openb GPU trace (cluster-trace-gpu-v2023) as Kubernetes objects."""


@openb.command("convert")
@click.option("--nodes", "nodes_csv", type=_CSV, required=True, help="openb node list (sn,cpu_milli,...).")
@click.option("--pods", "pods_csv", type=_CSV, required=True, help="openb pod list (name,cpu_milli,...).")
@click.option("-o", "--output-dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Directory for nodes.yaml and pods.yaml.")
def convert(nodes_csv: Path, pods_csv: Path, output_dir: Path) -> None:
    """Write the trace as Node and pending Pod manifests (nodes.yaml, pods.yaml) that
    `kubeplace plan DIR` reads."""
    from kubeplace_bench.openb import read_nodes, read_pods, write_manifests

    nodes, pods = read_nodes(nodes_csv), read_pods(pods_csv)
    node_file, pod_file = write_manifests(output_dir, nodes, pods)
    click.echo(f"{len(nodes)} nodes -> {node_file}\n{len(pods)} pods -> {pod_file}")


@click.group(cls=KubeplaceGroup)
def bench() -> None:
    """Benchmarks: kubeplace and its baselines side by side on the same input."""


@bench.command("openb")
@click.option("--nodes", "nodes_csv", type=_CSV, required=True, help="openb node list.")
@click.option("--pods", "pods_csv", type=_CSV, required=True, help="openb pod list (all pods pending).")
@click.option("--time-limit", type=FiniteFloatRange(min=0.05), default=10.0, show_default=True,
              help="kubeplace's solver budget, seconds.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--placements-out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write kubeplace's validated placements as CSV (pod,node,gpus).")
@click.option("--seed", type=int, default=0, show_default=True, help="Solver seed and default-scheduler ties.")
@click.option("--trace-memory", is_flag=True,
              help="Peak memory by tracemalloc (Python heap, slower) instead of resident set growth.")
def bench_openb(nodes_csv: Path, pods_csv: Path, time_limit: float, output: str, placements_out: Path | None,
                seed: int, trace_memory: bool) -> None:
    """Batch fill: every pod of the list pending at once on an empty cluster.

    Runs kubeplace (its placements checked on the device simulator), default-scheduler,
    best-fit and FGD, and the LP bound, in this process.
    """
    from kubeplace_bench.openb import read_nodes, read_pods
    from kubeplace_bench.report import batch, batch_table, write_placements

    nodes, pods = read_nodes(nodes_csv), read_pods(pods_csv)
    doc, kubeplace = batch(nodes, pods, time_limit=time_limit, seed=seed, trace=trace_memory,
                           sources=(str(nodes_csv), str(pods_csv)))
    if placements_out is not None:
        write_placements(placements_out, kubeplace.placements)
    click.echo(json.dumps(doc, indent=2) if output == "json" else batch_table(doc), nl=output == "json")




@bench.command("openb-replay")
@click.option("--nodes", "nodes_csv", type=_CSV, required=True, help="openb node list.")
@click.option("--pods", "pods_csv", type=_CSV, required=True, help="openb pod list to sample arrivals from.")
@click.option("--seeds", default="1,2,3", show_default=True, callback=int_list, help="Sampling seeds.")
@click.option("--window", type=click.IntRange(min=1), default=100, show_default=True,
              help="kubeplace plans this many arrivals at a time.")
@click.option("--time-limit", type=FiniteFloatRange(min=0.05), default=1.0, show_default=True,
              help="kubeplace's solver budget per window, seconds.")
@click.option("--policies", default="kubeplace,default-scheduler,best-fit,fgd", show_default=True,
              help="Policies to run, comma separated.")
@click.option("--shuffle", is_flag=True,
              help="FGD artifact's variant: the whole list plus draws up to 130%, in a random order "
                   "(numpy's draws; `bench fgd-protocol` runs the authors' own).")
@click.option("--profile", "objective", type=click.Choice([o.value for o in Objective]), default="defrag",
              show_default=True, help="kubeplace's profile objective in each window.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def bench_openb_replay(nodes_csv: Path, pods_csv: Path, seeds: list[int], window: int, time_limit: float,
                       policies: str, shuffle: bool, objective: str, output: str) -> None:
    """Saturation replay (FGD's protocol): arrivals sampled until 130% of the GPU capacity is
    requested; GPU allocation ratio at the end, averaged over seeds."""
    from kubeplace_bench.baselines import POLICIES
    from kubeplace_bench.openb import read_nodes, read_pods
    from kubeplace_bench.report import KUBEPLACE, replay, replay_table

    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    unknown = sorted(set(chosen) - {KUBEPLACE, *POLICIES})
    if unknown or not chosen:
        raise click.BadParameter(f"unknown policy {', '.join(unknown) or '(none)'}; known: "
                                 f"{', '.join((KUBEPLACE, *POLICIES))}", param_hint="--policies")
    nodes, pods = read_nodes(nodes_csv), read_pods(pods_csv)
    doc = replay(nodes, pods, seeds=seeds, window=window, time_limit=time_limit, policies=chosen, shuffle=shuffle,
                 sources=(str(nodes_csv), str(pods_csv)), objective=objective)
    click.echo(json.dumps(doc, indent=2) if output == "json" else replay_table(doc), nl=output == "json")



def _add_subcommands() -> None:
    from kubeplace_bench.commands_capacity import capacity_command
    from kubeplace_bench.commands_cluster import cluster_command
    from kubeplace_bench.commands_consolidate import consolidate_scale_command
    from kubeplace_bench.commands_fgd import fgd_protocol_command
    from kubeplace_bench.commands_fidelity import fidelity_command
    from kubeplace_bench.commands_gangs import gangs_command
    from kubeplace_bench.commands_load import load_aware_command
    from kubeplace_bench.commands_provision import provision_scale_command
    from kubeplace_bench.commands_rebalance import rebalance_bench_command
    from kubeplace_bench.commands_serve_cycles import serve_cycles_command
    from kubeplace_bench.commands_simulate import openb_simulate_command, openb_trace_command
    from kubeplace_bench.commands_simulate_ray import simulate_ray_command
    from kubeplace_bench.commands_soak import soak_command
    from kubeplace_bench.commands_synthetic import synthetic_command
    from kubeplace_bench.commands_throughput import throughput_command

    for command in (synthetic_command, cluster_command, rebalance_bench_command, gangs_command, load_aware_command,
                    throughput_command, openb_simulate_command, capacity_command, provision_scale_command,
                    fidelity_command, simulate_ray_command, consolidate_scale_command, soak_command,
                    fgd_protocol_command, serve_cycles_command):
        bench.add_command(command)
    openb.add_command(openb_trace_command)


_add_subcommands()
