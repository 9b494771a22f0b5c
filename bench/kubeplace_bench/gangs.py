"""Gang benchmark: mixed-shape gangs, feasible by construction, placed by kubeplace and by a
one-pod-at-a-time scheduler with a coscheduling permit barrier; and batch-window throughput.

Workloads (:func:`feasible_workload`) are generated from a seed by *packing first*: gangs of 2-64
pods (a launcher and workers of one shape per gang: CPU, memory or GPU heavy) are put on the
nodes by a random first fit, a gang that does not fit whole is dropped, until the cluster is full
(``misses`` gangs in a row did not fit) or ``gangs`` were packed. That packing is a witness: every
gang of the workload can run at once. The arrival order is then shuffled.

- **kubeplace**: :func:`plan.pipeline.make_plan` on the whole batch (every gang pending at once),
  checked by :func:`plan.checks.verify_plan`.
- **coscheduling**: kube-scheduler's behaviour with scheduler-plugins' Coscheduling: pods in
  arrival order (a gang's pods together, launcher first), each on the feasible node with the best
  NodeResourcesFit LeastAllocated score (cpu and memory, ties at random); a gang's pods are only
  *assumed* until all of its minMember are, and released when one of them fits nowhere. Rejected
  gangs are retried, pass after pass, while a pass still places one.

Throughput (:func:`throughput`): gangs of 3-8 pods arriving over a simulated minute on a large
cluster, planned window by window, each window with everything placed before held fixed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubeplace.kube.objects import CPU, GPU, MEMORY, PODS, Node, Pod, PodGroup, Snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan

MI = 1024 * 1024
GI = 1024 * MI
GANG_LABEL, MIN_MEMBER = "kubeplace.io/gang", "kubeplace.io/gang-min-member"
RESOURCES = (CPU, MEMORY, GPU, PODS)
NODE_SHAPES = (  # name, cpu milli, memory bytes, gpus, pods; weight
    ("cpu", 64_000, 256 * GI, 0, 110, 2.0),
    ("gpu", 48_000, 384 * GI, 8, 110, 1.0),
)
WORKER_SHAPES = (  # cpu milli, memory bytes, gpus; weight
    (8_000, 16 * GI, 0, 3.0),   # cpu heavy
    (4_000, 48 * GI, 0, 2.0),   # memory heavy
    (2_000, 4 * GI, 0, 3.0),    # small
    (6_000, 40 * GI, 1, 2.0),   # one GPU
    (16_000, 96 * GI, 4, 1.0),  # four GPUs
)
LAUNCHER = (1_000, 2 * GI, 0)


@dataclass
class Workload:
    capacity: np.ndarray  # nodes x resources (cpu, memory, gpu, pods)
    node_kinds: list[str]
    gangs: list[list[tuple[int, int, int]]]  # arrival order; each gang's pods (launcher first)
    seed: int

    @property
    def pods(self) -> int:
        return sum(len(g) for g in self.gangs)


def feasible_workload(seed: int, nodes: int = 300, gangs: int = 500, min_pods: int = 2, max_pods: int = 64,
                      misses: int = 40) -> Workload:
    rng = np.random.default_rng(seed)
    weights = np.array([s[5] for s in NODE_SHAPES])
    kinds = rng.choice(len(NODE_SHAPES), size=nodes, p=weights / weights.sum())
    capacity = np.array([NODE_SHAPES[k][1:5] for k in kinds], dtype=np.int64)
    free = capacity.copy()
    shape_w = np.array([s[3] for s in WORKER_SHAPES])
    packed: list[list[tuple[int, int, int]]] = []
    missed = 0
    while len(packed) < gangs and missed < misses:
        size = round(math.exp(rng.uniform(math.log(min_pods), math.log(max_pods))))
        worker = WORKER_SHAPES[rng.choice(len(WORKER_SHAPES), p=shape_w / shape_w.sum())][:3]
        pods = [LAUNCHER, *([worker] * (size - 1))]
        trial = free.copy()
        for cpu, memory, gpu in sorted(pods, reverse=True):
            need = np.array([cpu, memory, gpu, 1])
            fits = np.flatnonzero((trial >= need).all(axis=1))
            if fits.size == 0:
                break
            trial[rng.choice(fits)] -= need
        else:
            free = trial
            packed.append(pods)
            missed = 0
            continue
        missed += 1
    order = rng.permutation(len(packed))
    return Workload(capacity, [NODE_SHAPES[k][0] for k in kinds], [packed[i] for i in order], seed)


def to_snapshot(w: Workload, prefix: str = "", bound: tuple[Pod, ...] = (), gang_ids: range | None = None,
                nodes: tuple[Node, ...] | None = None) -> Snapshot:
    """The workload's gangs (``gang_ids``, default all) pending, as typed objects."""
    if nodes is None:
        nodes = tuple(Node(f"node-{i:05d}", labels={"kind": k},
                           allocatable={r: int(v) for r, v in zip(RESOURCES, row, strict=True) if v})
                      for i, (row, k) in enumerate(zip(w.capacity, w.node_kinds, strict=True)))
    pending: list[Pod] = []
    groups: list[PodGroup] = []
    for g in gang_ids if gang_ids is not None else range(len(w.gangs)):
        name = f"{prefix}gang-{g:04d}"
        groups.append(PodGroup("bench", name, len(w.gangs[g]), origin="label"))
        for j, (cpu, memory, gpu) in enumerate(w.gangs[g]):
            requests = {CPU: cpu, MEMORY: memory, PODS: 1, **({GPU: gpu} if gpu else {})}
            pending.append(Pod("bench", f"{name}-{j:02d}", uid=f"{name}-{j}", labels={GANG_LABEL: name},
                               annotations={MIN_MEMBER: str(len(w.gangs[g]))}, scheduler_name="kubeplace",
                               requests=requests, creation=f"2025-01-01T00:{g // 60 % 60:02d}:{g % 60:02d}Z"))
    return Snapshot(nodes, tuple(pending), bound, pod_groups=tuple(groups), source="bench")


