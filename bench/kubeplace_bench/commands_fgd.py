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
@click.option("--offline/--no-offline", default=True, show_default=True,
              help="With --bound, the offline placement too (its two searches take twice the bound's time).")
@click.option("--resume", "resume", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSON file of the records: those already in it are kept and not run again, each new one "
                   "is written to it as it finishes (an interrupted run continues).")
@click.option("--jobs", type=click.IntRange(min=1, max=64), default=1, show_default=True,
              help="Worker processes (one run each at a time).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def fgd_protocol_command(nodes_csv: Path, pods_csvs: tuple[Path, ...], seeds: list[int],
                         schedulers: tuple[str, ...], bound: bool, bound_time_limit: float, published: Path | None,
                         window: int, time_limit: float, via: str, offline: bool, resume: Path | None, jobs: int,
                         output: str) -> None:
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
    arrived, which bounds (and, for "offline", is comparable to) the figure at 130%.

    Ends with the summary per trace (kubeplace_bench.fgd_table): each scheduler's mean, the
    published FGD and best-fit means, kubeplace - FGD and the share of the FGD-to-bound gap
    kubeplace closes; the JSON is {"records": [...], "summary": [...]}."""
    from kubeplace_bench import fgd_table
    from kubeplace_bench.fgd_protocol import PUBLISHED_POLICY, read_published

    path = published_path(published)
    reference = read_published(path) if path is not None else {}
    options = fgd_table.Options(nodes_csv.resolve(), window, time_limit, via, bound_time_limit, offline)
    try:
        records = fgd_table.load(resume) if resume is not None else []
        if resume is not None:  # written now, so a path that cannot be is refused before any run
            fgd_table.save(resume, records, [])
    except (ValueError, OSError) as e:
        raise click.UsageError(f"--resume {e}") from None
    have = {fgd_table.key(r) for r in records}
    every = fgd_table.tasks([p.resolve() for p in pods_csvs], seeds, schedulers, bound)
    todo = [t for t in every if not set(t.keys(options)) <= have]
    if resume is not None:
        click.echo(f"{resume}: {len(records)} records kept, {len(todo)} of {len(every)} runs to do", err=True)
    started, finished = time.monotonic(), 0

    def done(task: fgd_table.Task, new: list[dict[str, Any]]) -> None:
        nonlocal finished
        finished += 1
        for r in new:
            ref = reference.get((r["trace"], PUBLISHED_POLICY.get(r["scheduler"], ""), r["seed"]))
            if ref is not None:
                r["published"] = ref
            value = math.nan if r["alloc_at_130"] is None else r["alloc_at_130"]
            click.echo(f"[{finished}/{len(todo)} {time.monotonic() - started:.0f}s] {r['trace']} seed {r['seed']} "
                       f"{r['scheduler']}: {value:.2f}" + (f" (published {ref:.2f})" if ref is not None else "")
                       + (f" [{r['seconds']:.1f}s]" if "seconds" in r else "")
                       + (" (bound LP not converged)" if r.get("converged") is False else ""), err=True)
        records[:] = [r for r in records if fgd_table.key(r) not in {fgd_table.key(n) for n in new}] + new
        if resume is not None:
            fgd_table.save(resume, records, fgd_table.summary(records, reference, PUBLISHED_POLICY))

    fgd_table.execute(todo, options, jobs, done)
    records.sort(key=_order(records, schedulers))
    summary = fgd_table.summary(records, reference, PUBLISHED_POLICY)
    if resume is not None:
        fgd_table.save(resume, records, summary)
    if output == "json":
        click.echo(json.dumps({"records": records, "summary": summary}, indent=2))
    else:
        click.echo(table(records, path) + "\n\n" + fgd_table.summary_table(summary))


def _order(records: list[dict[str, Any]], schedulers: tuple[str, ...]) -> Any:
    """Records by trace (as first seen), seed, then scheduler (as the command lists them)."""
    traces = {t: k for k, t in enumerate(dict.fromkeys(r["trace"] for r in records))}
    rank = {s: k for k, s in enumerate(dict.fromkeys((*schedulers, *SCHEDULERS, "bound", "offline")))}
    return lambda r: (traces[r["trace"]], r["seed"], rank.get(r["scheduler"], len(rank)))


def run_scheduler(scheduler: str, nodes: Any, run: Any, dist: Any, seed: int, options: Any) -> float:
    """One scheduler's figure on one run (``options`` a ``fgd_table.Options``)."""
    from kubeplace_bench.fgd_protocol import run_policy
    from kubeplace_bench.fgd_simulate import run_policy_in_simulate

    if scheduler == "kubeplace":
        return _online(nodes, run, dist, options.window)
    if scheduler == "kubeplace-plan":
        return _kubeplace_plan(nodes, run, options.window, options.time_limit, seed)
    if options.via == "simulate":
        return run_policy_in_simulate(scheduler, nodes, run, dist)
    return run_policy(scheduler, nodes, run, dist)


def run_offline(nodes: Any, run: Any, seed: int, seconds: float, placement: bool = True) -> list[dict[str, Any]]:
    """The bound's record, and the offline placement's when ``placement``."""
    from kubeplace_bench.offline import bound_percent, offline

    if not placement:
        t0 = time.perf_counter()
        value, converged = bound_percent(nodes, run.pods, seconds)
        return [{"scheduler": "bound", "alloc_at_130": value, "converged": converged,
                 "seconds": round(time.perf_counter() - t0, 1)}]
    found = offline(nodes, run.pods, seconds, seed)
    return [{"scheduler": "bound", "alloc_at_130": found.bound_percent, "converged": found.bound.converged},
            {"scheduler": "offline", "alloc_at_130": found.placed_percent, "seconds": round(found.seconds, 1)}]


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
    """One line per (trace, seed, scheduler), the published value and the difference beside ours (the
    means follow in the summary). A run with no row near 130% arrived shows nan."""

    def ours(r: dict[str, Any]) -> float:
        return math.nan if r["alloc_at_130"] is None else float(r["alloc_at_130"])

    lines = [f"{'trace':<28} {'seed':>4} {'scheduler':<10} {'ours':>7} {'published':>9} {'diff':>6}"]
    for r in records:
        ref = r.get("published")
        lines.append(f"{r['trace']:<28} {r['seed']:>4} {r['scheduler']:<10} {ours(r):>7.2f} "
                     + (f"{ref:>9.2f} {ours(r) - ref:>+6.2f}" if ref is not None else f"{'-':>9}"))
    lines.append(f"published: {published}" if published is not None else "published: not found")
    return "\n".join(lines)
