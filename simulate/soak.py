"""A soak of ``kubeplace serve``'s own cycle in simulated time: does anything it keeps grow for ever?

The replay (:func:`simulate.engine.simulate`, scheduler ``kubeplace``) runs ``days`` simulated
days of a steady churn on a small cluster:

- jobs arriving all the time (Poisson), small and large, that run and leave;
- low-priority jobs that fill every node, then a high-priority job that preempts one of them;
- gangs that fit, and gangs that time out (one member fewer than their minMember; their owner
  deletes them after ``patience``);
- pods that never fit: one for the whole soak (retried on every event that may help it and
  every 5 minutes, thousands of attempts), and more that come and are deleted by their owner
  after ``patience``;
- nodes that go away (their pods deleted and made again by their controllers) and come back.

Every ``every`` simulated seconds it samples the size of each table the scheduler keeps
(:meth:`serve.loop.Scheduler.tables`) and the process's memory: the Python objects alive after a
garbage collection (``sys.getallocatedblocks``), the resident set, and with ``tracemalloc`` the
traced memory. The simulator keeps no history (``Churn.history``), so what grows is serve's.
A steady churn's tables and memory are *flat* when the maximum over the last third of the
samples is at most a small margin above the maximum over the middle third (:func:`flat`).
"""

from __future__ import annotations

import gc
import math
import os
import resource
import sys
import time
import tracemalloc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubeplace.kube.errors import InputError
from kubeplace.kube.gangs import GANG_TIMEOUT_ANNOTATION
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.loop import RESULTS_KEPT
from kubeplace.serve.settings import ServeSettings
from kubeplace.simulate.cluster import Cluster
from kubeplace.simulate.engine import Churn, simulate
from kubeplace.simulate.names import KUBEPLACE, MAX_TRACE_PODS
from kubeplace.simulate.schedulers import KubeplaceCycle, Setup, SimScheduler
from kubeplace.simulate.trace import API_VERSION, KIND, parse_trace
from kubeplace.simulate.world import NodeEvent

DAY = 86_400.0
MARGIN = 0.10
"""How far above the middle third's maximum the last third's may go and still be flat."""
SLACK = 16
"""... plus this many entries (a table of a few entries moves by a few)."""
CAPPED = {"results": 2 * RESULTS_KEPT}
"""Tables with a fixed cap, that fill up to it in a saw-tooth: bounded when never above it."""


@dataclass(frozen=True)
class SoakSpec:
    days: float = 30.0
    every: float = 3_600.0
    """Simulated seconds between two samples."""
    nodes: int = 6
    job_rate: float = 1 / 60
    """Ordinary jobs per second."""
    job_seconds: float = 1_200.0
    """Their mean run time."""
    period: float = 1_800.0
    """Seconds between two of each periodic thing: a high-priority job, a gang that fits, a gang
    that times out, a pod that never fits, a node going away (for ``period / 2``)."""
    patience: float = 3_600.0
    """Seconds after which the owner of a pod that has not started deletes it (but the one pod
    that never fits for the whole soak)."""
    max_backoff: float = 10.0
    """serve's ``--max-backoff`` (its default: 10 s, the kube-scheduler's podMaxBackoffDuration):
    a unit that cannot be placed comes back on an event that may help it once its backoff is
    over, and without one every podMaxInUnschedulablePodsDuration (5 minutes)."""
    seed: int = 0
    trace_malloc: bool = False


@dataclass(frozen=True)
class SoakSample:
    at: float
    tables: Mapping[str, int]
    blocks: int
    """Python memory blocks allocated after a garbage collection."""
    rss: int
    """Resident set, bytes (0 where unknown)."""
    traced: int = 0
    """tracemalloc's traced memory, bytes (0 without it)."""


