"""The report as one self-contained HTML file: inline CSS and inline SVG charts, no script, no
font, image or style sheet from anywhere else, so it opens offline and can be mailed around.

Tables are capped (MAX_ROWS) so that a 5,000-node cluster's report stays a few MB; the plan's
JSON (``-o json``) has every row.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from kubeplace.kube.errors import KubeplaceError
from kubeplace.plan.plan import Unplaced
from kubeplace.report import charts
from kubeplace.report.build import Report, message_counts, reason_counts
from kubeplace.report.load import ClusterLoad
from kubeplace.solver.run import Event

MAX_ROWS = 500
STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1c2833;
       margin: 0 auto; max-width: 1100px; padding: 0 24px 48px; }
h1 { font-size: 24px; margin: 24px 0 4px; }
h2 { font-size: 19px; margin: 36px 0 8px; border-bottom: 1px solid #d5dbe0; }
h3 { font-size: 15px; margin: 20px 0 6px; }
.source { color: #5d6d7e; margin: 0 0 12px; } nav a { margin-right: 14px; }
pre.summary { background: #f4f6f7; padding: 10px 12px; border-radius: 4px; white-space: pre-wrap; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { text-align: left; padding: 3px 10px 3px 0; border-bottom: 1px solid #eaeded; vertical-align: top; }
th { font-weight: 600; } td.num, th.num { text-align: right; }
figure { margin: 8px 0 20px; } figure svg { max-width: 100%; height: auto; }
.note { color: #5d6d7e; font-size: 13px; }
"""


def esc(value: object) -> str:
    """Text from the input as HTML text: control characters and bidi overrides escaped as in the
    charts (``charts.plain``), then HTML's own characters."""
    return html.escape(charts.plain(str(value)), quote=True)


