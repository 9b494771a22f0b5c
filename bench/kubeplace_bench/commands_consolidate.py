"""``kubeplace bench consolidate-scale``: ``rebalance --consolidate`` on a large fragmented cluster."""

from __future__ import annotations

import click

from kubeplace.cli.options import FiniteFloatRange
from kubeplace_bench.commands_provision import echo_row
from kubeplace_bench.consolidate_scale import ConsolidateScaleSpec, run_consolidate_scale

COLUMNS = ("nodes", "pods", "cost_before", "cost_after", "bound", "gap", "nodes_removed", "nodes_added",
           "pods_moved", "status", "verified", "seconds")


@click.command("consolidate-scale")
@click.option("--nodes", type=click.IntRange(min=1), default=200, show_default=True, help="Karpenter nodes.")
@click.option("--replace", "replace_nodes", is_flag=True, help="Also answers that add cheaper nodes (--replace).")
@click.option("--time-limit", type=FiniteFloatRange(min=1.0), default=30.0, show_default=True,
              help="The consolidation's --time-limit.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
def consolidate_scale_command(nodes: int, replace_nodes: bool, time_limit: float, seed: int, output: str) -> None:
    """Cost per hour before and after, bound, gap, nodes removed, pods moved and seconds of
    `rebalance --consolidate` on a generated fragmented Karpenter cluster, on paper."""
    result = run_consolidate_scale(ConsolidateScaleSpec(nodes=nodes, seed=seed, replace=replace_nodes), time_limit)
    echo_row(result.to_dict(), COLUMNS, output)
