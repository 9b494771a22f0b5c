"""``kubeplace bench simulate-fidelity``: one short trace replayed by ``kubeplace simulate`` and on
the real control plane, per scheduler, and the difference.

The trace is generated (``simulate.generate``, a fixed seed, gangs included) and compressed: its
times are divided by ``compress`` and the arrivals rounded to ``tick`` seconds, so that many pods
arrive at one instant and the real run takes a few minutes. Both replays see that compressed
trace in the same seconds:

1. the simulation (``simulate.engine.simulate``) on the same Node objects, up to ``end`` (the
   last arrival plus ``margin``);
2. the live run, on a running control plane (:mod:`kubeplace_bench.controlplane`) with kwok
   nodes, for each scheduler in turn (the real kube-scheduler, default profile; ``kubeplace
   serve`` of this checkout, its solver on one worker as in the simulation): each pod is
   created at its arrival time, deleted (grace 0) its duration after the watch saw it bound,
   and at one instant the creations go before the deletions, as in the simulation; at ``end``
   the run stops.

Compared per scheduler: the pods bound by ``end`` (the same set?), the CPU, memory and GPU
allocation (requested over allocatable) as a time-weighted mean over ``[0, end]`` and over the
end, ``[end - margin, end]`` (the last arrival to the stop: a mean, so that one pod bound or
gone a moment later on one side does not flip it), in points (percent of the cluster), the
largest gap over a 1-second grid, how late each pod was bound live compared with the
simulation (the load check: a loaded machine binds late), and the first divergence: the first
pod bound on another node (or more than ``DIVERGED_SECONDS`` apart), with the pods that ran in
one replay and not in the other at that instant. The floor: the same pods bound, every
allocation within one point.
"""

from __future__ import annotations

import heapq
import json
import logging
import math
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubeplace.kube.gangs import PLAIN_LABEL
from kubeplace.kube.objects import GPU
from kubeplace.kube.parse import parse_node, parse_pod
from kubeplace.models.gpu import WHOLE, devices_of
from kubeplace.simulate.cluster import Cluster
from kubeplace.simulate.engine import Result, simulate
from kubeplace.simulate.generate import Shape, generate
from kubeplace.simulate.names import API_LATENCY, KUBE_SCHEDULER, KUBEPLACE
from kubeplace.simulate.sweep import setup_of
from kubeplace.simulate.trace import Arrival, Trace, parse_trace
from kubeplace.simulate.world import Usage, usage_of
from kubeplace_bench.cluster import Say
from kubeplace_bench.controlplane import ControlPlane, fake_node_manifest
from kubeplace_bench.throughput import Harness, PodWatch, Settings
from kubeplace_bench.throughput_measure import PodTrack, Tracker, percentile
from kubeplace_bench.throughput_schedulers import SCHEDULER_NAMES, start_kube_scheduler, start_kubeplace

SCHEDULERS = (KUBE_SCHEDULER, KUBEPLACE)
RESOURCES = ("cpu", "memory", "gpu")
SHAPES = (Shape("small", "1", "2Gi", 0, 5), Shape("large", "4", "16Gi", 0, 2), Shape("gpu", "4", "16Gi", 1, 2),
          Shape("gpu2", "8", "32Gi", 2, 1))
SERVE_CONFIG = {"apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementConfiguration",
                "solver": {"workers": 1, "seed": 0}}
"""Live serve's solver as the simulation's (``simulate.sweep.setup_of``): one worker, so that
its time counts in solver steps, not on the clock, and the same batch gets the same plan."""
FLOOR_POINTS = 1.0
"""The largest allocation difference (points) the floor allows."""
SPREAD_LATENCIES = (API_LATENCY / 4, API_LATENCY / 2, API_LATENCY * 3 / 2, API_LATENCY * 2)
"""The latencies (seconds) the simulation is run again with to measure its own spread
(:func:`own_spread`): live a binding's latency and a cycle's duration vary about that much, a
quarter to twice the default, from run to run and with the machine's load."""
DIVERGED_SECONDS = 0.5
"""A pod bound this much earlier or later on one side than on the other has diverged."""