def table(head: Sequence[str], rows: Iterable[Sequence[object]], numeric: Sequence[int] = ()) -> str:
    def cell(tag: str, k: int, value: object) -> str:
        return f'<{tag} class="num">{esc(value)}</{tag}>' if k in numeric else f"<{tag}>{esc(value)}</{tag}>"

    header = "".join(cell("th", k, h) for k, h in enumerate(head))
    body = "".join("<tr>" + "".join(cell("td", k, v) for k, v in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def capped(rows: Sequence[Sequence[object]], what: str) -> tuple[Sequence[Sequence[object]], str]:
    if len(rows) <= MAX_ROWS:
        return rows, ""
    return rows[:MAX_ROWS], f'<p class="note">The first {MAX_ROWS} of {len(rows)} {what}.</p>'


def figure(svg: str | None, caption: str) -> str:
    if svg is None:
        return ""
    return (f'<figure class="chart" data-chart="{esc(caption)}">{svg}'
            f'<figcaption class="note">{esc(caption)}</figcaption></figure>')


def percent(used: float, capacity: float) -> str:
    return f"{used / capacity:.1%}" if capacity > 0 else "-"


def pool_table(load: ClusterLoad) -> str:
    members = np.array(load.pools)
    rows = []
    for pool in load.pool_names():
        here = members == pool
        cells = [f"{percent(load.before[here, r].sum(), load.capacity[here, r].sum())} → "
                 f"{percent(load.after[here, r].sum(), load.capacity[here, r].sum())}"
                 for r in range(len(load.resources))]
        rows.append([pool, int(here.sum()), *cells])
    return table(["pool", "nodes", *load.resources], rows, numeric=[1])


def device_table(load: ClusterLoad) -> str:
    members = np.array(load.pools)
    rows = []
    for pool in load.pool_names():
        here = members == pool
        counts = []
        for shares in (load.devices_before[here], load.devices_after[here]):
            known = shares[~np.isnan(shares)]
            counts.append((int((known == 0).sum()), int(((known > 0) & (known < 1)).sum()), int((known >= 1).sum())))
        if sum(counts[0]) == 0:
            continue
        rows.append([pool, sum(counts[0]), *(f"{b} → {a}" for b, a in zip(counts[0], counts[1], strict=True))])
    return table(["pool", "devices", "free", "partly used (fragments)", "full"], rows, numeric=[1])


Section = tuple[str, str, str]
"""(anchor, title, body) of one part of the report."""


def utilisation_section(load: ClusterLoad) -> Section:
    scale = ("one bar per node" if load.capacity.shape[0] <= charts.PER_NODE_LIMIT
             else "the distribution over each pool's nodes")
    parts = [f'<p class="note">Requests / allocatable of {len(load.nodes)} nodes in {len(set(load.pools))} '
             f"pool(s), {scale}. The table sums each pool.</p>", pool_table(load)]
    for r, name in enumerate(load.resources):
        parts.append(f"<h3>{esc(name)}</h3>")
        parts.append(figure(charts.utilisation_chart(load, r), f"{name} utilisation before and after"))
    return "utilisation", "Utilisation per node, before and after", "".join(parts)


def device_section(load: ClusterLoad) -> Section:
    chart = charts.device_chart(load)
    if chart is None:
        return "gpus", "GPU devices", '<p class="note">No node has GPU devices.</p>'
    return ("gpus", "GPU devices", '<p class="note">Each device\'s used share: pale is free, amber to blue a '
            "fragment (partly used), dark blue full.</p>" + device_table(load)
            + figure(chart, "GPU device map before and after"))


def unplaced_section(unplaced: Sequence[Unplaced]) -> Section:
    if not unplaced:
        return "unplaced", "Pods not placed", "<p>Every pending pod is placed.</p>"
    messages, more = capped([[m, n, ex] for m, n, ex in message_counts(unplaced)], "messages")
    pods, more_pods = capped([[u.namespace, u.name, "; ".join(u.reasons)] for u in unplaced], "pods")
    return ("unplaced", "Pods not placed",
            figure(charts.reasons_chart(reason_counts(unplaced)), "pods not placed by reason")
            + "<h3>Messages</h3>" + table(["message", "pods", "for example"], messages, numeric=[1]) + more
            + "<h3>Pods</h3>" + table(["namespace", "pod", "not placed because"], pods) + more_pods)


def moves_section(report: Report) -> Section:
    if not report.moves:
        return "moves", "Moves", "<p>No pod moves.</p>"
    pool = dict(zip(report.load.nodes, report.load.pools, strict=True))
    rows, more = capped([[f"{m.namespace}/{m.name}", m.source, pool.get(m.source, ""), m.target,
                          pool.get(m.target, ""), m.why] for m in report.moves], "moves")
    return "moves", "Moves", table(["pod", "from", "pool", "to", "pool", "why"], rows) + more


def solver_section(events: Sequence[Event]) -> Section:
    if not events:
        return "solver", "Solver progress", '<p class="note">The solver reported no progress (nothing to solve).</p>'
    plan = events[0].moves is None
    rows, more = capped([[e.step, f"{e.seconds:.2f}", e.placed_weight if plan else e.moves,
                          ("n/a" if e.bound is None else e.bound) if plan else "", f"{e.objective:.6g}"]
                         for e in events], "steps")
    head = ["step", "seconds", "placed weight" if plan else "pods moved", "bound" if plan else "", "objective"]
    note = ("" if plan else '<p class="note">A rebalance has no bound: its exact objective is not bounded by the '
            "linear model it solves.</p>")
    return ("solver", "Solver progress", figure(charts.progress_chart(events), "incumbent and bound over time")
            + note + table(head, rows, numeric=[1, 2, 3, 4]) + more)


def render(report: Report) -> str:
    try:
        release = version("kubeplace")
    except PackageNotFoundError:
        release = "dev"
    middle = unplaced_section(report.unplaced) if report.command == "plan" else moves_section(report)
    sections = [utilisation_section(report.load), device_section(report.load), middle, solver_section(report.events)]
    nav = "".join(f'<a href="#{anchor}">{esc(title)}</a>' for anchor, title, _ in sections)
    body = "".join(f'<section id="{anchor}"><h2>{esc(title)}</h2>{text}</section>' for anchor, title, text in sections)
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in report.notes)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>kubeplace {esc(report.command)}: {esc(report.source or 'cluster')}</title>"
            f"<style>{STYLE}</style></head><body>"
            f"<header><h1>kubeplace {esc(report.command)}</h1>"
            f'<p class="source">{esc(report.source or "the cluster")} · kubeplace {esc(release)}</p>'
            f'<pre class="summary">{esc(chr(10).join(report.summary))}</pre>{notes}<nav>{nav}</nav></header>'
            f"{body}</body></html>\n")


def write_report(path: Path, report: Report) -> None:
    """Writes the report; a path that cannot be written is a KubeplaceError (one line, exit 2)."""
    text = render(report)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise KubeplaceError(f"cannot write the report {path}: {e.strerror or e}") from None
