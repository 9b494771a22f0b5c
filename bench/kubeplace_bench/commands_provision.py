"""``kubeplace bench provision-scale``: ``plan --provision`` on a large backlog against a large
catalogue, with the FFD greedy's cost (Karpenter's way) beside it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from kubeplace.cli.render import stdout_console, table
from kubeplace_bench.provision_scale import ProvisionScaleSpec, run_provision_scale

COLUMNS = ("pods", "instance_types", "offerings", "seconds_snapshot", "seconds_plan", "pods_placed", "new_nodes",
           "cost_per_hour", "greedy_cost_per_hour", "saving_vs_greedy", "bound_per_hour", "gap", "status", "verified")


@click.command("provision-scale")
@click.option("--pods", type=click.IntRange(min=1), default=10_000, show_default=True, help="Pending pods.")
@click.option("--types", type=click.IntRange(min=1), default=500, show_default=True, help="Instance types.")
@click.option("--zones", type=click.IntRange(1, 26), default=4, show_default=True,
              help="Zones each type is offered in, on-demand and spot.")
@click.option("--shapes", type=click.IntRange(min=1), default=40, show_default=True, help="Distinct pod shapes.")
@click.option("--spot-pool", is_flag=True, help="A spot NodePool of weight 50 beside the on-demand one.")
@click.option("--time-limit", type=click.FloatRange(min=1.0), default=45.0, show_default=True,
              help="The plan's --time-limit.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
def provision_scale_command(pods: int, types: int, zones: int, shapes: int, spot_pool: bool, time_limit: float,
                            seed: int, output: str) -> None:
    """Time to a verified provisioning plan, its cost per hour, bound and gap, and the greedy's cost."""
    spec = ProvisionScaleSpec(pods=pods, types=types, zones=zones, shapes=shapes, seed=seed, spot_pool=spot_pool)
    echo_row(run_provision_scale(spec, time_limit).to_dict(), COLUMNS, output)


def echo_row(result: dict[str, Any], columns: Sequence[str], output: str) -> None:
    """One result as JSON, or as a one-row table of ``columns``."""
    if output == "json":
        click.echo(json.dumps(result, indent=2))
        return
    rows = table(*(c.upper() for c in columns))
    rows.add_row(*(str(result[c]) for c in columns))
    stdout_console().print(rows)
