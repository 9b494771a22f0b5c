"""One-pod-at-a-time baselines on the device simulator, and the LP bound.

Every policy takes the pods in the order given (creation order, the CSV order), filters the nodes
where the pod fits now (``Cluster.feasible``: cpu, memory, GPU model, devices), scores them, takes
the best and the devices the policy chooses, and moves on; a pod that fits nowhere stays pending.

- ``default-scheduler``: kube-scheduler's NodeResourcesFit LeastAllocated (cpu and memory, weight 1
  each): ``score_r = (free_r - request_r) * 100 // allocatable_r``, node score ``(score_cpu +
  score_memory) // 2``, highest wins; as kube-scheduler does, a zero cpu or memory request counts as
  100m / 200Mi when scoring, and ties are broken at random (seeded), as its ``selectHost`` does.
  Device: a share takes the lowest-index device with room, whole GPUs the lowest-index free devices.
- ``best-fit`` and ``fgd``: the FGD authors' (hkust-adsl/kubernetes-scheduler-simulator), the one
  implementation ``kubeplace simulate`` runs too: ``kubeplace.simulate.policies`` (``best_fit``,
  ``fgd``), on this simulator's cluster (a ``DeviceView``), against the typical pods given.

best-fit and fgd break ties by the smallest node name, as the kube-scheduler fork vendored by the
FGD authors' simulator does "for reproducibility" (their published figures come from it; with random
ties FGD falls several points). That simulator first renames its nodes with a seeded random prefix,
so the order that breaks ties is a parameter (``tie_rank``: each node's position, smallest first;
by default the node names' order; ``bench.fgd_protocol`` passes the simulator's renamed order).

Timing is wall seconds; memory is the growth of the resident set during the run (see
:func:`measure`).
"""

from __future__ import annotations

import resource
import threading
import time
import tracemalloc
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubeplace.simulate.policies import POLICIES as SIMULATED
from kubeplace.simulate.policies.node_view import Chooser, TieOrder
from kubeplace.simulate.policies.typical import TaskDistribution
from kubeplace_bench.fragmentation import cluster_fragmentation
from kubeplace_bench.gpusim import WHOLE, Cluster, IntArray, Metrics, NodeSpec, Placed, PodSpec, metrics

POLICIES = ("default-scheduler", *SIMULATED)
NONZERO_CPU = 100  # milli, kube-scheduler's DefaultMilliCPURequest
NONZERO_MEM = 200  # MiB, kube-scheduler's DefaultMemoryRequest


@dataclass
class Measured:
    seconds: float = 0.0
    peak_mib: float = 0.0


def _rss() -> int:
    """Resident set size of this process in bytes (Linux), else the peak so far (getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except (OSError, IndexError, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextmanager
def measure(trace: bool = False) -> Iterator[Measured]:
    """Wall seconds and peak memory (MiB) of the block.

    Memory is the growth of the process's resident set over the block, sampled every 2 ms by a
    thread (native allocations such as OR-tools' count; memory the process freed earlier and reuses
    does not), or with ``trace`` the tracemalloc peak (Python objects and numpy buffers only, and
    it slows allocation-heavy code several times)."""
    out = Measured()
    stop = threading.Event()
    base = _rss()
    peak = [base]

    def sample() -> None:
        while not stop.wait(0.002):
            peak[0] = max(peak[0], _rss())

    sampler = threading.Thread(target=sample, daemon=True)
    if trace:
        started = not tracemalloc.is_tracing()
        if started:
            tracemalloc.start()
        tracemalloc.reset_peak()
        traced = tracemalloc.get_traced_memory()[0]
    else:
        sampler.start()
    t0 = time.perf_counter()
    try:
        yield out
    finally:
        out.seconds = time.perf_counter() - t0
        if trace:
            out.peak_mib = max(0, tracemalloc.get_traced_memory()[1] - traced) / (1 << 20)
            if started:
                tracemalloc.stop()
        else:
            stop.set()
            sampler.join()
            out.peak_mib = max(0, max(peak[0], _rss()) - base) / (1 << 20)


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


TieRank = Sequence[int] | None


class _RandomTies:
    """Picks among equally good candidates at random (seeded), as the kube-scheduler's ``selectHost``."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def best(self, nodes: IntArray, score: IntArray) -> int:
        tied = np.flatnonzero(score == score.max())
        return int(tied[0]) if len(tied) == 1 else int(tied[self.rng.integers(len(tied))])


