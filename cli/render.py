"""Printing plans: readable tables for people, JSON/YAML for machines."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml
from rich.console import Console, RenderableType
from rich.progress import Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
from rich.progress_bar import ProgressBar
from rich.style import StyleType
from rich.table import Table
from rich.text import Text

from kubeplace.kube.catalogue import PRICE_UNIT
from kubeplace.kube.text import printable
from kubeplace.plan.plan import Plan, Provision
from kubeplace.solver.run import Event, OnEvent

PIPE_WIDTH = 400
"""Columns when stdout is not a terminal: rows stay on one line, as kubectl prints them."""


def stdout_console() -> Console:
    return Console() if sys.stdout.isatty() else Console(width=PIPE_WIDTH, soft_wrap=True)


def dump(data: Any, output: str) -> str:
    if output == "json":
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    return yaml.safe_dump(data, sort_keys=False)


def say(console: Console, text: str) -> None:
    """One line of plain text: escaped, and never read as rich markup (``[bold]`` stays as is)."""
    console.print(printable(text), markup=False, highlight=False)


class PlainTable(Table):
    """A table whose string cells are escaped and shown as they are, never read as markup."""

    def add_row(self, *renderables: RenderableType | None, style: StyleType | None = None,
                end_section: bool = False) -> None:
        cells = [Text(printable(cell)) if isinstance(cell, str) else cell for cell in renderables]
        super().add_row(*cells, style=style, end_section=end_section)


def table(*columns: str) -> Table:
    out = PlainTable(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c in columns:
        out.add_column(c, overflow="fold")
    return out


def print_plan(plan: Plan, output: str, console: Console) -> None:
    if output in ("json", "yaml"):
        console.out(dump(plan.to_dict(), output), end="", highlight=False)
        return
    wide = output == "wide"
    gpus = any(p.gpus for p in plan.placements)
    volumes = wide and any(p.volumes for p in plan.placements)
    claims = wide and any(p.claims for p in plan.placements)
    bindings = table("NAMESPACE", "POD", "NODE", *(["GPUS"] if gpus else []), *(["VOLUMES"] if volumes else []),
                     *(["DEVICES"] if claims else []), *(["UID"] if wide else []))
    for p in plan.placements:
        bindings.add_row(p.namespace, p.name, p.node, *([",".join(map(str, p.gpus))] if gpus else []),
                         *([", ".join(f"{v.claim}={v.volume or '(provision)'}" for v in p.volumes)] if volumes else []),
                         *([", ".join(f"{c.claim}={'+'.join(r.device.device for r in c.allocation.results)}"
                                      for c in p.claims)] if claims else []),
                         *([p.uid] if wide else []))
    if plan.placements:
        console.print(bindings)
    if plan.provision is not None and plan.provision.nodes:
        console.print()
        new = table("NEW NODE", "NODEPOOL", "INSTANCE TYPE", "ZONE", "CAPACITY TYPE", "PRICE/H", "PODS")
        for n in plan.provision.nodes:
            t = n.template
            new.add_row(n.name, t.node_pool.name, t.instance_type.name, t.offering.zone, t.offering.capacity_type,
                        f"{t.price / PRICE_UNIT:.4f}", str(len(n.pods)))
        console.print(new)
    if plan.preemptions:
        console.print()
        victims = table("NAMESPACE", "EVICT", "NODE", "PRIORITY", "FOR", *(["UID"] if wide else []))
        for v in plan.preemptions:
            victims.add_row(v.namespace, v.name, v.node, str(v.priority), ", ".join(v.for_pods),
                            *([v.uid] if wide else []))
        console.print(victims)
    if plan.unplaced:
        console.print()
        reasons = table("NAMESPACE", "POD", "NOT PLACED BECAUSE")
        for u in plan.unplaced:
            reasons.add_row(u.namespace, u.name, "; ".join(u.reasons))
        console.print(reasons)
    console.print()
    for line in summary_text(plan).splitlines():
        say(console, line)


def summary_text(plan: Plan) -> str:
    s = plan.summary
    lines = [
        f"Pods placed: {s.pods_placed}   not placed: {s.pods_unplaced - s.pods_left_to_default_scheduler}   "
        f"left to the default scheduler: {s.pods_left_to_default_scheduler}",
        "Utilisation: " + ", ".join(f"{u.resource} {u.before:.1%} -> {u.after:.1%}" for u in s.utilisation),
        f"Objective ({s.profile}): {s.objective_before:.4f} -> {s.objective:.4f}"
        + (f"   GPU fragmentation: {s.gpu_fragmentation / 1000:.1f} GPUs ({s.gpu_fragmentation_ratio:.1%} of free)"
           if s.gpu_fragmentation else ""),
        f"Solver: {s.backend}, status {s.status}, placed weight {s.placed_weight}, bound "
        f"{'n/a' if s.bound is None else s.bound}, gap {'n/a' if s.gap is None else f'{s.gap:.2%}'}, "
        f"{s.seconds:.2f}s",
        f"Verified: {s.pods_placed} placement(s) re-checked by the independent verifier, none refused" if s.verified
        else "Verified: NO, the independent verifier refused this plan",
    ]
    if plan.provision is not None:
        lines.append(provision_text(plan.provision))
    if s.preemption is not None:
        p = s.preemption
        highest = "none" if p.highest_victim_priority is None else str(p.highest_victim_priority)
        lines += [f"Preemption: {p.victims} pod(s) evicted for {p.preemptors} pod(s), highest victim priority "
                  f"{highest}, {p.pdb_violations} PodDisruptionBudget violation(s), status {p.status}",
                  "Preemption order: " + " > ".join(p.order)]
    return "\n".join(lines)


def provision_text(provision: Provision) -> str:
    """The new nodes in one line: how many, their cost per hour, the bound, the gap, the greedy's cost."""
    bound = "n/a" if provision.bound is None else f"{provision.bound / PRICE_UNIT:.4f}"
    gap = "n/a" if provision.gap is None else f"{provision.gap:.2%}"
    return (f"Provision: {len(provision.nodes)} new node(s), {provision.cost / PRICE_UNIT:.4f}/h, bound {bound}/h, "
            f"gap {gap}, status {provision.status}; Karpenter's way (first-fit decreasing, cheapest type per node): "
            f"{provision.greedy_cost / PRICE_UNIT:.4f}/h")


