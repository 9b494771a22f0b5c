"""A simulation's results as rows (the table and JSON) and as an HTML report with time-series
charts (``report/``: inline SVG, no script, opens offline)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.ticker import PercentFormatter

from kubeplace.kube.errors import KubeplaceError
from kubeplace.report import charts, html
from kubeplace.simulate.engine import Case

COLUMNS = ("CASE", "SCHEDULER", "PODS", "STARTED", "GPU ALLOC", "CPU ALLOC", "MEM ALLOC", "GPU FRAG", "GPU FRAG END",
           "PEAK PENDING",
           "DELAY P50", "DELAY P90", "DELAY P99", "GANG WAIT P90", "PREEMPTED", "REFUSED", "CYCLES", "WALL S", "CPU S",
           "DIGEST")
"""The comparison table's columns (allocation and GPU fragmentation: time-weighted mean over the
simulation; GPU FRAG END: at its end)."""


def row(case: Case) -> list[str]:
    s = case.result.summary
    a = s.mean_allocation
    return [case.label, s.scheduler, str(s.pods), str(s.started), f"{a['gpu']:.1%}", f"{a['cpu']:.1%}",
            f"{a['memory']:.1%}", f"{s.fragmentation['mean']:.1%}", f"{s.fragmentation['end']:.1%}",
            str(s.peak_pending_pods), f"{s.delay.p50:.1f}", f"{s.delay.p90:.1f}",
            f"{s.delay.p99:.1f}", f"{s.gang_wait.p90:.1f}" if s.gang_wait.pods else "-", str(s.preemptions),
            str(s.refused), str(s.cycles), f"{s.wall_seconds:.1f}", f"{s.cpu_seconds:.1f}", s.digest]


def as_json(cases: Sequence[Case], samples: bool = True) -> list[dict[str, Any]]:
    out = []
    for case in cases:
        entry: dict[str, Any] = {"case": case.label, "summary": case.result.summary.as_dict()}
        if samples:
            entry["samples"] = [[s.at, s.cpu, s.memory, s.gpu, s.pending_pods, s.pending_gpus, s.fragmented_gpus,
                                 s.fragmentation] for s in case.result.samples]
        out.append(entry)
    return out


SERIES = (("gpu", "GPU allocated", True), ("cpu", "CPU allocated", True), ("memory", "memory allocated", True),
          ("fragmentation", "GPU fragmentation (share of the free GPUs)", True),
          ("pending_pods", "pending pods", False))


def _series_chart(cases: Sequence[Case], field: str, title: str, share: bool) -> str:
    fig = charts.figure(2.6)
    ax = fig.add_subplot()
    for case in cases:
        samples = case.result.samples
        end = case.result.summary.end
        x = np.array([s.at for s in samples] + [end]) / 3600.0
        y = np.array([getattr(s, field) for s in samples] + [getattr(samples[-1], field)], dtype=np.float64)
        ax.step(x, y, where="post", linewidth=1.0, label=f"{case.label} {case.result.summary.scheduler}")
    ax.set_xlabel("simulated hours")
    ax.set_title(title, loc="left")
    if share:
        ax.set_ylim(0, 1.02)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.legend(loc="upper left", fontsize=7, frameon=False)
    ax.grid(axis="y", color="#dde3e8", linewidth=0.6)
    return charts.svg(fig)


def render(cases: Sequence[Case], title: str) -> str:
    table = html.table(COLUMNS, [row(c) for c in cases], numeric=list(range(2, len(COLUMNS) - 1)))
    figures = "".join(html.figure(_series_chart(cases, field, name, share), name) for field, name, share in SERIES)
    by_size = html.table(("CASE", "SCHEDULER", "SIZE", "PODS", "P50", "P90", "P99"),
                         [(c.label, c.result.summary.scheduler, size, str(d.pods), f"{d.p50:.1f}", f"{d.p90:.1f}",
                           f"{d.p99:.1f}") for c in cases for size, d in c.result.summary.delay_by_size.items()],
                         numeric=[3, 4, 5, 6])
    by_priority = html.table(("CASE", "SCHEDULER", "PRIORITY", "PODS", "P50", "P90", "P99"),
                             [(c.label, c.result.summary.scheduler, p, str(d.pods), f"{d.p50:.1f}", f"{d.p90:.1f}",
                               f"{d.p99:.1f}") for c in cases
                              for p, d in c.result.summary.delay_by_priority.items()], numeric=[2, 3, 4, 5, 6])
    notes = ('<p class="note">interrupted: the results cover the simulated time until then.</p>'
             if any(c.result.summary.interrupted for c in cases) else "")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>kubeplace simulate: '
            f"{html.esc(title)}</title><style>{html.STYLE}</style></head><body><header><h1>kubeplace simulate</h1>"
            f'<p class="source">{html.esc(title)}</p>{notes}</header>'
            f"<section><h2>Comparison</h2>{table}</section><section><h2>Over time</h2>{figures}</section>"
            f"<section><h2>Queueing delay by size (seconds)</h2>{by_size}</section>"
            f"<section><h2>Queueing delay by priority (seconds)</h2>{by_priority}</section></body></html>\n")


def write_report(path: Path, cases: Sequence[Case], title: str) -> None:
    text = render(cases, title)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise KubeplaceError(f"cannot write the report {path}: {e.strerror or e}") from None
