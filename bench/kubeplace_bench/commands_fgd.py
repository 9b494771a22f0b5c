"""``kubeplace bench fgd-protocol``: FGD's and best-fit's published per-seed figures, reproduced on the
FGD paper's own protocol (see :mod:`bench.fgd_protocol`), beside the published values."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import click

from kubeplace.cli.options import FiniteFloatRange
from kubeplace.simulate.policies import POLICIES

_CSV = click.Path(path_type=Path, exists=True, dir_okay=False)
SCHEDULERS = (*POLICIES, "kubeplace", "kubeplace-plan")
"""The policies of ``kubeplace.simulate.policies`` (the same as ``simulate``'s), and kubeplace."""
VIA = ("device", "simulate")
PUBLISHED_SHARED = Path("shared") / "reference" / "fgd" / "published_alloc_at_130.csv"


def seed_range(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    """Click callback: "42-51" or "42,45,50-51" -> the seeds, a usage error for anything else."""
    seeds: list[int] = []
    try:
        for part in (s.strip() for s in value.split(",") if s.strip()):
            low, _, high = part.partition("-") if not part.startswith("-") else (part, "", "")
            first, last = int(low), int(high) if high else int(low)
            if last < first or last - first > 10000:
                raise ValueError
            seeds += range(first, last + 1)
    except ValueError:
        raise click.BadParameter("expected seeds like 42-51 or 42,43,50") from None
    if not seeds:
        raise click.BadParameter("expected at least one seed")
    return seeds


def published_path(option: Path | None, start: Path | None = None) -> Path | None:
    """``--published``, else the first ``shared/reference/fgd/published_alloc_at_130.csv`` looking
    upward from this checkout (as ``cluster_scenarios.default_openb_dir`` finds the trace)."""
    if option is not None:
        return option
    for parent in (start or Path(__file__).resolve()).parents:
        if (parent / PUBLISHED_SHARED).is_file():
            return parent / PUBLISHED_SHARED
    return None


@click.command("fgd-protocol")
@click.option("--nodes", "nodes_csv", type=_CSV, required=True, help="openb_node_list_gpu_node.csv.")
@click.option("--pods", "pods_csvs", type=_CSV, required=True, multiple=True,
              help="openb pod list(s); repeat for several traces (the trace is the file's name).")
@click.option("--seeds", default="42-51", show_default=True, callback=seed_range, help="Tag seeds, e.g. 42-51.")
@click.option("--scheduler", "schedulers", type=click.Choice(SCHEDULERS), multiple=True,
              default=("fgd", "best-fit"), show_default=True, help="Repeat for several.")
@click.option("--bound", is_flag=True,
              help="Also the offline figures (every arrival known, the same cluster): an upper bound on the "
                   "GPU allocation any placement reaches (scheduler \"bound\") and a feasible placement's "
                   "(\"offline\").")
@click.option("--bound-time-limit", type=FiniteFloatRange(min=1.0), default=40.0, show_default=True,
              help="Seconds per run for the bound's column generation, and again for each of the offline "
                   "placement's two searches.")
@click.option("--published", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="published_alloc_at_130.csv [default: shared/reference/fgd/ in a folder above the checkout].")
@click.option("--window", type=click.IntRange(min=1), default=100, show_default=True,
              help="kubeplace places this many arrivals at a time.")
@click.option("--time-limit", type=FiniteFloatRange(min=0.05), default=1.0, show_default=True,
              help="kubeplace-plan's solver budget per window, seconds.")
@click.option("--via", type=click.Choice(VIA), default="device", show_default=True,
              help="fgd and best-fit on the benchmarks' device simulator, or through kubeplace simulate's engine "
                   "(the nodes renamed with the seeded prefixes, the pods a trace; the same implementation).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def fgd_protocol_command(nodes_csv: Path, pods_csvs: tuple[Path, ...], seeds: list[int],
                         schedulers: tuple[str, ...], bound: bool, bound_time_limit: float, published: Path | None,
                         window: int, time_limit: float, via: str, output: str) -> None:
    """The FGD paper's protocol (Weng et al., ATC 2023), draw for draw: per trace and tag seed, the
    pods sorted by name and shuffled, tuned to 130% of the GPU capacity, the nodes in the seeded
    tie-break order of the authors' simulator; each pod tried once. The figure is the GPU
    allocation (percent) when 130% has arrived, as the authors compute it (alloc_at_130).

    Needs Go installed (its math/rand seeding table). kubeplace places windows of arrivals, each
    with FGD's score twice (ties by the node order, ties to the fuller node), keeping the
    placement that allocates more (bench.online); kubeplace-plan makes a full plan per window
    with the earlier arrivals bound (profile defrag; slow: minutes per run). With --via simulate,
    fgd and best-fit run through kubeplace simulate (every pod of the run arriving in its order,
    one cycle).

    With --bound, two more records per run: "bound", no placement of the run's pods (all known in
    advance, empty nodes) allocates more, and "offline", what an actual placement of them
    allocates (see kubeplace_bench.offline); both are the allocation once every pod has
    arrived, which bounds (and, for "offline", is comparable to) the figure at 130%."""
    from kubeplace_bench.fgd_protocol import (
        PUBLISHED_POLICY,
        protocol_run,
        read_published,
        run_policy,
        trace_name,
        typical_pods,
    )
    from kubeplace_bench.fgd_simulate import run_policy_in_simulate
    from kubeplace_bench.openb import read_nodes, read_pods

    nodes = read_nodes(nodes_csv)
    path = published_path(published)
    reference = read_published(path) if path is not None else {}
    records: list[dict[str, Any]] = []
    for pods_csv in pods_csvs:
        trace = trace_name(pods_csv)
        pods = read_pods(pods_csv)
        dist = typical_pods(pods)
        for seed in seeds:
            run = protocol_run(nodes, pods, seed)
            for scheduler in schedulers:
                t0 = time.perf_counter()
                if scheduler == "kubeplace":
                    value = _online(nodes, run, dist, window)
                elif scheduler == "kubeplace-plan":
                    value = _kubeplace_plan(nodes, run, window, time_limit, seed)
                elif via == "simulate":
                    value = run_policy_in_simulate(scheduler, nodes, run, dist)
                else:
                    value = run_policy(scheduler, nodes, run, dist)
                seconds = time.perf_counter() - t0
                record: dict[str, Any] = {"trace": trace, "seed": seed, "scheduler": scheduler,
                                          "alloc_at_130": None if math.isnan(value) else value,
                                          "seconds": round(seconds, 1)}
                ref = reference.get((trace, PUBLISHED_POLICY.get(scheduler, ""), seed))
                if ref is not None:
                    record["published"] = ref
                records.append(record)
                click.echo(f"{trace} seed {seed} {scheduler}: {value:.2f}"
                           + (f" (published {ref:.2f})" if ref is not None else "")
                           + f" [{seconds:.1f}s]", err=True)
            if bound:
                records += _offline(nodes, run, trace, seed, bound_time_limit)
    click.echo(json.dumps(records, indent=2) if output == "json" else table(records, path))


def _offline(nodes: Any, run: Any, trace: str, seed: int, seconds: float) -> list[dict[str, Any]]:
    from kubeplace_bench.offline import offline

    found = offline(nodes, run.pods, seconds, seed)
    click.echo(f"{trace} seed {seed} bound: {found.bound_percent:.2f}, offline placement: {found.placed_percent:.2f}"
               f" [{found.seconds:.1f}s{'' if found.bound.converged else ', bound LP not converged'}]", err=True)
    return [{"trace": trace, "seed": seed, "scheduler": "bound", "alloc_at_130": found.bound_percent},
            {"trace": trace, "seed": seed, "scheduler": "offline", "alloc_at_130": found.placed_percent,
             "seconds": round(found.seconds, 1)}]


def _online(nodes: Any, run: Any, dist: Any, window: int) -> float:
    from kubeplace_bench.fgd_protocol import alloc_at, rows_of
    from kubeplace_bench.gpusim import Cluster
    from kubeplace_bench.online import place_in_windows

    result = place_in_windows(Cluster.build(nodes), run.pods, dist, window, run.tie_rank)
    return alloc_at(*rows_of(run.pods, result.placed), sum(n.gpus for n in nodes))


def _kubeplace_plan(nodes: Any, run: Any, window: int, time_limit: float, seed: int) -> float:
    from kubeplace_bench.fgd_protocol import alloc_at, rows_of
    from kubeplace_bench.gpusim import Cluster
    from kubeplace_bench.report import kubeplace_windows

    placed, _ = kubeplace_windows(Cluster.build(nodes), nodes, run.pods, window, time_limit, seed, "defrag")
    return alloc_at(*rows_of(run.pods, placed), sum(n.gpus for n in nodes))


def table(records: list[dict[str, Any]], published: Path | None) -> str:
    """One line per (trace, seed, scheduler), the published value and the difference beside ours,
    then the mean per (trace, scheduler), and for the other schedulers the difference from FGD's
    mean on the same trace. A run with no row near 130% arrived shows nan."""

    def ours(r: dict[str, Any]) -> float:
        return math.nan if r["alloc_at_130"] is None else float(r["alloc_at_130"])

    head = f"{'trace':<28} {'seed':>4} {'scheduler':<10} {'ours':>7} {'published':>9} {'diff':>6}"
    lines = [head]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["trace"], r["scheduler"]), []).append(r)
        ref = r.get("published")
        lines.append(f"{r['trace']:<28} {r['seed']:>4} {r['scheduler']:<10} {ours(r):>7.2f} "
                     + (f"{ref:>9.2f} {ours(r) - ref:>+6.2f}" if ref is not None else f"{'-':>9}"))
    lines += ["", head.replace("seed", "runs") + f" {'vs fgd':>7}"]
    means = {key: sum(ours(r) for r in rows) / len(rows) for key, rows in groups.items()}
    for (trace, scheduler), rows in groups.items():
        mean = means[(trace, scheduler)]
        refs = [r["published"] for r in rows if "published" in r]
        ref = sum(refs) / len(refs) if refs and len(refs) == len(rows) else math.nan
        fgd = means.get((trace, "fgd"), math.nan) if scheduler != "fgd" else math.nan
        lines.append(f"{trace:<28} {len(rows):>4} {scheduler:<10} {mean:>7.2f} "
                     + (f"{ref:>9.2f} {mean - ref:>+6.2f}" if not math.isnan(ref) else f"{'-':>9} {'':>6}")
                     + (f" {mean - fgd:>+7.2f}" if not math.isnan(fgd) else ""))
    lines.append(f"published: {published}" if published is not None else "published: not found")
    return "\n".join(lines)