def event_text(e: Event) -> str:
    """An Event in one line: a plan's placed weight against its bound, or a rebalance's moves."""
    if e.moves is not None:
        return f"{e.step}: objective {e.objective:.6g}, {e.moves} pod(s) moved"
    bound = "n/a" if e.bound is None else str(e.bound)
    return (f"{e.step}: placed weight {e.placed_weight} (bound {bound}), {e.pods_placed} pods, "
            f"objective {e.objective:.4f}")


def solver_seconds(task: Task) -> float:
    """Seconds since the solver started (0 until its first answer; before it, the snapshot is
    aggregated into the model, which the budget does not count)."""
    started = task.fields.get("solver_started")
    return 0.0 if started is None else time.monotonic() - float(started)


class BudgetBar(ProgressColumn):
    """The solver's time spent of its budget, redrawn as time passes (not only at events)."""

    def render(self, task: Task) -> RenderableType:
        total = task.total or 1.0
        return ProgressBar(total=total, completed=min(solver_seconds(task), total), width=24)


class BudgetClock(ProgressColumn):
    def render(self, task: Task) -> RenderableType:
        spent, total = solver_seconds(task), task.total or 0.0
        if spent > total + 0.5:
            return Text(f"{total:g}s budget spent, finishing")
        return Text(f"{min(spent, total):.0f}s of a {total:g}s budget")


@contextmanager
def progress(enabled: bool, time_limit: float, console: Console | None = None,
             label: str = "") -> Iterator[OnEvent | None]:
    """A progress bar on a terminal: the time spent of ``time_limit`` and the latest incumbent
    (and bound) the solver reported, after ``label``; nothing (None) when ``enabled`` is false or
    stderr is not a terminal (piped, redirected, CI logs)."""
    err = console or Console(stderr=True)
    if not (enabled and err.is_terminal):
        yield None
        return
    columns = (SpinnerColumn(), BudgetBar(), BudgetClock(), TextColumn("{task.description}"))
    with Progress(*columns, console=err, transient=True, refresh_per_second=8) as bar:
        prefix = f"{printable(label)}: " if label else ""
        task = bar.add_task(f"{prefix}building the model...", total=time_limit, solver_started=None)

        def update(e: Event) -> None:
            bar.update(task, description=prefix + printable(event_text(e)),
                       solver_started=time.monotonic() - e.seconds)

        yield update


def recorder(show: OnEvent | None) -> tuple[OnEvent, list[Event]]:
    """A callback that keeps every Event (for a report) and passes it on to ``show``."""
    events: list[Event] = []

    def record(e: Event) -> None:
        events.append(e)
        if show is not None:
            show(e)

    return record, events
