"""The event-driven replay: simulated time jumps from one instant to the next where something
happens (a pod arrives or leaves, the scheduler's batch closes or a backoff ends); nothing sleeps.

At each instant the arrivals are applied first (each one written to the store and told to the
scheduler as the watch would), then the scheduler runs what is due, then the pods whose run ends
there leave and the scheduler runs again if that made something due (a pod's binding lands a
little after the instant it was decided, so its run ends a little after that instant plus its
duration: see :meth:`World.happen`); the instant ends with one sample of the cluster's
allocation and pending work. A scheduling cycle takes no simulated time. Ctrl-C ends the
replay where it is: the result says ``interrupted`` and holds everything measured until then.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kubeplace.simulate.cluster import Cluster
from kubeplace.simulate.measures import Sample, Summary, placement_digest, sample, summarise
from kubeplace.simulate.names import API_LATENCY
from kubeplace.simulate.schedulers import Setup, SimScheduler, make_scheduler
from kubeplace.simulate.trace import Trace
from kubeplace.simulate.world import NodeEvent, PodRecord, World

MAX_INSTANTS = 10_000_000
"""A loop guard: no trace of kubeplace's scale needs this many distinct instants."""


@dataclass(frozen=True)
class Result:
    summary: Summary
    samples: tuple[Sample, ...]
    pods: tuple[PodRecord, ...]


@dataclass(frozen=True)
class Case:
    """One simulation of a sweep (or of the command line): its label and its result."""

    label: str
    result: Result


@dataclass(frozen=True)
class Churn:
    """What happens besides the trace (a soak's): nodes going and coming back, pods whose owner
    deletes them when they have not started after their patience (trace pod key -> seconds), and
    ``observe(now, scheduler)`` called after every instant. Without ``history`` the simulator
    keeps no record of the pods gone and no series of samples (the summary then covers the pods
    still there), so that its own memory does not grow with simulated time."""

    nodes: tuple[NodeEvent, ...] = ()
    patience: Mapping[str, float] = dataclasses.field(default_factory=dict)
    observe: Callable[[float, SimScheduler], None] | None = None
    history: bool = True


def simulate(cluster: Cluster, trace: Trace, scheduler: str, setup: Setup, until: float | None = None,
             latency: float = API_LATENCY, churn: Churn = Churn()) -> Result:
    """Replays ``trace`` on ``cluster`` with ``scheduler`` until nothing more can happen (or
    simulated time ``until``); a binding counts ``latency`` seconds after it was decided."""
    world = World(cluster, trace, setup.serve.scheduler_name, latency, churn.nodes, churn.patience, churn.history)
    sim = make_scheduler(scheduler, world, setup)
    samples: list[Sample] = [sample(0.0, world.totals)]
    started, cpu = time.monotonic(), time.process_time()
    interrupted = False
    limit = math.inf if until is None else until
    settle = 3 * setup.serve.max_backoff + setup.serve.batch_window
    changed_at, progress = 0.0, (0, 0)
    try:
        for _ in range(MAX_INSTANTS):
            due = sim.due()
            if due is not None:
                due = max(due, world.clock.now)
            event = world.next_event()
            now = min(t for t in (event, due, math.inf) if t is not None)
            if now == math.inf or now > limit or (event is None and now - changed_at > settle):
                break  # (the last: only retries are left, and none has bound anything for a while)
            world.clock.now = now
            for departures in (False, True):  # the arrivals and the cycle due, then the departures
                if world.happen(now, departures):
                    changed_at = now
                due = sim.due()
                if due is not None and due <= now:
                    sim.run_due()
            if (world.bindings, world.preemptions) != progress:
                changed_at, progress = now, (world.bindings, world.preemptions)
            if churn.observe is not None:
                churn.observe(now, sim)
            here = sample(now, world.totals)
            if here.at == samples[-1].at or not churn.history:
                samples[-1] = here
            elif _differs(here, samples[-1]):
                samples.append(here)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sim.close()
    end = world.clock.now if until is None or interrupted else max(world.clock.now, until)
    records = tuple(world.records.values())
    summary = summarise(sim.name, samples, records, end, world.preemptions, sim.refused, sim.cycles,
                        time.monotonic() - started, time.process_time() - cpu, interrupted,
                        placement_digest(world.bound))
    return Result(summary, tuple(samples), records)


def _differs(a: Sample, b: Sample) -> bool:
    return dataclasses.astuple(a)[1:] != dataclasses.astuple(b)[1:]
