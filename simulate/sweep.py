"""Cases and sweeps: a sweep file is the product of its axes, each case one simulation, run in
local processes (``concurrent.futures``), the results in the sweep's order whatever finished first.

    apiVersion: kubeplace.io/v1alpha1
    kind: Sweep
    clusters: [cluster.yaml]          # snapshot files or directories (paths relative to the file)
    traces: [trace.yaml]              # Kubernetes-native traces (simulate.trace)
    schedulers: [kubeplace, kube-scheduler, best-fit, fgd]
    configs: [null, packed.yaml]      # kubeplace configurations (null: the defaults); optional
    seeds: [0, 1]                     # the solver's and emulations' seed; optional, default [0]
    until: 86400                      # optional: stop at this simulated second

Every case runs the solver with one worker (time counted in slices, not on the clock), so a
case gives the same result in any process, alone or beside others.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubeplace.kube.errors import InputError, expect_int
from kubeplace.kube.files import read_document
from kubeplace.models.config_load import MAX_SEED, load_configuration
from kubeplace.serve.settings import ServeSettings
from kubeplace.simulate.cluster import Cluster, NodeEdits, edit_nodes, read_cluster
from kubeplace.simulate.engine import Case, simulate
from kubeplace.simulate.measures import Sample, Summary
from kubeplace.simulate.names import API_LATENCY, MAX_SECONDS, SCHEDULERS
from kubeplace.simulate.schedulers import Setup
from kubeplace.simulate.trace import API_VERSION, Trace, read_trace

KIND = "Sweep"
AXES = ("clusters", "traces", "schedulers", "configs", "seeds")
MAX_CASES = 10_000
"""The most cases a sweep may make (the product of its axes: five axes of ten values are already
100,000 simulations): a bigger one is refused with one line before any is listed."""
MAX_API_LATENCY = 60.0


@dataclass(frozen=True)
class CaseSpec:
    """One simulation, as files and names (picklable: it crosses to a worker process)."""

    cluster: tuple[Path, ...]
    trace: Path
    scheduler: str
    config: Path | None = None
    seed: int = 0
    edits: NodeEdits = field(default_factory=NodeEdits)
    until: float | None = None
    label: str = ""
    latency: float = API_LATENCY
    """Seconds from a binding decided to its pod started (``simulate.world.API_LATENCY``)."""


def setup_of(config_path: Path | None, seed: int) -> Setup:
    config = load_configuration(config_path)
    profile = config.profile(None)
    solver = replace(config.solver, workers=1, seed=seed)
    return Setup(config, profile, solver, ServeSettings(scheduler_name=profile.scheduler_name, bind_workers=1))


Inputs = tuple[Cluster, Trace, Setup]
"""A case's inputs as read from its files: what a Ray task receives, so a worker reads no file."""


def read_inputs(specs: Sequence[CaseSpec]) -> list[Inputs]:
    """Every case's inputs, each file read once (cases sharing an input share one object); bad
    input fails here, before anything runs."""
    clusters: dict[tuple[tuple[Path, ...], NodeEdits], Cluster] = {}
    traces: dict[Path, Trace] = {}
    setups: dict[tuple[Path | None, int], Setup] = {}
    out = []
    for spec in specs:
        cluster_key, setup_key = (spec.cluster, spec.edits), (spec.config, spec.seed)
        if cluster_key not in clusters:
            clusters[cluster_key] = edit_nodes(read_cluster(spec.cluster), spec.edits)
        if spec.trace not in traces:
            traces[spec.trace] = read_trace(spec.trace)
        if setup_key not in setups:
            setups[setup_key] = setup_of(spec.config, spec.seed)
        out.append((clusters[cluster_key], traces[spec.trace], setups[setup_key]))
    return out


def simulate_case(spec: CaseSpec, cluster: Cluster, trace: Trace, setup: Setup) -> Case:
    return Case(spec.label or spec.scheduler, simulate(cluster, trace, spec.scheduler, setup, spec.until,
                                                        spec.latency))


def clockless(cases: Sequence[Case | None]) -> list[tuple[str, Summary, tuple[Sample, ...]] | None]:
    """The cases' results without what the clock measured (wall and CPU seconds): the same for a
    sweep however its cases ran (one process, local processes, Ray)."""
    return [None if c is None else
            (c.label, replace(c.result.summary, wall_seconds=0.0, cpu_seconds=0.0), c.result.samples)
            for c in cases]