@dataclass(frozen=True)
class Soak:
    spec: SoakSpec
    samples: tuple[SoakSample, ...]
    wall_seconds: float
    cpu_seconds: float
    peak_rss: int
    """bytes"""
    counts: Mapping[str, int] = field(default_factory=dict)
    """cycles, bindings, preemptions, evictions with nodes, pods deleted by their owner, gang timeouts."""

    def series(self) -> dict[str, list[int]]:
        """Each measure over the samples: the tables, then memory."""
        names = sorted({name for s in self.samples for name in s.tables})
        out = {name: [s.tables.get(name, 0) for s in self.samples] for name in names}
        out |= {"memory_blocks": [s.blocks for s in self.samples], "memory_rss": [s.rss for s in self.samples]}
        if self.spec.trace_malloc:
            out["memory_traced"] = [s.traced for s in self.samples]
        return out

    def growing(self) -> list[str]:
        """The measures that are not flat (:func:`flat`; a capped table: above its cap); the
        resident set is left out (glibc keeps what it freed), and so are the store's objects (the
        cluster's own churn)."""
        return [name for name, values in self.series().items()
                if name != "memory_rss" and not name.startswith("store_")
                and not (max(values, default=0) <= CAPPED[name] if name in CAPPED else flat(values))]


def _split(values: Sequence[int]) -> list[Sequence[int]]:
    n = len(values)
    cut = [0, n // 3, 2 * n // 3, n]
    return [values[cut[i]:cut[i + 1]] for i in range(3)]


def thirds(values: Sequence[int]) -> tuple[int, int, int]:
    """The maximum over the first, middle and last third of ``values``."""
    first, middle, last = (max(part, default=0) for part in _split(values))
    return first, middle, last


def mean_thirds(values: Sequence[int]) -> tuple[float, float, float]:
    """The mean over the first, middle and last third of ``values``."""
    first, middle, last = (sum(part) / len(part) if part else 0.0 for part in _split(values))
    return first, middle, last


def flat(values: Sequence[int], margin: float = MARGIN, slack: int = SLACK) -> bool:
    """The last third's mean at most ``margin`` (and ``slack``) above the middle third's: a table
    that grows moves its mean third after third, while one burst (the Events of a node's pods
    going at once, sampled at that instant) moves a third's maximum alone. Both are reported."""
    _, middle, last = mean_thirds(values)
    return last <= middle * (1 + margin) + slack


def _node(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubeplace.io/pool": "soak"}},
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


def _template(cpu: str, memory: str, **annotations: str) -> dict[str, Any]:
    meta = {"annotations": annotations} if annotations else {}
    return {"metadata": meta, "spec": {"containers": [{"name": "main", "image": "registry.local/job:1",
                                                       "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}


TEMPLATES = {"small": _template("500m", "1Gi"), "large": _template("4", "16Gi"), "fill": _template("7", "8Gi"),
             "urgent": _template("6", "8Gi"),
             "member": _template("1", "2Gi", **{GANG_TIMEOUT_ANNOTATION: "60"}), "huge": _template("64", "1Gi")}


def expected_pods(spec: SoakSpec) -> float:
    """About how many pods the soak's trace holds: its jobs, and per period a node's worth of
    fillers and eight more (a high-priority job, two gangs, a pod too big)."""
    span = spec.days * DAY
    return span * spec.job_rate + math.ceil(span / spec.period) * (spec.nodes + 8)


def check_spec(spec: SoakSpec) -> None:
    """InputError when the trace would exceed a trace's bound (``simulate.names.MAX_TRACE_PODS``),
    said before anything is built: ``--days 1e9`` would otherwise draw jobs for ever."""
    if expected_pods(spec) > MAX_TRACE_PODS:
        raise InputError(f"about {expected_pods(spec):.3g} pods over {spec.days:g} days: more than a trace may hold",
                         field="--days", expected=f"at most {MAX_TRACE_PODS:,} pods (fewer days, a lower --job-rate, "
                                                  "a longer --period or fewer --nodes)")


def workload(spec: SoakSpec) -> tuple[Cluster, dict[str, Any], dict[str, float], tuple[NodeEvent, ...]]:
    """The cluster, the trace document, each pod's patience and the nodes' comings and goings."""
    check_spec(spec)
    rng = np.random.default_rng(spec.seed)
    span = spec.days * DAY
    names = [f"soak-{i}" for i in range(spec.nodes)]
    items: list[dict[str, Any]] = [{"arrivalSeconds": 0, "template": "huge", "name": "never-fits"}]
    at = 0.0
    while (at := at + float(rng.exponential(1 / spec.job_rate))) < span:
        items.append({"arrivalSeconds": round(at, 3), "template": "small" if rng.random() < 0.75 else "large",
                      "durationSeconds": max(1.0, round(float(rng.exponential(spec.job_seconds)), 3)),
                      "name": f"job-{len(items)}"})
    for k in range(math.ceil(span / spec.period)):
        start = k * spec.period
        items += [
            {"arrivalSeconds": start, "template": "fill", "count": spec.nodes, "durationSeconds": spec.period / 2,
             "name": f"fill-{k}"},
            {"arrivalSeconds": start + 60, "template": "urgent", "priority": 1000, "durationSeconds": spec.period / 3,
             "name": f"urgent-{k}"},
            {"arrivalSeconds": start + 300, "template": "member", "count": 3, "durationSeconds": spec.period / 3,
             "gang": {"name": f"fits-{k}", "minMember": 3}, "name": f"fits-{k}"},
            {"arrivalSeconds": start + 600, "template": "member", "count": 2, "durationSeconds": spec.period / 3,
             "gang": {"name": f"short-{k}", "minMember": 3}, "name": f"short-{k}"},
            {"arrivalSeconds": start + 900, "template": "huge", "name": f"too-big-{k}"}]
    items = [i for i in items if i["arrivalSeconds"] < span]
    items.sort(key=lambda i: i["arrivalSeconds"])
    document = {"apiVersion": API_VERSION, "kind": KIND, "templates": TEMPLATES, "items": items}
    patience = {f"default/{n}": spec.patience for i in items if i["name"] != "never-fits"
                for n in ([f"{i['name']}-{c}" for c in range(i["count"])] if "count" in i else [i["name"]])}
    nodes = tuple(event for k in range(math.ceil(span / spec.period))
                  for event in (NodeEvent(k * spec.period + 1_200, names[k % len(names)], False),
                                NodeEvent(k * spec.period + 1_200 + spec.period / 2, names[k % len(names)], True)))
    return Cluster(tuple(_node(n) for n in names), (), "soak"), document, patience, nodes


def _rss() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def run_soak(spec: SoakSpec, setup: Setup | None = None) -> Soak:
    """Runs the soak (see the module's docstring)."""
    setup = setup or Setup(Configuration(), Profile(), SolverSettings(time_limit=5, workers=1),
                           ServeSettings(bind_workers=1, max_backoff=spec.max_backoff))
    cluster, document, patience, nodes = workload(spec)
    trace = parse_trace(document, "soak")
    samples: list[SoakSample] = []
    cycle: list[KubeplaceCycle] = []

    def observe(now: float, scheduler: SimScheduler) -> None:
        if not isinstance(scheduler, KubeplaceCycle):
            return
        cycle[:] = [scheduler]
        if samples and now < samples[-1].at + spec.every:
            return
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
        at = float(math.floor(now / spec.every) * spec.every)
        samples.append(SoakSample(at, scheduler.scheduler.tables(), sys.getallocatedblocks(), _rss(), traced))

    if spec.trace_malloc:
        tracemalloc.start()
    started, cpu = time.monotonic(), time.process_time()
    try:
        result = simulate(cluster, trace, KUBEPLACE, setup, until=spec.days * DAY,
                          churn=Churn(nodes, patience, observe, history=False))
    finally:
        if spec.trace_malloc:
            tracemalloc.stop()
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    metrics = cycle[0].scheduler.metrics if cycle else None
    counts = {"cycles": result.summary.cycles, "preemptions": result.summary.preemptions}
    if cycle:
        world = cycle[0].client.world
        counts |= {"bindings": world.bindings, "evictions": world.evictions, "gave_up": world.gave_up}
    if metrics is not None:
        counts["gang_timeouts"] = int(metrics.value("kubeplace_gangs_timed_out_total"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return Soak(spec, tuple(samples), wall, cpu, peak, counts)
