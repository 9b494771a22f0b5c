"""``kubeplace bench throughput``: kubeplace serve and the kube-scheduler on a real control plane.

Registered on the ``bench`` group (bench/commands.py) as ``bench.add_command(throughput_command)``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from kubeplace.cli.options import EXIT_INPUT, FiniteFloatRange

if TYPE_CHECKING:
    from kubeplace_bench.cluster import Say
    from kubeplace_bench.controlplane import ControlPlane

COLUMNS = (  # key (dotted: nested), heading, format
    ("pods_bound", "bound", "{}"),
    ("pending", "pending", "{}"),
    ("pods_per_second", "pods/s", "{:.1f}"),
    ("seconds_to_first_bound", "first s", "{:.1f}"),
    ("seconds_to_last_bound", "last s", "{:.1f}"),
    ("latency_seconds.p50", "p50 s", "{:.2f}"),
    ("latency_seconds.p90", "p90 s", "{:.2f}"),
    ("latency_seconds.p99", "p99 s", "{:.2f}"),
    ("latency_seconds.max", "max s", "{:.2f}"),
    ("cpu_seconds", "CPU s", "{:.1f}"),
    ("peak_mib", "peak MiB", "{:.0f}"),
)


@click.command("throughput")
@click.option("--workload", "workloads", default="basic", show_default=True,
              help="Comma-separated: basic, gangs, gpu, churn.")
@click.option("--schedulers", default="kubeplace,kube-scheduler", show_default=True,
              help="Comma-separated: kubeplace, kube-scheduler (run in this order).")
@click.option("--nodes", type=click.IntRange(min=1), default=1000, show_default=True, help="kwok nodes.")
@click.option("--pods", type=click.IntRange(min=0), default=None,
              help="Pods (default: basic 3000, gangs 5500 = about 1000 gangs, gpu as openb's sample, churn 3000).")
@click.option("--arrival-seconds", type=FiniteFloatRange(min=0), default=60.0, show_default=True,
              help="gangs: the gangs arrive evenly over this many seconds.")
@click.option("--duration", type=FiniteFloatRange(min=0), default=600.0, show_default=True,
              help="churn: seconds of deleting and creating pods.")
@click.option("--churn-rate", type=FiniteFloatRange(min=0.1), default=20.0, show_default=True,
              help="churn: pods deleted and created a second.")
@click.option("--openb", "openb_dir", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              help="gpu: the openb CSV directory (default: $KUBEPLACE_OPENB_DIR, else shared/data/openb above the "
                   "checkout; synthetic openb-like shapes when neither is there).")
@click.option("--synthetic-gpu", is_flag=True, help="gpu: synthetic openb-like shapes even when the trace is found.")
@click.option("--settle", type=FiniteFloatRange(min=1), default=15.0, show_default=True,
              help="A run ends after this many seconds without a new binding.")
@click.option("--timeout", type=FiniteFloatRange(min=10), default=900.0, show_default=True,
              help="Bound on each scheduler's run and on each wait, seconds.")
@click.option("--qps", type=click.IntRange(min=1), default=5000, show_default=True,
              help="The kube-scheduler's client QPS and burst.")
@click.option("--serve-arg", "serve_args", multiple=True, metavar="ARG",
              help="An extra `kubeplace serve` argument (repeatable), e.g. --serve-arg=--batch-window=0.5.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--build", is_flag=True,
              help="Build the control plane binaries if they are not cached (10-25 minutes, needs Go).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def throughput_command(workloads: str, schedulers: str, nodes: int, pods: int | None, arrival_seconds: float,
                       duration: float, churn_rate: float, openb_dir: Path | None, synthetic_gpu: bool,
                       settle: float, timeout: float, qps: int, serve_args: tuple[str, ...], seed: int, build: bool,
                       output: str) -> None:
    """Scheduling throughput and latency of kubeplace serve and the kube-scheduler, side by side.

    Starts etcd, kube-apiserver, kube-controller-manager and kwok on 127.0.0.1, creates the kwok
    nodes, then for each scheduler on the same emptied cluster creates the workload, runs the
    scheduler (kubeplace serve as a subprocess with deploy/rbac.yaml's rights; the kube-scheduler
    with its default profile) and measures from a pod watch: pods bound per second, time to the
    last binding, created->bound latency, pods left pending and why, the scheduler's CPU seconds
    and peak memory; gangs bound whole or partly; GPUs bound.
    """
    from kubeplace_bench.throughput import Settings, notes, run
    from kubeplace_bench.throughput_schedulers import SCHEDULERS
    from kubeplace_bench.throughput_workloads import WORKLOADS
    from kubeplace_bench.throughput_workloads import build as build_workload

    chosen = choices(workloads, WORKLOADS, "--workload")
    order = choices(schedulers, SCHEDULERS, "--schedulers")
    built = [build_workload(name, nodes=nodes, pods=pods, seed=seed, arrival_seconds=arrival_seconds,
                            duration=duration, churn_rate=churn_rate, openb_dir=openb_dir, synthetic=synthetic_gpu)
             for name in chosen]
    settings = Settings(settle=settle, timeout=timeout, qps=qps, kubeplace_args=serve_args, seed=seed)
    doc = on_control_plane(build, lambda plane, say: run(plane, built, order, settings, say))
    if output == "json":
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(table(doc, notes(built, settings)))


def on_control_plane(build: bool, action: Callable[[ControlPlane, Say], dict[str, Any]], *,
                     serve_rights: bool = True) -> dict[str, Any]:
    """``action`` on a control plane started for it (the cached binaries, or built with
    ``build``), with deploy/rbac.yaml at hand for kubeplace serve when ``serve_rights``; a failure
    is one line, exit 2."""
    from kubeplace_bench import controlplane as cp
    from kubeplace_bench import controlplane_binaries as binaries
    from kubeplace_bench.cluster import BenchError

    try:
        if serve_rights:
            binaries.checkout_file("deploy", "rbac.yaml")  # the rights kubeplace serve runs with
        bin_dir = binaries.locate_binaries() if build else binaries.cached_binaries()
    except binaries.ControlPlaneError as e:
        _fail(str(e))

    def say(message: str) -> None:
        click.echo(message, err=True)

    try:
        with cp.running_control_plane(bin_dir) as plane:
            say(f"control plane up at {plane.server}")
            return action(plane, say)
    except binaries.ControlPlaneError as e:
        _fail(f"the control plane failed: {e}")
    except (BenchError, cp.ApiRefused, TimeoutError) as e:
        _fail(f"the benchmark failed: {e}")


def choices(text: str, known: tuple[str, ...], option: str) -> list[str]:
    chosen = list(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [c for c in chosen if c not in known]
    if unknown or not chosen:
        raise click.BadParameter(f"unknown {', '.join(unknown) or '(none)'}; known: {', '.join(known)}",
                                 param_hint=option)
    return chosen


def _value(figures: dict[str, Any], key: str) -> Any:
    value: Any = figures
    for part in key.split("."):
        value = value.get(part, 0) if isinstance(value, dict) else 0
    return value


def table(doc: dict[str, Any], legend: list[str]) -> str:
    """One row per workload and scheduler, then per-workload extras and the notes."""
    head = ["workload", "scheduler", *(h for _, h, _ in COLUMNS)]
    rows = [[workload, scheduler, *(fmt.format(_value(figures, key)) for key, _, fmt in COLUMNS)]
            for workload, by_scheduler in doc.items() for scheduler, figures in by_scheduler.items()]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in [head, *rows]]
    extras = []
    for workload, by_scheduler in doc.items():
        for scheduler, f in by_scheduler.items():
            parts = []
            if "gangs" in f:
                parts.append(f"gangs whole {f['gangs_whole']}/{f['gangs']}, partly {f['gangs_partly']}, "
                             f"gang p99 {f['gang_latency_seconds']['p99']}s, "
                             f"bind spread p99 {f['gang_bind_spread_seconds']['p99']}s")
            if "gpus_bound" in f:
                parts.append(f"GPUs bound {f['gpus_bound']} ({f['gpu_pods_bound']} GPU pods), "
                             f"{f['gpus_bound_on_devices']} of them on devices "
                             f"({f['gpu_pods_device_conflicts']} GPU pods that no device holds)")
                if f.get("gpu_pods_with_device_annotation"):
                    parts.append(f"{f['gpu_pods_with_device_annotation']} GPU pods name their devices, "
                                 f"{f['gpu_pods_on_overcommitted_devices']} of them on a device over-committed")
            if "rss_growth_mib" in f:
                parts.append(f"RSS after 1 min {f['rss_mib_after_warmup']} MiB, at end {f['rss_mib_end']} MiB "
                             f"({f['rss_growth_second_half_mib']:+} MiB over the second half; a minute apart: "
                             f"{' '.join(str(m) for m in f['rss_mib_by_period'])}); "
                             f"{f['pods_created']} created, {f['pods_deleted']} deleted")
            if f.get("rebound"):
                parts.append(f"{f['rebound']} pod(s) seen bound to a second node")
            if "serve" in f:
                parts.append("serve " + ", ".join(f"{k} {v}" for k, v in f["serve"].items()))
            if "log_lines" in f:
                parts.append(f"{f['log_lines']} log lines")
            parts += [f"pending {n}x: {m}" for m, n in f.get("pending_reasons", {}).items()]
            if parts:
                extras.append(f"{workload} / {scheduler}: " + "; ".join(parts))
    return "\n".join([*lines, "", *extras, "", *legend])


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_INPUT)
