"""``bench fgd-protocol``'s runs as a table: one task per (pod list, seed, scheduler), run in this
process or in ``--jobs`` worker processes, every finished record saved to the ``--resume`` file
(an interrupted run continues where it stopped), and the summary per pod list.

A task's records: ``{"trace", "seed", "scheduler", "alloc_at_130", "seconds"}``; the bound task
gives two (``"bound"`` and, unless ``--no-offline``, ``"offline"``). The JSON (file and ``-o json``)
is ``{"records": [...], "summary": [...]}``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Record = dict[str, Any]
Key = tuple[str, int, str]
BOUND = "bound"
OFFLINE = "offline"


@dataclass(frozen=True)
class Options:
    """What a task needs besides its (pod list, seed, scheduler)."""

    nodes_csv: Path
    window: int
    time_limit: float
    via: str
    bound_time_limit: float
    offline: bool


@dataclass(frozen=True)
class Task:
    pods_csv: Path
    seed: int
    scheduler: str  # a scheduler, or BOUND (the bound, and the offline placement when asked)

    @property
    def trace(self) -> str:
        return self.pods_csv.stem

    def keys(self, options: Options) -> tuple[Key, ...]:
        if self.scheduler != BOUND:
            return ((self.trace, self.seed, self.scheduler),)
        return ((self.trace, self.seed, BOUND),) + (((self.trace, self.seed, OFFLINE),) if options.offline else ())


def key(record: Record) -> Key:
    return str(record["trace"]), int(record["seed"]), str(record["scheduler"])


def tasks(pods_csvs: Sequence[Path], seeds: Sequence[int], schedulers: Sequence[str], bound: bool) -> list[Task]:
    """Every task of the command, per pod list and seed (so a worker reuses its run)."""
    names = list(dict.fromkeys(schedulers)) + ([BOUND] if bound else [])
    return [Task(p, seed, s) for p in dict.fromkeys(pods_csvs) for seed in dict.fromkeys(seeds) for s in names]


def load(path: Path) -> list[Record]:
    """The records of a ``--resume`` file (none when it does not exist); ValueError when it is not
    this command's JSON."""
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text() or "[]")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    records = data.get("records") if isinstance(data, dict) else data
    if not isinstance(records, list) or not all(
            isinstance(r, dict) and isinstance(r.get("trace"), str) and isinstance(r.get("seed"), int)
            and isinstance(r.get("scheduler"), str) for r in records):
        raise ValueError(f"{path}: records: expected a list of {{trace, seed, scheduler, alloc_at_130}}")
    return records


def save(path: Path, records: Sequence[Record], summary: Sequence[Record]) -> None:
    """Write ``path`` whole, then rename it into place: an interruption leaves the last good file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"records": list(records), "summary": list(summary)}, indent=2) + "\n")
    os.replace(tmp, path)


def execute(todo: Sequence[Task], options: Options, jobs: int,
            done: Callable[[Task, list[Record]], None]) -> None:
    """Run ``todo``, in this process or in ``jobs`` worker processes, calling ``done`` with each
    task's records as it finishes (in the order they finish)."""
    if jobs <= 1 or len(todo) <= 1:
        for task in todo:
            done(task, run_task(task, options))
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        running: dict[Future[list[Record]], Task] = {}
        queue = list(reversed(todo))
        try:
            while queue or running:
                while queue and len(running) < 2 * jobs:  # a few queued ahead, not every task at once
                    task = queue.pop()
                    running[pool.submit(run_task, task, options)] = task
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    done(running.pop(future), future.result())
        except BaseException:  # interrupted: what is saved stays saved; do not wait for the runs under way
            pool.shutdown(wait=False, cancel_futures=True)
            raise


@functools.lru_cache(maxsize=1)
def _nodes(nodes_csv: Path) -> Any:
    from kubeplace_bench.openb import read_nodes

    return read_nodes(nodes_csv)


@functools.lru_cache(maxsize=2)
def _pods(pods_csv: Path) -> Any:
    from kubeplace_bench.fgd_protocol import typical_pods
    from kubeplace_bench.openb import read_pods

    pods = read_pods(pods_csv)
    return pods, typical_pods(pods)


@functools.lru_cache(maxsize=2)
def _run(nodes_csv: Path, pods_csv: Path, seed: int) -> Any:
    from kubeplace_bench.fgd_protocol import protocol_run

    return protocol_run(_nodes(nodes_csv), _pods(pods_csv)[0], seed)


def run_task(task: Task, options: Options) -> list[Record]:
    """One task's records (``bench.commands_fgd`` runs each scheduler)."""
    from kubeplace_bench.commands_fgd import run_offline, run_scheduler

    nodes, run = _nodes(options.nodes_csv), _run(options.nodes_csv, task.pods_csv, task.seed)
    head = {"trace": task.trace, "seed": task.seed}
    if task.scheduler == BOUND:
        return [head | r for r in run_offline(nodes, run, task.seed, options.bound_time_limit, options.offline)]
    t0 = time.perf_counter()
    value = run_scheduler(task.scheduler, nodes, run, _pods(task.pods_csv)[1], task.seed, options)
    return [head | {"scheduler": task.scheduler, "alloc_at_130": None if math.isnan(value) else value,
                    "seconds": round(time.perf_counter() - t0, 1)}]


