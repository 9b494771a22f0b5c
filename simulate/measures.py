"""What a simulation measures: allocation and pending work over time, and per pod when it waited.

- allocation: requested / allocatable of CPU, memory and GPUs (a GPU share counts as its
  fraction of a GPU) over the whole cluster, as a step function of simulated time; ``mean`` is
  its time-weighted mean from 0 to the end of the simulation;
- pending: pods (and their GPUs) that arrived and are not running;
- queueing delay: a pod's first start minus its arrival (a preempted pod's restart does not count
  again), as percentiles by priority and by size; pods never started are counted apart;
- GPU fragmentation: FGD's measure (``simulate.fragmentation``), the free GPU capacity that a
  task drawn from the workload could not use, as a share of the free GPU capacity;
- gang wait: for a gang whose members all started, the last member's start minus the last
  member's arrival (how long the whole gang waited once it could exist).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from kubeplace.models.gpu import WHOLE
from kubeplace.simulate.world import PodRecord, Totals

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Sample:
    at: float
    cpu: float
    memory: float
    gpu: float
    """Allocated fractions of the cluster's capacity (0 when it has none)."""
    pending_pods: int
    pending_gpus: float
    fragmented_gpus: float = 0.0
    """GPUs the workload could not use (FGD's measure)."""
    fragmentation: float = 0.0
    """``fragmented_gpus`` over the free GPUs (0 when none is free)."""


def sample(at: float, totals: Totals) -> Sample:
    def share(used: int, capacity: int) -> float:
        return used / capacity if capacity else 0.0

    cap, used = totals.capacity, totals.used
    return Sample(at, share(used.cpu, cap.cpu), share(used.memory, cap.memory), share(used.gpu, cap.gpu),
                  totals.pending_pods, totals.pending_gpu / WHOLE, totals.fragmented_gpu / WHOLE,
                  totals.fragmented_gpu / totals.free_gpu if totals.free_gpu > 0 else 0.0)


@dataclass(frozen=True)
class Delays:
    pods: int
    p50: float
    p90: float
    p99: float
    mean: float

    @staticmethod
    def of(values: Sequence[float]) -> Delays:
        if not values:
            return Delays(0, 0.0, 0.0, 0.0, 0.0)
        array = np.asarray(values, dtype=np.float64)
        p50, p90, p99 = (float(np.percentile(array, q)) for q in PERCENTILES)
        return Delays(len(values), p50, p90, p99, float(array.mean()))


@dataclass(frozen=True)
class Summary:
    scheduler: str
    end: float
    """Simulated seconds covered."""
    pods: int
    started: int
    never_started: int
    mean_allocation: dict[str, float]
    final_allocation: dict[str, float]
    peak_pending_pods: int
    final_pending_pods: int
    final_pending_gpus: float
    fragmentation: dict[str, float]
    """GPU fragmentation (share of the free GPUs): its time-weighted ``mean`` and its value at the ``end``."""
    delay: Delays
    delay_by_priority: dict[str, Delays]
    delay_by_size: dict[str, Delays]
    gang_wait: Delays
    preemptions: int
    refused: int
    """Placements the independent verifier refused (never bound)."""
    cycles: int
    wall_seconds: float
    cpu_seconds: float
    """This process's CPU time for the replay (the floor's measure on a shared machine)."""
    interrupted: bool = False
    digest: str = ""
    """The placement digest: one hash of every binding of the replay (:func:`placement_digest`)."""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def size_of(record: PodRecord) -> str:
    if record.gpu_milli == 0:
        return "no GPU"
    if record.gpu_milli < WHOLE:
        return "GPU share"
    return "1 GPU" if record.gpu_milli == WHOLE else "2+ GPUs"


def time_mean(samples: Sequence[Sample], end: float, measure: str) -> float:
    """The time-weighted mean of a sampled step function from 0 to ``end``."""
    total = 0.0
    for here, after in zip(samples, [*samples[1:], None], strict=True):
        until = end if after is None else after.at
        total += float(getattr(here, measure)) * max(0.0, until - here.at)
    return total / end if end > 0 else (float(getattr(samples[-1], measure)) if samples else 0.0)


def mean_allocation(samples: Sequence[Sample], end: float) -> dict[str, float]:
    return {resource: time_mean(samples, end, resource) for resource in ("cpu", "memory", "gpu")}


def gang_waits(records: Sequence[PodRecord]) -> list[float]:
    gangs: dict[str, list[PodRecord]] = defaultdict(list)
    for r in records:
        if r.gang:
            gangs[r.key.split("/")[0] + "/" + r.gang].append(r)
    waits = []
    for members in gangs.values():
        starts = [m.start for m in members]
        if all(s is not None for s in starts):
            waits.append(max(s for s in starts if s is not None) - max(m.arrival for m in members))
    return waits


def placement_digest(bound: Sequence[tuple[str, str]]) -> str:
    """A hash of the sorted pod -> node bindings of a whole replay (a recreated victim counts as
    its own pod): two replays that bound every pod to the same node have the same digest."""
    text = "\n".join(f"{pod} {node}" for pod, node in sorted(bound))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def summarise(scheduler: str, samples: Sequence[Sample], records: Sequence[PodRecord], end: float,
              preemptions: int, refused: int, cycles: int, wall_seconds: float, cpu_seconds: float,
              interrupted: bool, digest: str = "") -> Summary:
    started = [r for r in records if r.start is not None]
    delays = [r.start - r.arrival for r in started if r.start is not None]
    by_priority: dict[str, list[float]] = defaultdict(list)
    by_size: dict[str, list[float]] = defaultdict(list)
    for r in started:
        if r.start is not None:
            by_priority[str(r.priority)].append(r.start - r.arrival)
            by_size[size_of(r)].append(r.start - r.arrival)
    last = samples[-1] if samples else Sample(0.0, 0.0, 0.0, 0.0, 0, 0.0)
    return Summary(
        scheduler, end, len(records), len(started), len(records) - len(started),
        mean_allocation(samples, end), {"cpu": last.cpu, "memory": last.memory, "gpu": last.gpu},
        max((s.pending_pods for s in samples), default=0), last.pending_pods, last.pending_gpus,
        {"mean": time_mean(samples, end, "fragmentation"), "end": last.fragmentation},
        Delays.of(delays), {k: Delays.of(v) for k, v in sorted(by_priority.items(), key=lambda kv: -int(kv[0]))},
        {k: Delays.of(v) for k, v in sorted(by_size.items())}, Delays.of(gang_waits(records)),
        preemptions, refused, cycles, wall_seconds, cpu_seconds, interrupted, digest)
