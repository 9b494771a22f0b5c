"""``kubeplace bench provision-scale``: ``plan --provision`` on a large backlog against a large
catalogue, with the FFD greedy's cost (Karpenter's way) beside it; or (``--workload``) the backlogs
of ``bench capacity`` planned offline."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from kubeplace.cli.options import FiniteFloatRange
from kubeplace.cli.render import stdout_console, table
from kubeplace_bench.capacity_workloads import WORKLOADS
from kubeplace_bench.provision_scale import ProvisionScaleSpec, run_capacity_workload, run_provision_scale

PROVISIONING = tuple(name for name in WORKLOADS if name != "consolidation")
"""The workloads of ``bench capacity`` with a pending backlog."""
COLUMNS = ("pods", "instance_types", "offerings", "seconds_snapshot", "seconds_plan", "pods_placed", "new_nodes",
           "cost_per_hour", "greedy_cost_per_hour", "saving_vs_greedy", "bound_per_hour", "gap", "status", "verified")


@click.command("provision-scale")
@click.option("--pods", type=click.IntRange(min=1), default=10_000, show_default=True, help="Pending pods.")
@click.option("--types", type=click.IntRange(min=1), default=500, show_default=True, help="Instance types.")
@click.option("--zones", type=click.IntRange(1, 26), default=4, show_default=True,
              help="Zones each type is offered in, on-demand and spot.")
@click.option("--shapes", type=click.IntRange(min=1), default=40, show_default=True, help="Distinct pod shapes.")
@click.option("--spot-pool", is_flag=True, help="A spot NodePool of weight 50 beside the on-demand one.")
@click.option("--time-limit", type=FiniteFloatRange(min=1.0), default=45.0, show_default=True,
              help="The plan's --time-limit.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--workload", "workloads", multiple=True, type=click.Choice(PROVISIONING), metavar="NAME",
              help="Instead of the synthetic backlog, plan this workload of `bench capacity` (repeatable: "
                   f"{', '.join(PROVISIONING)}) from its catalogue and NodePools, without a cluster or Karpenter; "
                   "--seed is the workload's and the solver's, --pods/--types/--zones/--shapes do not apply.")
@click.option("--scale", type=FiniteFloatRange(min=0.01, max=10.0), default=1.0, show_default=True,
              help="With --workload: multiplies its pod count, as in `bench capacity`.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
def provision_scale_command(pods: int, types: int, zones: int, shapes: int, spot_pool: bool, time_limit: float,
                            seed: int, workloads: tuple[str, ...], scale: float, output: str) -> None:
    """Time to a verified provisioning plan, its cost per hour, bound and gap, and the greedy's cost."""
    if workloads:
        results = [{"workload": name, **run_capacity_workload(name, seed, scale, time_limit).to_dict()}
                   for name in dict.fromkeys(workloads)]
        echo_rows(results, ("workload", *COLUMNS), output)
    else:
        spec = ProvisionScaleSpec(pods=pods, types=types, zones=zones, shapes=shapes, seed=seed, spot_pool=spot_pool)
        echo_row(run_provision_scale(spec, time_limit).to_dict(), COLUMNS, output)


def echo_row(result: dict[str, Any], columns: Sequence[str], output: str) -> None:
    """One result as JSON, or as a one-row table of ``columns``."""
    if output == "json":
        click.echo(json.dumps(result, indent=2))
        return
    echo_table([result], columns)


def echo_rows(results: list[dict[str, Any]], columns: Sequence[str], output: str) -> None:
    """Results as a JSON list, or as a table of ``columns``, a row each."""
    if output == "json":
        click.echo(json.dumps(results, indent=2))
        return
    echo_table(results, columns)


def echo_table(results: list[dict[str, Any]], columns: Sequence[str]) -> None:
    rows = table(*(c.upper() for c in columns))
    for result in results:
        rows.add_row(*(str(result[c]) for c in columns))
    stdout_console().print(rows)