class _Default:
    def __init__(self, cluster: Cluster, seed: int) -> None:
        self.c, self.ties = cluster, _RandomTies(seed)
        self.nz_cpu = np.zeros(len(cluster.nodes), dtype=np.int64)  # non-zero requested, for scoring
        self.nz_mem = np.zeros(len(cluster.nodes), dtype=np.int64)

    def choose(self, pod: PodSpec, nodes: IntArray) -> Choice:
        c = self.c
        cpu, mem = pod.cpu or NONZERO_CPU, pod.mem or NONZERO_MEM
        score = (_least(c.cpu_cap[nodes], self.nz_cpu[nodes] + cpu)
                 + _least(c.mem_cap[nodes], self.nz_mem[nodes] + mem)) // 2
        i = int(nodes[self.ties.best(nodes, score)])
        self.nz_cpu[i] += cpu
        self.nz_mem[i] += mem
        return i, c.first_fit_devices(pod, i)

    def refresh(self, nodes: IntArray) -> None:
        return None


def _least(capacity: IntArray, requested: IntArray) -> IntArray:
    score: IntArray = np.where((capacity > 0) & (requested <= capacity),
                               (capacity - requested) * 100 // np.maximum(capacity, 1), 0)
    return score


def place_one_at_a_time(policy: str, cluster: Cluster, pods: Sequence[PodSpec], dist: TaskDistribution,
                        seed: int = 0, tie_rank: TieRank = None) -> list[tuple[int, Placed]]:
    """Places ``pods`` in order on ``cluster`` (mutated); returns (pod index, placement) pairs.
    ``tie_rank`` orders the nodes for best-fit's and fgd's ties (default: by name)."""
    chooser: _Default | Chooser  # (the default scheduler reads memory too: a PodSpec)
    if policy == "default-scheduler":
        chooser = _Default(cluster, seed)
    elif policy in SIMULATED:
        ties = (TieOrder.by_name([n.name for n in cluster.nodes]) if tie_rank is None else TieOrder(tie_rank))
        if len(ties.rank) != len(cluster.nodes):
            raise ValueError("tie_rank must be a permutation of the node positions")
        chooser = SIMULATED[policy].chooser(cluster, dist, ties)
    else:
        raise ValueError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
    w = cluster.workload(pods)
    out = []
    for j in range(len(w)):
        nodes = np.flatnonzero(cluster.feasible(w, j))
        if not len(nodes):
            continue
        i, devices = chooser.choose(w.pods[j], nodes)
        reason = cluster.place(w.pods[j], i, devices)
        if reason is not None:  # a baseline only ever picks feasible placements
            raise AssertionError(f"{policy} chose an invalid placement for {w.names[j]}: {reason}")
        chooser.refresh(np.array([i]))
        out.append((j, Placed(w.names[j], cluster.nodes[i].name, devices)))
    return out


def run_baseline(policy: str, nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], *,
                 dist: TaskDistribution, seed: int = 0, trace: bool = False) -> PolicyResult:
    """One policy on an empty cluster of ``nodes``: placements, metrics, seconds and peak memory."""
    with measure(trace) as m:
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
        kind = (n.cpu, n.mem, n.gpus, n.model if n.gpus else "")
        kinds[kind] = kinds.get(kind, 0) + 1
    classes: dict[tuple[int, int, int, int, tuple[str, ...]], int] = {}
    for p in pods:
        cls = (p.cpu, p.mem, p.num_gpu, p.gpu_milli if p.num_gpu else 0, p.models)
        classes[cls] = classes.get(cls, 0) + 1
    pairs = [(c, k) for c in classes for k in kinds
             if c[0] <= k[0] and c[1] <= k[1] and c[2] <= k[2] and (not c[4] or k[3] in c[4])]
    results = []
    for goal in ("gpu_milli", "pods"):
        prob = pulp.LpProblem(f"bound_{goal.replace('_', '')}", pulp.LpMaximize)
        x = {pair: prob.add_variable(f"x{i}", 0, classes[pair[0]]) for i, pair in enumerate(pairs)}
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
            with warnings.catch_warnings():  # PuLP 3.3 announces CBC's move to COIN_CMD in 4.0
                warnings.simplefilter("ignore", DeprecationWarning)
                (solve or (lambda p: p.solve(pulp.PULP_CBC_CMD(msg=False))))(prob)
        value = pulp.value(prob.objective) if x else 0.0
        results.append(int(np.floor((value or 0.0) + 1e-6)))
    return Bound(*results)
