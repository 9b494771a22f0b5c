"""One-pod-at-a-time baselines on the device simulator, and the LP bound.

Every policy takes the pods in the order given (creation order, the CSV order), filters the nodes
where the pod fits now (``Cluster.feasible``: cpu, memory, GPU model, devices), scores them, takes
the best and the devices the policy chooses, and moves on; a pod that fits nowhere stays pending.

- ``default-scheduler``: kube-scheduler's NodeResourcesFit LeastAllocated (cpu and memory, weight 1
  each): ``score_r = (free_r - request_r) * 100 // allocatable_r``, node score ``(score_cpu +
  score_memory) // 2``, highest wins; as kube-scheduler does, a zero cpu or memory request counts as
  100m / 200Mi when scoring, and ties are broken at random (seeded), as its ``selectHost`` does.
  Device: a share takes the lowest-index device with room, whole GPUs the lowest-index free devices.
- ``best-fit``: the BestFit score of FGD's simulator (hkust-adsl/kubernetes-scheduler-simulator):
  ``s = 0.5 (cpu_free - cpu) / 128000 + 0.5 (gpu_free - gpu) / 8000`` (milli, node totals after
  the placement; memory only filters), node score ``int((1 - s) * 100)``, highest wins. Device: a
  share takes the device with the least free milli that fits (the simulator's "best" GPU
  selection), whole GPUs the lowest-index free devices.
- ``fgd``: for every node and device, the drop in the node's FGD fragmentation
  (``bench.fragmentation``, against the workload's task shapes) ``d = F_before - F_after`` (milli),
  score ``int(100 * sigmoid(d / 1000))``; a node's score is its best device's (the lowest index on
  ties), highest wins. Where d is exactly 0 the simulator's float sums decide between 49 and 50
  (``bench.fgd_score``), as they decide its ties.

best-fit and fgd break ties by the smallest node name, as the kube-scheduler fork vendored by the
FGD authors' simulator does "for reproducibility" (their published figures come from it; with random
ties FGD falls several points). That simulator first renames its nodes with a seeded random prefix,
so the order that breaks ties is a parameter (``tie_rank``: each node's position, smallest first;
by default the node names' order; ``bench.fgd_protocol`` passes the simulator's renamed order).
Scores are integers, rounded as that simulator rounds them.

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

from kubeplace_bench.fgd_score import GoFragScore
from kubeplace_bench.fgd_score import score as go_score
from kubeplace_bench.fragmentation import FragIndex, TaskDistribution, cluster_fragmentation
from kubeplace_bench.gpusim import WHOLE, Cluster, IntArray, Metrics, NodeSpec, Placed, PodSpec, Workload, metrics

POLICIES = ("default-scheduler", "best-fit", "fgd")
NONZERO_CPU = 100  # milli, kube-scheduler's DefaultMilliCPURequest
NONZERO_MEM = 200  # MiB, kube-scheduler's DefaultMemoryRequest
MAX_SPEC_CPU = 128000  # milli, the normalisers of FGD's simulator
MAX_SPEC_GPU = 8000


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


class _Ties:
    """Picks among equally good candidates: at random (seeded), by the smallest ``rank`` (each
    node's position in the tie-break order; by default the order of the node names), or
    (``fuller``) the fuller node first, by best-fit's leftover (cpu and GPU milli free, each over
    the simulator's normaliser), then by ``rank``."""

    def __init__(self, cluster: Cluster, mode: str, seed: int, rank: TieRank = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.mode = mode
        self.cluster = cluster
        self.watch = False  # by rank, note in fuller_differs when the fuller node would have won
        self.fuller_differs = False
        if rank is None:
            self.rank = np.argsort(np.argsort(np.array([n.name for n in cluster.nodes]), kind="stable"))
        else:
            if sorted(rank) != list(range(len(cluster.nodes))):
                raise ValueError("tie_rank must be a permutation of the node positions")
            self.rank = np.asarray(rank, dtype=np.int64)

    def best(self, nodes: IntArray, score: IntArray) -> int:
        """Position in ``nodes`` of a highest-scoring candidate (the first of a node on ties)."""
        tied = np.flatnonzero(score == score.max())
        if len(tied) == 1:
            return int(tied[0])
        if self.mode == "random":
            return int(tied[self.rng.integers(len(tied))])
        at = nodes[tied]
        by_rank = int(tied[np.argmin(self.rank[at])])
        if self.mode != "fuller" and not self.watch:
            return by_rank
        c = self.cluster
        left = c.cpu_free[at] / MAX_SPEC_CPU + c.dev_free[at].sum(axis=1) / MAX_SPEC_GPU
        fuller = int(tied[np.lexsort((self.rank[at], left))[0]])
        if self.mode == "fuller":
            return fuller
        self.fuller_differs |= fuller != by_rank
        return by_rank


class _Default:
    def __init__(self, cluster: Cluster, seed: int) -> None:
        self.c, self.ties = cluster, _Ties(cluster, "random", seed)
        self.nz_cpu = np.zeros(len(cluster.nodes), dtype=np.int64)  # non-zero requested, for scoring
        self.nz_mem = np.zeros(len(cluster.nodes), dtype=np.int64)

    def choose(self, w: Workload, j: int, nodes: IntArray) -> Choice:
        c, pod = self.c, w.pods[j]
        cpu, mem = pod.cpu or NONZERO_CPU, pod.mem or NONZERO_MEM
        score = (_least(c.cpu_cap[nodes], self.nz_cpu[nodes] + cpu)
                 + _least(c.mem_cap[nodes], self.nz_mem[nodes] + mem)) // 2
        i = int(nodes[self.ties.best(nodes, score)])
        self.nz_cpu[i] += cpu
        self.nz_mem[i] += mem
        return i, c.first_fit_devices(pod, i)


def _least(capacity: IntArray, requested: IntArray) -> IntArray:
    score: IntArray = np.where((capacity > 0) & (requested <= capacity),
                               (capacity - requested) * 100 // np.maximum(capacity, 1), 0)
    return score


class _BestFit:
    def __init__(self, cluster: Cluster, seed: int, rank: TieRank = None) -> None:
        self.c, self.ties = cluster, _Ties(cluster, "name", seed, rank)

    def choose(self, w: Workload, j: int, nodes: IntArray) -> Choice:
        c, pod = self.c, w.pods[j]
        left = (0.5 * (c.cpu_free[nodes] - pod.cpu) / MAX_SPEC_CPU
                + 0.5 * (c.dev_free[nodes].sum(axis=1) - pod.gpu_total) / MAX_SPEC_GPU)
        score = ((1.0 - left) * 100).astype(np.int64)
        i = int(nodes[self.ties.best(nodes, score)])
        return i, c.best_fit_device(pod, i)


class FgdChooser:
    """FGD's score from the exact fragmentation (``FragIndex``, integers), except where the exact
    drop is 0: there the simulator's float sums (``bench.fgd_score``) decide between 49 and 50
    when the placement moves amounts between its slots (a node whose free cpu crosses a typical
    pod's, or whose devices change)."""

    def __init__(self, cluster: Cluster, seed: int, dist: TaskDistribution, rank: TieRank = None,
                 ties: str = "name") -> None:
        self.c, self.ties = cluster, _Ties(cluster, ties, seed, rank)
        self.index = FragIndex(cluster, dist)
        self.go = GoFragScore(dist, dist.listed or dist.total, cluster.models)
        self.go_before = self.go.frag(cluster.cpu_free, cluster.dev_free, cluster.model_id)
        self.cpu_levels = np.unique(dist.cpu)

    def _score(self, nodes: IntArray, after: IntArray, cpu: int, dev_after: IntArray | None) -> IntArray:
        """``dev_after``: the candidates' free milli per device after, None when unchanged."""
        drop = (self.index.scaled[nodes] - after) / max(self.index.w_total, 1)  # milli-GPU
        score: IntArray = (100.0 / (1.0 + np.exp(-drop / 1000.0))).astype(np.int64)
        zero = after == self.index.scaled[nodes]
        if dev_after is None:  # cpu only: the slots move only where the free cpu crosses a level
            free = self.c.cpu_free[nodes]
            zero &= (np.searchsorted(self.cpu_levels, free, side="right")
                     != np.searchsorted(self.cpu_levels, free - cpu, side="right"))
        if zero.any():
            at = nodes[zero]
            dev = self.c.dev_free[at] if dev_after is None else dev_after[zero]
            score[zero] = go_score(self.go_before[at], self.go.frag(self.c.cpu_free[at] - cpu, dev,
                                                                   self.c.model_id[at]))
        return score

    def choose(self, w: Workload, j: int, nodes: IntArray) -> Choice:
        c, pod, index = self.c, w.pods[j], self.index
        if pod.is_share:
            cand, devices = index.share_candidates(nodes, pod.gpu_milli)
            dev = c.dev_free[cand].copy()
            dev[np.arange(len(cand)), devices] -= pod.gpu_milli
            after = index.after_share(cand, devices, pod.cpu, pod.gpu_milli)
            k = self.ties.best(cand, self._score(cand, after, pod.cpu, dev))
            return int(cand[k]), (int(devices[k]),)
        if pod.num_gpu:
            dev = c.dev_free[nodes].copy()
            free = dev == WHOLE  # any free devices taken leave the same free values
            dev[free & (np.cumsum(free, axis=1) <= pod.num_gpu)] = 0
            score = self._score(nodes, index.after_whole(nodes, pod.cpu, pod.num_gpu), pod.cpu, dev)
        else:
            score = self._score(nodes, index.after_cpu_only(nodes, pod.cpu), pod.cpu, None)
        i = int(nodes[self.ties.best(nodes, score)])
        return i, c.first_fit_devices(pod, i)

    def placed(self, i: int) -> None:
        self.index.refresh(np.array([i]))
        at = np.array([i])
        self.go_before[i] = self.go.frag(self.c.cpu_free[at], self.c.dev_free[at], self.c.model_id[at])[0]


def fgd_chooser(cluster: Cluster, dist: TaskDistribution, tie_rank: TieRank = None, fuller: bool = False) -> FgdChooser:
    """FGD's node choice on ``cluster`` (its ``choose(workload, j, feasible nodes)``, then
    ``placed(node)`` after each placement); ``fuller``: equal scores go to the fuller node first
    (``_Ties``), then by ``tie_rank``."""
    return FgdChooser(cluster, 0, dist, tie_rank, "fuller" if fuller else "name")


def place_one_at_a_time(policy: str, cluster: Cluster, pods: Sequence[PodSpec], dist: TaskDistribution,
                        seed: int = 0, tie_rank: TieRank = None) -> list[tuple[int, Placed]]:
    """Places ``pods`` in order on ``cluster`` (mutated); returns (pod index, placement) pairs.
    ``tie_rank`` orders the nodes for best-fit's and fgd's ties (default: by name)."""
    chooser: _Default | _BestFit | FgdChooser
    if policy == "default-scheduler":
        chooser = _Default(cluster, seed)
    elif policy == "best-fit":
        chooser = _BestFit(cluster, seed, tie_rank)
    elif policy == "fgd":
        chooser = FgdChooser(cluster, seed, dist, tie_rank)
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
        if isinstance(chooser, FgdChooser):
            chooser.placed(i)
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