def read_sweep(path: Path) -> list[CaseSpec]:
    document = read_document(path)
    source = str(path)
    if not isinstance(document, Mapping) or document.get("kind") != KIND or document.get("apiVersion") != API_VERSION:
        raise InputError("not a sweep", file=source, field="kind", expected=f"kind: {KIND}, apiVersion: {API_VERSION}")
    unknown = sorted(set(document) - {*AXES, "kind", "apiVersion", "until", "apiLatency"})
    if unknown:
        raise InputError("unknown field", file=source, field=unknown[0], expected=", ".join(AXES))
    axes: dict[str, list[Any]] = {}
    for axis, default in zip(AXES, (None, None, None, [None], [0]), strict=True):
        values = document.get(axis, default)
        if not isinstance(values, list) or not values:
            raise InputError("empty or missing axis" if not values else "not a list", file=source, field=axis,
                             expected="a non-empty list")
        axes[axis] = values
    base = path.parent

    def paths(axis: str, value: Any, index: int) -> Path:
        if not isinstance(value, str) or not value:
            raise InputError(f"{value!r} is not a path", file=source, field=f"{axis}[{index}]", expected="a file path")
        return base / value

    for k, name in enumerate(axes["schedulers"]):
        if name not in SCHEDULERS:
            raise InputError(f"unknown scheduler {name!r}", file=source, field=f"schedulers[{k}]",
                             expected=", ".join(SCHEDULERS))
    for k, seed in enumerate(axes["seeds"]):
        try:
            expect_int(seed, f"seeds[{k}]", 0, MAX_SEED)
        except InputError as error:
            raise error.located(file=source) from None
    cases = math.prod(len(axes[axis]) for axis in AXES)
    if cases > MAX_CASES:
        raise InputError(f"its axes ({' x '.join(AXES)}) make {' x '.join(str(len(axes[axis])) for axis in AXES)} "
                         f"= {cases} cases", file=source, expected=f"at most {MAX_CASES} cases in a sweep")
    until = document.get("until")
    if (until is not None and not _seconds_within(until, 0.0, MAX_SECONDS)) or until == 0:
        raise InputError(f"{until!r}", file=source, field="until", expected=f"seconds > 0, at most {MAX_SECONDS:g}")
    latency = document.get("apiLatency", API_LATENCY)
    if not _seconds_within(latency, 0.0, MAX_API_LATENCY) or latency == MAX_API_LATENCY:
        raise InputError(f"{latency!r}", file=source, field="apiLatency",
                         expected=f"seconds, 0 to {MAX_API_LATENCY:g}")
    clusters = [paths("clusters", v, k) for k, v in enumerate(axes["clusters"])]
    traces = [paths("traces", v, k) for k, v in enumerate(axes["traces"])]
    configs = [None if v is None else paths("configs", v, k) for k, v in enumerate(axes["configs"])]
    out = []
    for cluster, trace, scheduler, config, seed in itertools.product(clusters, traces, axes["schedulers"], configs,
                                                                      axes["seeds"]):
        label = " ".join(part for part in (cluster.stem if len(clusters) > 1 else "",
                                           trace.stem if len(traces) > 1 else "",
                                           (config.stem if config else "defaults") if len(configs) > 1 else "",
                                           f"seed {seed}" if len(axes["seeds"]) > 1 else "") if part)
        out.append(CaseSpec((cluster,), trace, scheduler, config, seed, until=until, label=label or scheduler,
                            latency=float(latency)))
    return out


def _seconds_within(value: object, low: float, high: float) -> bool:
    """``value`` is a number (not a boolean, NaN or infinite) from ``low`` to ``high``."""
    return not isinstance(value, bool) and isinstance(value, int | float) and low <= value <= high


def run_cases(specs: Sequence[CaseSpec], workers: int | None = None,
              on_done: Callable[[int, Case], None] | None = None) -> list[Case | None]:
    """The cases' results in ``specs`` order; with more than one worker, in that many local
    processes (each given its case's inputs as read here: no worker reads a file again). A Ctrl-C
    stops waiting: the cases finished by then are returned, the others None."""
    inputs = read_inputs(specs)
    workers = min(len(specs), workers or os.cpu_count() or 1)
    results: list[Case | None] = [None] * len(specs)
    if workers <= 1:
        try:
            for k, spec in enumerate(specs):
                case = results[k] = simulate_case(spec, *inputs[k])  # (Ctrl-C in the replay: what it has)
                if on_done is not None:
                    on_done(k, case)
                if case.result.summary.interrupted:
                    break
        except KeyboardInterrupt:  # (between replays: reading a case's files, setting up its world)
            pass
        return results
    pool = ProcessPoolExecutor(workers)
    try:
        futures = {pool.submit(simulate_case, spec, *inputs[k]): k for k, spec in enumerate(specs)}
        for future in as_completed(futures):
            k = futures[future]
            case = results[k] = future.result()
            if on_done is not None:
                on_done(k, case)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        return results
    pool.shutdown()
    return results
