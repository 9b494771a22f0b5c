"""``kubeplace bench capacity``: the real Karpenter and ``kubeplace plan --provision`` side by side.

Registered on the ``bench`` group (commands.py) as ``bench.add_command(capacity_command)``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import click

from kubeplace.cli.options import EXIT_INPUT, FiniteFloatRange


@click.command("capacity")
@click.option("--workload", "workloads", multiple=True, metavar="NAME",
              help="Run this workload (repeatable): web, batch, memory, gpu-gangs, spot, consolidation. Default: all.")
@click.option("--seed", type=int, default=0, show_default=True, help="Workload seed (and kubeplace's solver seed).")
@click.option("--scale", type=FiniteFloatRange(min=0.01, max=10.0), default=1.0, show_default=True,
              help="Multiplies every workload's pod count (0.2: a quick run).")
@click.option("--time-limit", type=FiniteFloatRange(min=0.05), default=30.0, show_default=True,
              help="kubeplace's solver budget per workload, seconds.")
@click.option("--settle", type=FiniteFloatRange(min=1.0), default=60.0, show_default=True,
              help="Karpenter's run of a workload ends after this many seconds without a binding, node or eviction.")
@click.option("--timeout", type=FiniteFloatRange(min=10.0), default=600.0, show_default=True,
              help="The longest a workload's Karpenter run may take, seconds.")
@click.option("--kubeplace-checkout", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              help="Run `kubeplace plan --provision` from this kubeplace checkout (default: this one).")
@click.option("--build", is_flag=True,
              help="Build the control plane and Karpenter if they are not cached (minutes, needs Go).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def capacity_command(workloads: tuple[str, ...], seed: int, scale: float, time_limit: float, settle: float,
                     timeout: float, kubeplace_checkout: Path | None, build: bool, output: str) -> None:
    """Provision the same pending pods with the real Karpenter and with kubeplace.

    Starts a control plane on 127.0.0.1 with the kube-scheduler and Karpenter's kwok provider
    (from `.ci/build-karpenter`'s cache) on one instance-type catalogue. For each workload, on the
    emptied cluster: Karpenter launches nodes for the pending pods and the kube-scheduler binds
    them (nodes by type, zone and capacity type, cost per hour, pods bound, time to the last
    binding); `kubeplace plan --provision` plans the same pods from the same catalogue and
    NodePools (cost per hour, pods placed, bound, gap, time), or is reported "n/a" when that
    checkout's plan has no --provision. The consolidation workload scales a Deployment down and
    lets Karpenter consolidate (WhenEmptyOrUnderutilized), then builds the same cluster again and
    runs `kubeplace rebalance --consolidate --replace --apply` on it: cost before and after, nodes
    removed and launched, pods evicted, time.
    """
    from kubeplace_bench import controlplane_binaries as binaries
    from kubeplace_bench.capacity import Settings, run, table
    from kubeplace_bench.capacity_karpenter import karpenter_build
    from kubeplace_bench.capacity_workloads import WORKLOADS, catalogue
    from kubeplace_bench.commands_throughput import on_control_plane

    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        raise click.BadParameter(f"unknown workload {', '.join(unknown)}; known: {', '.join(WORKLOADS)}",
                                 param_hint="--workload")
    chosen = [WORKLOADS[name](seed, scale) for name in dict.fromkeys(workloads or WORKLOADS)]
    settings = Settings(seed=seed, scale=scale, time_limit=time_limit, settle=settle, timeout=timeout,
                        **({"kubeplace_checkout": kubeplace_checkout.resolve()} if kubeplace_checkout else {}))
    try:
        karpenter = karpenter_build(build)
    except binaries.ControlPlaneError as e:
        _fail(str(e))
    doc = on_control_plane(build, lambda plane, say: run(plane, karpenter, chosen, catalogue(), settings, say),
                           serve_rights=False)
    click.echo(json.dumps(doc, indent=2) if output == "json" else table(doc), nl=output == "json")


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_INPUT)