@dataclass(frozen=True)
class TraceSpec:
    """The generated trace, in trace seconds before compression."""

    jobs: int = 260
    rate: float = 0.1
    mean_duration: float = 250.0
    gang_fraction: float = 0.15
    gang_sizes: tuple[int, ...] = (2, 4)
    seed: int = 7
    compress: float = 10.0
    tick: float = 1.0
    """Seconds (compressed) the arrivals are rounded to."""
    nodes: int = 8
    margin: float = 10.0
    """Seconds after the last arrival where both replays stop; the end is measured over them."""


@dataclass(frozen=True)
class Replay:
    """One replay of the trace by one scheduler, as the comparison needs it."""

    started: dict[str, float]
    """Pod key -> when it was bound (seconds from the start), for the pods bound by ``end``."""
    intervals: dict[str, tuple[float, float]]
    """Pod key -> (bound, left) in seconds from the start (left: infinity while it runs)."""
    nodes: dict[str, str]
    """Pod key -> its node."""


def nodes(count: int) -> list[dict[str, Any]]:
    """kwok nodes of 16 CPU / 64 GiB / 4 GPUs, without the kwok taint (the trace's pods do not
    tolerate it, and both replays see the same nodes)."""
    out = []
    for i in range(count):
        node = fake_node_manifest(f"fid-{i:03d}", cpu="16", memory="64Gi", pods="110",
                                  extended={GPU: "4"})
        node["spec"]["taints"] = []
        out.append(node)
    return out


def fidelity_trace(spec: TraceSpec) -> Trace:
    """The generated trace, compressed: arrivals on ticks; durations to the millisecond, at least
    half a tick. (Raised to a whole tick, a short pod bound when its batch closed would end
    exactly when the next tick's batch closes, and live which comes first is a race between two
    latencies of a few tens of milliseconds, its binding's and the arrivals' watch.)"""
    document = generate(spec.jobs, spec.rate, spec.mean_duration, SHAPES, spec.gang_fraction, spec.gang_sizes,
                        spec.seed)
    for item in document["items"]:
        item["arrivalSeconds"] = round(item["arrivalSeconds"] / spec.compress / spec.tick) * spec.tick
        item["durationSeconds"] = max(spec.tick / 2, round(item["durationSeconds"] / spec.compress, 3))
    return parse_trace(document, f"generated (seed {spec.seed}, compressed {spec.compress:g}x)")


def gangs_of(trace: Trace) -> set[str]:
    """The trace's gangs, by their label."""
    labels = ((a.pod["metadata"].get("labels") or {}).get(PLAIN_LABEL) for a in trace.arrivals)
    return {gang for gang in labels if gang is not None}


def end_of(trace: Trace, spec: TraceSpec) -> float:
    return trace.span + spec.margin


# --------------------------------------------------------------------------- the simulation


def simulated(cluster: Cluster, trace: Trace, scheduler: str, end: float, dump: Path | None = None,
              latency: float = API_LATENCY) -> Replay:
    """The simulation's replay; with ``dump``, serve's log lines (its decisions and cycles, in
    the order made) go to ``<scheduler>-simulated.log`` there."""
    with _serve_log(dump / f"{scheduler}-simulated.log" if dump is not None else None):
        result = simulate(cluster, trace, scheduler, setup_of(None, 0), end, latency)
    return _replay_of(result, end)


def own_spread(cluster: Cluster, trace: Trace, scheduler: str, end: float, reference: Replay,
               use: dict[str, Usage], capacity: Usage, margin: float) -> dict[str, Any]:
    """How far the simulation moves by itself when only its latency changes
    (``SPREAD_LATENCIES``): the largest difference from ``reference`` in points, mean and end,
    and in how many of those replays another set of pods was bound. Where the trace puts a
    departure within tens of milliseconds of a batch closing, which comes first decides the
    rest of the run, live as in the simulation; a live run cannot be expected closer to the
    simulation than this."""
    worst = {"mean_points": 0.0, "end_points": 0.0}
    other_sets = 0
    for latency in SPREAD_LATENCIES:
        figures = compare(reference, simulated(cluster, trace, scheduler, end, latency=latency), use, capacity,
                          end, margin)
        for key in worst:
            worst[key] = max(worst[key], *(abs(figures[key][r]["difference"]) for r in RESOURCES))
        other_sets += bool(figures["bound_only_simulated"] or figures["bound_only_live"])
    return {"latencies": list(SPREAD_LATENCIES), **{k: round(v, 2) for k, v in worst.items()},
            "other_pods_bound": other_sets}


