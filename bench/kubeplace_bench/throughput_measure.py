"""The arithmetic of ``kubeplace bench throughput``: from what a pod watch saw to the figures.

A :class:`Tracker` is fed every watch event of the workload's namespace with the local
(monotonic) time it arrived: a pod's *created* time is when the watch first saw it, its *bound*
time when the watch first saw ``spec.nodeName`` set. Nothing here reads the cluster.

The clock of a run starts at ``start``: when the scheduler was launched for a backlog (the pods
were created before, while it was stopped), when the first pod was created for arrivals. A
pod's latency counts from ``max(created, start)`` to bound.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubeplace.kube.gpu_conventions import KOORD_CORE
from kubeplace.models.gpu import DEVICE_ALLOCATED

PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("max", 1.0))


@dataclass
class PodTrack:
    created: float
    bound: float | None = None
    node: str = ""
    rebound: int = 0
    """Times the watch saw ``nodeName`` change from one node to another (must stay 0)."""
    deleted: float | None = None


@dataclass
class Tracker:
    """Per-pod times, fed by the watch thread, read by the harness; thread-safe."""

    pods: dict[str, PodTrack] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    last_bound: float | None = None

    def observe(self, event: str, obj: Mapping[str, Any], now: float) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        with self._lock:
            track = self.pods.get(name)
            if track is None:
                if event == "DELETED":
                    return
                track = self.pods[name] = PodTrack(created=now)
            if node:
                if track.bound is None:
                    track.bound, track.node = now, node
                    self.last_bound = now
                elif node != track.node:
                    track.rebound += 1
                    track.node = node
            if event == "DELETED" and track.deleted is None:
                track.deleted = now

    def snapshot(self) -> dict[str, PodTrack]:
        with self._lock:
            return {k: PodTrack(v.created, v.bound, v.node, v.rebound, v.deleted) for k, v in self.pods.items()}

    def count(self, *, bound: bool | None = None) -> int:
        with self._lock:
            if bound is None:
                return len(self.pods)
            return sum(1 for t in self.pods.values() if (t.bound is not None) == bound)

    def bound_now(self) -> list[str]:
        """Names of pods bound and not deleted."""
        with self._lock:
            return [k for k, t in self.pods.items() if t.bound is not None and t.deleted is None]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (the smallest value with at least ``q`` of them at or below it);
    0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def latency_summary(values: Sequence[float]) -> dict[str, float]:
    return {name: round(percentile(values, q), 3) for name, q in PERCENTILES}


def pod_figures(tracks: Mapping[str, PodTrack], start: float) -> dict[str, Any]:
    """pods_bound, pods_per_second, seconds_to_last_bound, seconds_to_first_bound, latency_seconds,
    rebound, pending (count)."""
    bound = [t for t in tracks.values() if t.bound is not None]
    latencies = [max(0.0, t.bound - max(t.created, start)) for t in bound if t.bound is not None]
    first_created = min((t.created for t in tracks.values()), default=start)
    begin = max(start, first_created)
    last = max((t.bound for t in bound if t.bound is not None), default=begin)
    first = min((t.bound for t in bound if t.bound is not None), default=begin)
    span = last - begin
    return {
        "pods_bound": len(bound),
        "pods_per_second": round(len(bound) / span, 1) if span > 0 else 0.0,
        "seconds_to_last_bound": round(span, 2),
        "seconds_to_first_bound": round(first - begin, 2),
        "latency_seconds": latency_summary(latencies),
        "rebound": sum(t.rebound for t in tracks.values()),
        "pending": sum(1 for t in tracks.values() if t.bound is None and t.deleted is None),
    }


def gang_figures(tracks: Mapping[str, PodTrack], gang_of: Mapping[str, str], sizes: Mapping[str, int],
                 start: float) -> dict[str, Any]:
    """Gangs bound whole (every member), partly (some but fewer than minMember) and not at all at
    the end; gang latency from its first member created (or ``start``) to its last member bound,
    and the bind spread of a whole gang: from its first member bound to its last (members are
    bound one request each, so for that long the watch sees the gang partly bound)."""
    members: dict[str, list[PodTrack]] = {g: [] for g in sizes}
    for name, gang in gang_of.items():
        if name in tracks:
            members.setdefault(gang, []).append(tracks[name])
    whole = partly = none = 0
    latencies, spreads = [], []
    for gang, tracked in members.items():
        bound = [t.bound for t in tracked if t.bound is not None]
        if len(bound) >= sizes.get(gang, len(tracked)) and bound:
            whole += 1
            latencies.append(max(bound) - max(start, min(t.created for t in tracked)))
            spreads.append(max(bound) - min(bound))
        elif bound:
            partly += 1
        else:
            none += 1
    return {"gangs": len(members), "gangs_whole": whole, "gangs_partly": partly, "gangs_unbound": none,
            "gang_latency_seconds": latency_summary(latencies),
            "gang_bind_spread_seconds": latency_summary(spreads)}


def gpu_figures(tracks: Mapping[str, PodTrack], milli: Mapping[str, int]) -> dict[str, Any]:
    """GPUs bound (whole GPUs and shares, in GPUs) and GPU pods bound."""
    bound = [n for n, t in tracks.items() if t.bound is not None and milli.get(n, 0)]
    return {"gpus_bound": round(sum(milli[n] for n in bound) / 1000, 2), "gpu_pods_bound": len(bound)}


def device_conflicts(placed: Mapping[str, Sequence[tuple[int, int]]],
                     devices: Mapping[str, int]) -> tuple[int, int]:
    """GPU pods that do not fit on their node's devices, and the GPU milli they ask: per node,
    whole-GPU pods take free devices and shares (count 1, milli < 1000) the fullest device with
    room, largest first (first-fit decreasing). ``placed``: node -> (devices, milli each) of the
    GPU pods bound there; ``devices``: node -> its GPUs. A scheduler that counts only the node's
    totals (the kube-scheduler's extended resources) can bind shares that no device holds."""
    conflicts = milli_out = 0
    for node, needs in placed.items():
        free = [1000] * devices.get(node, 0)
        for count, milli in sorted(needs, key=lambda n: (-n[0] * n[1], -n[1])):
            if milli >= 1000:
                empty = [d for d, f in enumerate(free) if f == 1000][:count]
                if len(empty) == count:
                    for d in empty:
                        free[d] = 0
                    continue
            else:
                room = [d for d, f in enumerate(free) if f >= milli]
                if room:
                    free[min(room, key=lambda d: free[d])] -= milli
                    continue
            conflicts += 1
            milli_out += count * milli
    return conflicts, milli_out


def memory_growth(samples: Sequence[tuple[float, float]], after: float) -> dict[str, Any]:
    """Resident MiB ``after`` seconds into the run and at its end (the soak check), the growth
    over the run's second half (a plateau shows none), and the MiB at each ``after`` seconds."""
    if not samples:
        return {}

    def at(offset: float) -> float:
        return next((rss for t, rss in samples if t - samples[0][0] >= offset), samples[-1][1])

    warm, end, span = at(after), samples[-1][1], samples[-1][0] - samples[0][0]
    return {"rss_mib_after_warmup": round(warm, 1), "rss_mib_end": round(end, 1),
            "rss_growth_mib": round(end - warm, 1),
            "rss_growth_second_half_mib": round(end - at(span / 2), 1),
            "rss_mib_by_period": [round(at(k * after), 1) for k in range(int(span // after) + 1)]}


def top_reasons(messages: Mapping[str, str], limit: int = 3) -> dict[str, int]:
    """The most frequent messages (pod -> its last FailedScheduling message), most frequent first."""
    counts: dict[str, int] = {}
    for message in messages.values():
        counts[message] = counts.get(message, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit])


def overcommitted_by_annotation(pods: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(bound pods with a Koordinator device-allocated annotation, those of them that name a device
    the annotations of the pods bound to the same node fill past one whole GPU): what a scheduler
    that records its device choice (kubeplace) really over-commits, not a packing heuristic."""
    load: dict[tuple[str, int], int] = {}
    devices_of: list[list[tuple[str, int]]] = []
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        text = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEVICE_ALLOCATED)
        if not node or not text:
            continue
        keys = []
        for entry in json.loads(text).get("gpu", []):
            key = (str(node), int(entry["minor"]))
            load[key] = load.get(key, 0) + int(entry["resources"][KOORD_CORE]) * 10
            keys.append(key)
        devices_of.append(keys)
    return len(devices_of), sum(1 for keys in devices_of if any(load[k] > 1000 for k in keys))