@dataclass
class Outcome:
    gangs_placed: int
    pods_placed: int
    seconds: float
    detail: dict[str, Any] = field(default_factory=dict)


def run_kubeplace(w: Workload, options: SolverSettings) -> Outcome:
    snapshot = to_snapshot(w)
    config, profile = Configuration(), Profile()
    started = time.perf_counter()
    plan = make_plan(snapshot, config, profile, options).plan
    planned = time.perf_counter() - started
    violations = verify_plan(snapshot, plan.placements, config, profile)
    return Outcome(sum(g.placed for g in plan.gangs), len(plan.placements), planned,
                   {"status": plan.summary.status, "gap": plan.summary.gap, "violations": len(violations),
                    "verify_seconds": round(time.perf_counter() - started - planned, 3)})


def run_coscheduling(w: Workload, seed: int = 0) -> Outcome:
    rng = np.random.default_rng(seed)
    cap = w.capacity
    free = cap.copy()
    started = time.perf_counter()
    placed = [False] * len(w.gangs)
    progress = True
    passes = 0
    while progress:
        progress, passes = False, passes + 1
        for g, pods in enumerate(w.gangs):
            if placed[g]:
                continue
            assumed: list[tuple[int, np.ndarray]] = []
            for cpu, memory, gpu in pods:
                need = np.array([cpu, memory, gpu, 1])
                fits = np.flatnonzero((free >= need).all(axis=1))
                if fits.size == 0:
                    break
                score = ((free[fits, 0] - cpu) * 100 // cap[fits, 0]
                         + (free[fits, 1] - memory) * 100 // cap[fits, 1]) // 2
                best = fits[score == score.max()]
                node = int(rng.choice(best))
                free[node] -= need
                assumed.append((node, need))
            if len(assumed) == len(pods):
                placed[g] = progress = True
            else:  # the permit barrier releases the gang's assumed pods
                for node, need in assumed:
                    free[node] += need
    return Outcome(sum(placed), sum(len(p) for p, ok in zip(w.gangs, placed, strict=True) if ok),
                   time.perf_counter() - started, {"passes": passes})


def compare(seeds: list[int], nodes: int, gangs: int, options: SolverSettings) -> list[dict[str, Any]]:
    rows = []
    for seed in seeds:
        w = feasible_workload(seed, nodes=nodes, gangs=gangs)
        used = _packed_load(w) / np.maximum(w.capacity.sum(axis=0), 1)
        kp, co = run_kubeplace(w, options), run_coscheduling(w, seed)
        rows.append({"seed": seed, "nodes": nodes, "gangs": len(w.gangs), "pods": w.pods,
                     "packed_utilisation": {r: round(float(u), 3) for r, u in zip(RESOURCES, used, strict=True)},
                     "kubeplace": _row(kp, len(w.gangs)), "coscheduling": _row(co, len(w.gangs))})
    return rows


def _row(o: Outcome, gangs: int) -> dict[str, Any]:
    return {"gangs_placed": o.gangs_placed, "fraction": round(o.gangs_placed / max(gangs, 1), 4),
            "pods_placed": o.pods_placed, "seconds": round(o.seconds, 3), **o.detail}


def _packed_load(w: Workload) -> np.ndarray:
    load = np.zeros(w.capacity.shape[1], dtype=np.int64)
    for pods in w.gangs:
        for cpu, memory, gpu in pods:
            load += np.array([cpu, memory, gpu, 1])
    return load


def throughput(seed: int, nodes: int = 5000, gangs: int = 1000, seconds: float = 60.0, window: float = 1.0,
               options: SolverSettings | None = None) -> dict[str, Any]:
    """Gangs of 3-8 pods arriving uniformly over ``seconds`` (simulated), planned per window."""
    rng = np.random.default_rng(seed)
    options = options or SolverSettings(time_limit=2.0, workers=2)
    w = feasible_workload(seed, nodes=nodes, gangs=gangs, min_pods=3, max_pods=8, misses=10**9)
    w.gangs = w.gangs[:gangs]
    arrivals = np.sort(rng.uniform(0, seconds, size=len(w.gangs)))
    base = to_snapshot(w, gang_ids=range(0))
    bound: list[Pod] = []
    config, profile = Configuration(), Profile()
    latencies, sizes, placed = [], [], 0
    total = 0.0
    windows = math.ceil(seconds / window)
    for k in range(windows):
        ids = np.flatnonzero((arrivals >= k * window) & (arrivals < (k + 1) * window))
        if ids.size == 0:
            continue
        first, last = int(ids[0]), int(ids[-1]) + 1
        snapshot = to_snapshot(w, bound=tuple(bound), gang_ids=range(first, last), nodes=base.nodes)
        started = time.perf_counter()
        plan = make_plan(snapshot, config, profile, options).plan
        violations = verify_plan(snapshot, plan.placements, config, profile)
        elapsed = time.perf_counter() - started
        if violations:
            raise AssertionError(f"window {k}: {violations[0]}")
        total += elapsed
        latencies.append(elapsed)
        sizes.append(len(snapshot.pending))
        placed += sum(g.placed for g in plan.gangs)
        pods = {p.name: p for p in snapshot.pending}
        bound += [Pod(p.namespace, p.name, p.uid, labels=pods[p.name].labels, node_name=p.node, phase="Running",
                      requests=pods[p.name].requests) for p in plan.placements]
    lat = np.array(latencies)
    return {"seed": seed, "nodes": nodes, "gangs": len(w.gangs), "pods": w.pods, "windows": len(latencies),
            "window_seconds": window, "gangs_placed": placed, "pods_bound": len(bound),
            "batch_latency_seconds": {q: round(float(np.percentile(lat, p)), 3)
                                      for q, p in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
            "pods_per_window": {"mean": round(float(np.mean(sizes)), 1), "max": int(np.max(sizes))},
            "planning_seconds_total": round(total, 2), "pods_per_second": round(w.pods / total, 1),
            "time_limit": options.time_limit}