@contextmanager
def _serve_log(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    serve_log = logging.getLogger("kubeplace.serve")
    with path.open("w") as out:
        handler = logging.StreamHandler(out)
        handler.setFormatter(_JsonLines())
        level = serve_log.level
        serve_log.addHandler(handler)
        serve_log.setLevel(logging.INFO)
        try:
            yield
        finally:
            serve_log.removeHandler(handler)
            serve_log.setLevel(level)


class _JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps({"msg": record.getMessage(), **getattr(record, "fields", {})})


def _replay_of(result: Result, end: float) -> Replay:
    started: dict[str, float] = {}
    intervals: dict[str, tuple[float, float]] = {}
    placed: dict[str, str] = {}
    for record in result.pods:
        if record.start is not None and record.start <= end:
            started[record.key] = record.start
            placed[record.key] = record.node
            left = math.inf if record.end is None or record.end > end else record.end
            intervals[record.key] = (record.start, left)
    return Replay(started, intervals, placed)


# --------------------------------------------------------------------------- the live run


def live(harness: Harness, trace: Trace, scheduler: str, end: float, say: Say, dump: Path | None = None) -> Replay:
    """The trace on the control plane with ``scheduler`` (the nodes exist already); with
    ``dump``, the scheduler's log goes to ``<scheduler>-live.log`` there (the kube-scheduler
    then logs at ``-v=5``: its queue's moves)."""
    namespace = f"fid-{scheduler}"
    harness.ensure_namespace(namespace)
    name = SCHEDULER_NAMES[scheduler]
    manifests = {a.key: _manifest(a, namespace, name) for a in trace.arrivals}
    tracker = Tracker()
    if scheduler == KUBE_SCHEDULER:
        process = start_kube_scheduler(harness.plane, harness.settings.qps, harness.settings.timeout,
                                       ("-v=5",) if dump is not None else ())
    else:
        config = harness.plane.workdir / "fidelity-serve.yaml"
        config.write_text(json.dumps(SERVE_CONFIG))
        process, _ = start_kubeplace(harness.plane, (f"--config={config}",), harness.settings.timeout, 1)
    try:
        with PodWatch(harness.api, namespace, tracker):
            origin, lag = _feed(harness, trace, manifests, namespace, tracker, end)
            tracks = tracker.snapshot()
    finally:
        process.stop()
        if dump is not None:
            shutil.copyfile(process.log_path, dump / f"{scheduler}-live.log")
        harness.delete_pods(namespace)
    say(f"  {scheduler} live: creations late by up to {lag:.2f}s")
    return _live_replay(trace, tracks, origin, end)


def _manifest(arrival: Arrival, namespace: str, scheduler_name: str) -> dict[str, Any]:
    pod: dict[str, Any] = json.loads(json.dumps(arrival.pod))
    pod["metadata"]["namespace"] = namespace
    pod["spec"]["schedulerName"] = scheduler_name
    return pod


ARRIVE, LEAVE = 0, 1
"""At one instant the creations go first, as in the simulation (``simulate.world.World.happen``)."""


def _feed(harness: Harness, trace: Trace, manifests: dict[str, dict[str, Any]], namespace: str, tracker: Tracker,
          end: float) -> tuple[float, float]:
    """Creates the pods at their arrival, deletes them their duration after their binding, until
    ``end``. Returns the start (monotonic) and the largest lateness of a creation."""
    durations = {a.key: a.duration for a in trace.arrivals}
    events: list[tuple[float, int, int, str]] = [(a.at, ARRIVE, i, a.key) for i, a in enumerate(trace.arrivals)]
    heapq.heapify(events)
    path = f"/api/v1/namespaces/{namespace}/pods"
    scheduled: set[str] = set()
    origin, lag, serial = time.monotonic(), 0.0, len(events)
    while True:
        now = time.monotonic() - origin
        for pod_name, track in tracker.snapshot().items():
            key = f"default/{pod_name}"
            duration = durations.get(key)
            if track.bound is not None and key not in scheduled and duration is not None:
                scheduled.add(key)
                heapq.heappush(events, (track.bound - origin + duration, LEAVE, serial, key))
                serial += 1
        if now >= end:
            return origin, lag
        while events and events[0][0] <= now:
            at, kind, _, key = heapq.heappop(events)
            pod_name = key.split("/", 1)[1]
            if kind == LEAVE:
                harness.api.request("DELETE", f"{path}/{pod_name}", {"gracePeriodSeconds": 0}, ok=(200, 404))
            else:
                lag = max(lag, time.monotonic() - origin - at)
                harness.api.request("POST", path, manifests[key], ok=(201,))
        wait = min(0.05, (events[0][0] if events else end) - (time.monotonic() - origin))
        time.sleep(max(0.005, wait))


def _live_replay(trace: Trace, tracks: dict[str, PodTrack], origin: float, end: float) -> Replay:
    started: dict[str, float] = {}
    intervals: dict[str, tuple[float, float]] = {}
    placed: dict[str, str] = {}
    for arrival in trace.arrivals:
        track = tracks.get(arrival.key.split("/", 1)[1])
        if track is None or track.bound is None or track.bound - origin > end:
            continue
        start = track.bound - origin
        left = math.inf if track.deleted is None or track.deleted - origin > end else track.deleted - origin
        started[arrival.key] = start
        intervals[arrival.key] = (start, left)
        placed[arrival.key] = track.node
    return Replay(started, intervals, placed)


# --------------------------------------------------------------------------- the comparison


def capacity_of(cluster: Cluster) -> Usage:
    cpu = memory = gpu = 0
    for raw in cluster.nodes:
        node = parse_node(raw)
        cpu += node.allocatable.get("cpu", 0)
        memory += node.allocatable.get("memory", 0)
        gpu += devices_of(node) * WHOLE
    return Usage(cpu, memory, gpu)


def usages(trace: Trace) -> dict[str, Usage]:
    return {a.key: usage_of(parse_pod(a.pod)) for a in trace.arrivals}


def allocation(replay: Replay, use: dict[str, Usage], capacity: Usage, at: float) -> dict[str, float]:
    """Points (percent of the cluster) allocated at ``at``: the pods bound at or before it and
    not yet gone."""
    running = [use[k] for k, (start, left) in replay.intervals.items() if start <= at < left]
    return _points(running, capacity)


def mean_allocation(replay: Replay, use: dict[str, Usage], capacity: Usage, end: float,
                    since: float = 0.0) -> dict[str, float]:
    """Time-weighted mean over ``[since, end]``, points."""
    spans = {k: max(0.0, min(left, end) - max(start, since)) for k, (start, left) in replay.intervals.items()}
    weighted = [Usage(round(use[k].cpu * span), round(use[k].memory * span), round(use[k].gpu * span))
                for k, span in spans.items()]
    length = end - since
    return {r: v / length for r, v in _points(weighted, capacity).items()} if length > 0 else _points([], capacity)


def _points(usage: Sequence[Usage], capacity: Usage) -> dict[str, float]:
    def share(used: int, total: int) -> float:
        return 100.0 * used / total if total else 0.0

    return {"cpu": share(sum(u.cpu for u in usage), capacity.cpu),
            "memory": share(sum(u.memory for u in usage), capacity.memory),
            "gpu": share(sum(u.gpu for u in usage), capacity.gpu)}


def compare(sim: Replay, real: Replay, use: dict[str, Usage], capacity: Usage, end: float,
            margin: float) -> dict[str, Any]:
    """The figures of one scheduler: bound sets, allocation (mean, end, largest gap), lateness,
    the first divergence. The end is the mean over ``[end - margin, end]``."""
    only_sim = sorted(set(sim.started) - set(real.started))
    only_live = sorted(set(real.started) - set(sim.started))
    mean_sim, mean_live = mean_allocation(sim, use, capacity, end), mean_allocation(real, use, capacity, end)
    since = max(0.0, end - margin)
    end_sim, end_live = (mean_allocation(sim, use, capacity, end, since),
                         mean_allocation(real, use, capacity, end, since))
    gaps = {r: 0.0 for r in RESOURCES}
    for second in range(math.floor(end) + 1):
        a, b = allocation(sim, use, capacity, second), allocation(real, use, capacity, second)
        gaps = {r: max(gaps[r], abs(a[r] - b[r])) for r in RESOURCES}
    both = sorted(set(sim.started) & set(real.started))
    late = [real.started[k] - sim.started[k] for k in both]
    figures: dict[str, Any] = {
        "pods_bound": {"simulated": len(sim.started), "live": len(real.started)},
        "bound_only_simulated": only_sim, "bound_only_live": only_live,
        "mean_points": {r: {"simulated": round(mean_sim[r], 2), "live": round(mean_live[r], 2),
                            "difference": round(mean_live[r] - mean_sim[r], 2)} for r in RESOURCES},
        "end_points": {r: {"simulated": round(end_sim[r], 2), "live": round(end_live[r], 2),
                           "difference": round(end_live[r] - end_sim[r], 2)} for r in RESOURCES},
        "largest_gap_points": {r: round(v, 2) for r, v in gaps.items()},
        "on_another_node": sum(1 for k in both if sim.nodes[k] != real.nodes[k]),
        "first_divergence": first_divergence(sim, real),
        "bound_later_live_seconds": {"p50": round(percentile(late, 0.5), 2), "p90": round(percentile(late, 0.9), 2),
                                     "max": round(max(late, default=0.0), 2)},
    }
    figures["floor_holds"] = (not only_sim and not only_live and all(
        abs(figures[k][r]["difference"]) <= FLOOR_POINTS for k in ("mean_points", "end_points") for r in RESOURCES))
    return figures


def first_divergence(sim: Replay, real: Replay) -> dict[str, Any] | None:
    """The first pod (in the simulation's binding order) bound on another node live, or more
    than ``DIVERGED_SECONDS`` apart, or on one side only; with the pods that ran on one side and
    not on the other when it was bound (on either side): what its scheduler saw differently."""
    order = sorted(set(sim.started) | set(real.started), key=lambda k: (min(sim.started.get(k, math.inf),
                                                                            real.started.get(k, math.inf)), k))
    for key in order:
        at_sim, at_live = sim.started.get(key), real.started.get(key)
        if (at_sim is not None and at_live is not None and sim.nodes[key] == real.nodes[key]
                and abs(at_live - at_sim) <= DIVERGED_SECONDS):
            continue
        at = min(t for t in (at_sim, at_live) if t is not None)
        running_sim, running_live = _running(sim, at), _running(real, at)
        return {"pod": key, "simulated": _bound(sim, key), "live": _bound(real, key),
                "running_only_simulated": [_bound(sim, k) | {"pod": k} for k in sorted(running_sim - running_live)],
                "running_only_live": [_bound(real, k) | {"pod": k} for k in sorted(running_live - running_sim)]}
    return None


def _running(replay: Replay, at: float) -> set[str]:
    """The pods bound before ``at`` and not gone by then."""
    return {k for k, (start, left) in replay.intervals.items() if start < at < left or start < at == left}


def _bound(replay: Replay, key: str) -> dict[str, Any]:
    if key not in replay.started:
        return {}
    start, left = replay.intervals[key]
    return {"at": round(start, 3), "node": replay.nodes[key], "left": None if math.isinf(left) else round(left, 3)}


def dump_replays(dump: Path, scheduler: str, sim: Replay, real: Replay, trace: Trace) -> None:
    """``<scheduler>-pods.jsonl``: each pod's arrival, and its binding, node and departure in
    both replays, in the simulation's binding order."""
    arrivals = {a.key: a.at for a in trace.arrivals}
    order = sorted(arrivals, key=lambda k: (sim.started.get(k, math.inf), arrivals[k], k))
    with (dump / f"{scheduler}-pods.jsonl").open("w") as out:
        for key in order:
            out.write(json.dumps({"pod": key, "arrival": arrivals[key], "simulated": _bound(sim, key),
                                  "live": _bound(real, key)}) + "\n")


# --------------------------------------------------------------------------- the run


def run(plane: ControlPlane, spec: TraceSpec, schedulers: Sequence[str], say: Say,
        settings: Settings | None = None, dump: Path | None = None) -> dict[str, Any]:
    """``{"trace": {...}, "schedulers": {name: figures}}``; the nodes and namespaces it made are
    removed afterwards. With ``dump`` (a folder), each scheduler's log on both sides and each
    pod's timeline in both replays are written there (:func:`dump_replays`)."""
    trace = fidelity_trace(spec)
    node_manifests = nodes(spec.nodes)
    cluster = Cluster(tuple(node_manifests), (), "kwok nodes")
    end = end_of(trace, spec)
    use, capacity = usages(trace), capacity_of(cluster)
    doc: dict[str, Any] = {"trace": {"pods": len(trace.arrivals), "gangs": len(gangs_of(trace)), "seed": spec.seed,
                                     "compress": spec.compress, "tick": spec.tick, "last_arrival": trace.span,
                                     "end": end, "end_window": spec.margin, "nodes": spec.nodes},
                          "schedulers": {}}
    with Harness(plane, settings or Settings(), say) as harness:
        harness.apply_rbac()
        try:
            harness.create_nodes(node_manifests)
            for scheduler in schedulers:
                sim = simulated(cluster, trace, scheduler, end, dump)
                say(f"  {scheduler} simulated: {len(sim.started)} bound")
                real = live(harness, trace, scheduler, end, say, dump)
                if dump is not None:
                    dump_replays(dump, scheduler, sim, real, trace)
                figures = compare(sim, real, use, capacity, end, spec.margin)
                figures["simulation_spread"] = own_spread(cluster, trace, scheduler, end, sim, use, capacity,
                                                          spec.margin)
                doc["schedulers"][scheduler] = figures
                say(f"  {scheduler}: {figures['pods_bound']}, floor holds: {figures['floor_holds']}")
        finally:
            harness.delete_nodes([n["metadata"]["name"] for n in node_manifests])
            harness.remove_rbac()
            for scheduler in schedulers:
                harness.api.request("DELETE", f"/api/v1/namespaces/fid-{scheduler}", ok=(200, 202, 404))
    return doc


def table(doc: dict[str, Any]) -> str:
    t = doc["trace"]
    head = ["scheduler", "bound sim", "bound live", "only sim", "only live",
            *(f"{r} mean Δ" for r in RESOURCES), *(f"{r} end Δ" for r in RESOURCES), "sim spread mean/end",
            "other node", "late p90 s", "late max s", "floor"]
    rows = []
    for name, f in doc["schedulers"].items():
        rows.append([name, str(f["pods_bound"]["simulated"]), str(f["pods_bound"]["live"]),
                     str(len(f["bound_only_simulated"])), str(len(f["bound_only_live"])),
                     *(f"{f['mean_points'][r]['difference']:+.2f}" for r in RESOURCES),
                     *(f"{f['end_points'][r]['difference']:+.2f}" for r in RESOURCES),
                     spread_cell(f.get("simulation_spread")), str(f["on_another_node"]),
                     f"{f['bound_later_live_seconds']['p90']:.2f}",
                     f"{f['bound_later_live_seconds']['max']:.2f}", "holds" if f["floor_holds"] else "FAILS"])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in [head, *rows]]
    notes = [f"trace: {t['pods']} pods ({t['gangs']} gangs), seed {t['seed']}, compressed {t['compress']:g}x, "
             f"arrivals on {t['tick']:g}s ticks, last at {t['last_arrival']:g}s, measured to {t['end']:g}s; "
             f"{t['nodes']} kwok nodes of 16 CPU / 64 GiB / 4 GPUs",
             "Δ: live minus simulated, in points of the cluster's allocation (mean: over the whole run; end: "
             f"over its last {t['end_window']:g}s); the floor: the same pods bound and every Δ within "
             f"{FLOOR_POINTS:g} point; sim spread: the largest Δ between the simulation and itself "
             f"with latencies of {', '.join(f'{s:g}' for s in SPREAD_LATENCIES)}s instead of {API_LATENCY:g}s, "
             "* when another set of pods was bound"]
    for name, f in doc["schedulers"].items():
        first = f["first_divergence"]
        if first is not None:
            notes.append(f"{name}: first divergence {first['pod']}: simulated {_where(first['simulated'])}, "
                         f"live {_where(first['live'])}")
    return "\n".join([*lines, "", *notes])


def spread_cell(spread: dict[str, Any] | None) -> str:
    """``own_spread``'s figures as a table cell: mean/end points, * when another set of pods was bound."""
    if spread is None:
        return "-"
    return f"{spread['mean_points']:.2f}/{spread['end_points']:.2f}" + ("*" if spread["other_pods_bound"] else "")


def _where(bound: dict[str, Any]) -> str:
    return f"{bound['node']} at {bound['at']:g}s" if bound else "not bound"
