"""One-pod-at-a-time baselines on the device simulator, and the LP bound.

Every policy takes the pods in the order given (creation order, the CSV order), filters the nodes
where the pod fits now (``Cluster.feasible``: cpu, memory, GPU model, devices), scores them, takes
the best and the devices the policy chooses, and moves on; a pod that fits nowhere stays pending.
Ties between equally good choices are broken at random with a seeded generator, as the
kube-scheduler's ``selectHost`` does. Scores are integers, so ties are exact.

- ``default-scheduler``: kube-scheduler's NodeResourcesFit LeastAllocated (cpu and memory, weight 1
  each): ``score_r = (free_r - request_r) * 100 // allocatable_r``, node score ``(score_cpu +
  score_memory) // 2``, highest wins; as kube-scheduler does, a zero cpu or memory request counts as
  100m / 200Mi when scoring. Device: a share takes the lowest-index device with room, whole GPUs the
  lowest-index free devices.
- ``best-fit``: the BestFit score of FGD's simulator (cpu and total GPU, weight 0.5 each, normalised
  by 128 CPUs and 8 GPUs): minimise ``0.5 (cpu_free - cpu)/128000 + 0.5 (gpu_free - gpu)/8000``,
  i.e. the integer ``(cpu_free - cpu) + 16 (gpu_free - gpu)`` (milli, node totals after placement);
  memory only filters. Device: a share takes the device with the least free milli that fits (the
  simulator's "best" GPU selection), whole GPUs the lowest-index free devices.
- ``fgd``: the (node, device) whose placement increases the node's FGD fragmentation
  (``bench.fragmentation``) least, against the shapes of the workload; exact integer deltas, not
  the simulator's sigmoid-rounded 0..100 scores.

Timing is wall seconds; memory is the tracemalloc peak over the run (Python objects and numpy
buffers; native libraries such as OR-tools allocate outside it).
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.fragmentation import FragIndex, TaskDistribution, cluster_fragmentation, distinct_devices
from bench.gpusim import WHOLE, Cluster, IntArray, Metrics, NodeSpec, Placed, PodSpec, Workload, metrics

POLICIES = ("default-scheduler", "best-fit", "fgd")
NONZERO_CPU = 100  # milli, kube-scheduler's DefaultMilliCPURequest
NONZERO_MEM = 200  # MiB, kube-scheduler's DefaultMemoryRequest
BEST_FIT_GPU_WEIGHT = 16  # (0.5 / 8000) / (0.5 / 128000)


@dataclass
class Measured:
    seconds: float = 0.0
    peak_mib: float = 0.0


@contextmanager
def measure() -> Iterator[Measured]:
    """Wall seconds and tracemalloc peak (MiB) of the block."""
    out = Measured()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    try:
        yield out
    finally:
        out.seconds = time.perf_counter() - t0
        out.peak_mib = max(0, tracemalloc.get_traced_memory()[1] - base) / (1 << 20)
        if started:
            tracemalloc.stop()


@dataclass
class PolicyResult:
    name: str
    placements: list[Placed]
    metrics: Metrics
    seconds: float
    peak_mib: float
    pods: int
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {**self.metrics.as_dict(), "pods_unplaced": self.pods - self.metrics.pods_placed,
                "seconds": round(self.seconds, 3), "peak_mib": round(self.peak_mib, 1), **self.extra}


Choice = tuple[int, tuple[int, ...]]


def _pick(rng: np.random.Generator, candidates: IntArray, score: IntArray, best: str) -> int:
    """Position in ``candidates`` of a best-scoring one, uniformly among ties."""
    target = score.max() if best == "max" else score.min()
    tied = np.flatnonzero(score == target)
    return int(tied[0] if len(tied) == 1 else tied[rng.integers(len(tied))])


class _Default:
    def __init__(self, cluster: Cluster, rng: np.random.Generator) -> None:
        self.c, self.rng = cluster, rng
        self.nz_cpu = np.zeros(len(cluster.nodes), dtype=np.int64)  # non-zero requested, for scoring
        self.nz_mem = np.zeros(len(cluster.nodes), dtype=np.int64)

    def choose(self, w: Workload, j: int, nodes: IntArray) -> Choice:
        c, pod = self.c, w.pods[j]
        cpu, mem = pod.cpu or NONZERO_CPU, pod.mem or NONZERO_MEM
        score = (_least(c.cpu_cap[nodes], self.nz_cpu[nodes] + cpu) + _least(c.mem_cap[nodes], self.nz_mem[nodes] + mem)) // 2
        i = int(nodes[_pick(self.rng, nodes, score, "max")])
        self.nz_cpu[i] += cpu
        self.nz_mem[i] += mem
        return i, c.first_fit_devices(pod, i)


def _least(capacity: IntArray, requested: IntArray) -> IntArray:
    score: IntArray = np.where((capacity > 0) & (requested <= capacity),
                               (capacity - requested) * 100 // np.maximum(capacity, 1), 0)
    return score


class _BestFit:
    def __init__(self, cluster: Cluster, rng: np.random.Generator) -> None:
        self.c, self.rng = cluster, rng

    def choose(self, w: Workload, j: int, nodes: IntArray) -> Choice:
        c, pod = self.c, w.pods[j]
        left = (c.cpu_free[nodes] - pod.cpu) + BEST_FIT_GPU_WEIGHT * (c.dev_free[nodes].sum(axis=1) - pod.gpu_total)
        i = int(nodes[_pick(self.rng, nodes, left, "min")])
        return i, c.best_fit_device(pod, i)


class _Fgd:
    def __init__(self, cluster: Cluster, rng: np.random.Generator, dist: TaskDistribution) -> None:
        self.c, self.rng = cluster, rng
        self.index = FragIndex(cluster, dist)

    def choose(self, w: Workload, j: int, nodes: IntArray) -> Choice:
        c, pod, index = self.c, w.pods[j], self.index
        if pod.is_share:
            local, devices = distinct_devices(c.dev_free[nodes], c.n_gpu[nodes], pod.gpu_milli)
            cand = nodes[local]
            delta = index.after_share(cand, devices, pod.cpu, pod.gpu_milli) - index.scaled[cand]
            k = _pick(self.rng, cand, delta, "min")
            return int(cand[k]), (int(devices[k]),)
        if pod.num_gpu:
            delta = index.after_whole(nodes, pod.cpu, pod.num_gpu) - index.scaled[nodes]
        else:
            delta = index.after_cpu_only(nodes, pod.cpu) - index.scaled[nodes]
        i = int(nodes[_pick(self.rng, nodes, delta, "min")])
        return i, c.first_fit_devices(pod, i)

    def placed(self, i: int) -> None:
        self.index.refresh(np.array([i]))


def place_one_at_a_time(policy: str, cluster: Cluster, pods: Sequence[PodSpec], dist: TaskDistribution,
                        seed: int = 0) -> list[tuple[int, Placed]]:
    """Places ``pods`` in order on ``cluster`` (mutated); returns (pod index, placement) pairs."""
    rng = np.random.default_rng(seed)
    chooser: _Default | _BestFit | _Fgd
    if policy == "default-scheduler":
        chooser = _Default(cluster, rng)
    elif policy == "best-fit":
        chooser = _BestFit(cluster, rng)
    elif policy == "fgd":
        chooser = _Fgd(cluster, rng, dist)
    else:
        raise ValueError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
    w = cluster.workload(pods)
    out = []
    for j in range(len(w)):
        nodes = np.flatnonzero(cluster.feasible(w, j))
        if not len(nodes):
            continue
        i, devices = chooser.choose(w, j, nodes)
        reason = cluster.place(w.pods[j], i, devices)
        if reason is not None:  # a baseline only ever picks feasible placements
            raise AssertionError(f"{policy} chose an invalid placement for {w.names[j]}: {reason}")
        if isinstance(chooser, _Fgd):
            chooser.placed(i)
        out.append((j, Placed(w.names[j], cluster.nodes[i].name, devices)))
    return out


def run_baseline(policy: str, nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], *,
                 dist: TaskDistribution, seed: int = 0) -> PolicyResult:
    """One policy on an empty cluster of ``nodes``: placements, metrics, seconds and peak memory."""
    with measure() as m:
        cluster = Cluster.build(nodes)
        done = place_one_at_a_time(policy, cluster, pods, dist, seed)
    return PolicyResult(policy, [p for _, p in done], metrics(cluster, (pods[j] for j, _ in done),
                        cluster_fragmentation(cluster, dist)), m.seconds, m.peak_mib, len(pods))


# --- LP bound --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bound:
    gpu_milli: int
    pods: int

    def as_dict(self) -> dict[str, int]:
        return {"gpu_milli": self.gpu_milli, "pods": self.pods}


def lp_bound(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec],
             solve: Callable[[Any], None] | None = None) -> Bound:
    """Upper bounds on the GPU milli and on the number of pods any placement can reach: two LPs
    over (pod class x node kind) with continuous counts, the kinds' summed cpu, memory and GPU
    milli as capacities, and a pair only when one pod of the class fits one node of the kind
    (model constraint, cpu, memory, device count)."""
    import pulp

    kinds: dict[tuple[int, int, int, str], int] = {}
    for n in nodes:
        key = (n.cpu, n.mem, n.gpus, n.model if n.gpus else "")
        kinds[key] = kinds.get(key, 0) + 1
    classes: dict[tuple[int, int, int, int, tuple[str, ...]], int] = {}
    for p in pods:
        key = (p.cpu, p.mem, p.num_gpu, p.gpu_milli if p.num_gpu else 0, p.models)
        classes[key] = classes.get(key, 0) + 1
    pairs = [(c, k) for c in classes for k in kinds
             if c[0] <= k[0] and c[1] <= k[1] and c[2] <= k[2] and (not c[4] or k[3] in c[4])]
    results = []
    for goal in ("gpu_milli", "pods"):
        prob = pulp.LpProblem(f"bound_{goal.replace('_', '')}", pulp.LpMaximize)
        x = {pair: pulp.LpVariable(f"x{i}", lowBound=0, upBound=classes[pair[0]]) for i, pair in enumerate(pairs)}
        by_class: dict[Any, list[Any]] = {}
        by_kind: dict[Any, list[Any]] = {}
        for (c, k), var in x.items():
            by_class.setdefault(c, []).append(var)
            by_kind.setdefault(k, []).append((c, var))
        for c, vars_ in by_class.items():
            if len(vars_) > 1:
                prob += pulp.lpSum(vars_) <= classes[c]
        for k, members in by_kind.items():
            count = kinds[k]
            prob += pulp.lpSum(c[0] * v for c, v in members) <= k[0] * count
            prob += pulp.lpSum(c[1] * v for c, v in members) <= k[1] * count
            if any(c[2] for c, _ in members):
                prob += pulp.lpSum(c[2] * c[3] * v for c, v in members) <= WHOLE * k[2] * count
        prob += pulp.lpSum((c[2] * c[3] if goal == "gpu_milli" else 1) * v for (c, _), v in x.items())
        if x:
            (solve or (lambda p: p.solve(pulp.PULP_CBC_CMD(msg=False))))(prob)
        value = pulp.value(prob.objective) if x else 0.0
        results.append(int(np.floor((value or 0.0) + 1e-6)))
    return Bound(*results)