# --- the summary -------------------------------------------------------------------------------------

def _value(r: Record) -> float | None:
    v = r.get("alloc_at_130")
    return None if v is None else float(v)


def _mean(values: Iterable[float]) -> float | None:
    got = list(values)
    return round(sum(got) / len(got), 2) if got else None


def summary(records: Sequence[Record], reference: dict[tuple[str, str, int], float],
            published_policy: dict[str, str]) -> list[Record]:
    """Per pod list (in the records' order), then ``"trace": "mean"`` over the pod lists: each
    scheduler's mean and runs, the published FGD and best-fit means over the same seeds, kubeplace's
    mean less FGD's, the bound's mean and the share of the FGD-to-bound gap kubeplace closes. The
    differences and the share are over the seeds that have every figure they use (paired)."""
    by_trace: dict[str, dict[str, dict[int, float]]] = {}
    for r in records:
        v = _value(r)
        if v is not None:
            by_trace.setdefault(r["trace"], {}).setdefault(r["scheduler"], {})[int(r["seed"])] = v
    out: list[Record] = []
    for trace, got in by_trace.items():
        row: Record = {"trace": trace, "mean": {s: _mean(v.values()) for s, v in got.items()},
                       "runs": {s: len(v) for s, v in got.items()}}
        for scheduler, policy in published_policy.items():
            seeds = got.get(scheduler, {})
            refs = [reference.get((trace, policy, seed)) for seed in seeds]
            row[f"published_{scheduler}"] = _mean(x for x in refs if x is not None) if seeds and None not in refs \
                else None
        row.update(_compared(got.get("fgd", {}), got.get("kubeplace", {}), got.get(BOUND, {})))
        out.append(row)
    if len(out) > 1:
        out.append(_over_traces(out))
    return out


def _compared(fgd: dict[int, float], kubeplace: dict[int, float], bound: dict[int, float]) -> Record:
    both = [s for s in kubeplace if s in fgd]
    three = [s for s in both if s in bound]
    row: Record = {"kubeplace_minus_fgd": _mean(kubeplace[s] - fgd[s] for s in both),
                   "gap_closed": None}
    if three:
        gap = sum(bound[s] - fgd[s] for s in three)
        row["gap_closed"] = round(sum(kubeplace[s] - fgd[s] for s in three) / gap, 3) if gap > 0 else None
    return row


def _over_traces(rows: Sequence[Record]) -> Record:
    """The mean of the pod lists' means (each list weighs the same), and the share of the gap closed
    over the lists that have FGD, kubeplace and the bound."""
    schedulers = list(dict.fromkeys(s for r in rows for s in r["mean"]))
    mean = {s: _mean(r["mean"][s] for r in rows if r["mean"].get(s) is not None) for s in schedulers}
    out: Record = {"trace": "mean", "mean": mean, "runs": {s: sum(r["runs"].get(s, 0) for r in rows)
                                                           for s in schedulers}}
    for name in ("published_fgd", "published_best-fit", "kubeplace_minus_fgd"):
        values = [r.get(name) for r in rows]
        out[name] = _mean(v for v in values if v is not None) if values and None not in values else None
    full = [r["mean"] for r in rows if all(r["mean"].get(s) is not None for s in ("fgd", "kubeplace", BOUND))]
    gap = sum(m[BOUND] - m["fgd"] for m in full)
    out["gap_closed"] = round(sum(m["kubeplace"] - m["fgd"] for m in full) / gap, 3) if full and gap > 0 else None
    return out


def summary_table(rows: Sequence[Record]) -> str:
    """The summary as text: per pod list the schedulers' means (runs in brackets when they differ),
    published FGD and best-fit, kubeplace - FGD, the bound, the share of the gap closed."""
    schedulers = [s for s in ("fgd", "best-fit", "kubeplace", "kubeplace-plan", BOUND, OFFLINE)
                  if any(s in r["mean"] for r in rows)]
    schedulers += [s for r in rows for s in r["mean"] if s not in schedulers]
    schedulers = list(dict.fromkeys(schedulers))

    def cell(v: float | None, fmt: str = ".2f") -> str:
        return "-" if v is None else format(v, fmt)

    head = ["trace", "runs", *schedulers, "pub fgd", "pub bf", "kp-fgd", "gap closed"]
    lines = [head]
    for r in rows:
        runs = sorted(set(r["runs"].values()))
        lines.append([r["trace"].removeprefix("openb_pod_list_"), "/".join(map(str, runs)),
                      *(cell(r["mean"].get(s)) for s in schedulers), cell(r.get("published_fgd")),
                      cell(r.get("published_best-fit")), cell(r.get("kubeplace_minus_fgd"), "+.2f"),
                      cell(r.get("gap_closed"), ".1%")])
    widths = [max(len(line[c]) for line in lines) for c in range(len(head))]
    return "\n".join(" ".join(x.ljust(w) if c == 0 else x.rjust(w)
                              for c, (x, w) in enumerate(zip(line, widths, strict=True))) for line in lines)
