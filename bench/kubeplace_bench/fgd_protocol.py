"""The FGD paper's protocol, draw for draw: ``kubeplace bench fgd-protocol``.

Weng et al. (USENIX ATC 2023) publish, per openb pod list, policy and tag seed 42-51, the GPU
allocation when 130% of the GPU capacity has arrived (``analysis_allo_discrete.csv``, column 130).
Their simulator (hkust-adsl/kubernetes-scheduler-simulator) produces it as follows, and so does
:func:`protocol_run`, with Go's own draws (``bench.gorand``):

1. ``rand.Seed(seed)``, then one ``rand.Int()`` (a debug line prints it);
2. the original pods sorted by name, ``rand.Shuffle``'d;
3. tuned to 130% of the GPU capacity: while the pods ask for less, ``rand.Intn(n)`` picks one of
   the n original pods (sorted by name) and appends a copy ``<name>-tuned-<i>``, stopping at the
   first pick whose per-device milli would pass the target (the simulator compares the pick's
   per-device milli but adds its total); while they ask for more, ``rand.Intn(len)`` drops one;
4. the scheduler starts: each of its informers' reflectors draws one ``rand.Float64()`` from the
   same global source for its watch timeout (client-go ``reflector.go``), ``INFORMER_DRAWS`` of them
   before the nodes are created. The count is the published figures': on default seed 42, 0-9 and
   11-15 give other figures, and with 10 all 280 runs tried (14 lists x 10 seeds, FGD and best-fit)
   equal theirs. (The draws come from goroutines, so a run of the simulator could in principle
   interleave them otherwise; the published runs did not.);
5. the nodes sorted by name and renamed ``"%04d-" + name`` with the prefixes of ``rand.Perm``;
   its kube-scheduler takes the smallest name among equal scores, so a node's prefix is its
   tie-break rank;
6. every pod tried once, in that order, no departures (``bench.baselines``, with that rank);
7. after each pod a row (GPU milli arrived so far, failed pods included; GPU milli allocated), and
   the figure as ``merge_alloc_discrete.py`` computes it: the mean of ``round(used / total, 2)``
   (percent) over the rows whose ``round(arrived / total, 0)`` is 130 (within 129-131 when none).

FGD's typical pods are the original list's most popular (cpu, gpu milli, gpu count, GPU models as
written) shapes covering 95% of it (``kubeplace.simulate.policies.typical.task_distribution``).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kubeplace.simulate.policies.typical import TaskDistribution, task_distribution
from kubeplace_bench.baselines import place_one_at_a_time
from kubeplace_bench.gorand import GoRand
from kubeplace_bench.gpusim import WHOLE, Cluster, NodeSpec, PodSpec

TUNE = 1.3
ARRIVED_PERCENT = 130
INFORMER_DRAWS = 10


@dataclass(frozen=True)
class ProtocolRun:
    """One (pod list, seed): the pods in scheduling order and each node's tie-break rank."""

    pods: tuple[PodSpec, ...]
    tie_rank: tuple[int, ...]  # per node, in the order of the node list given


def _copy(p: PodSpec, name: str) -> PodSpec:
    return PodSpec(name, p.cpu, p.mem, p.num_gpu, p.gpu_milli, p.models, p.creation, p.qos, p.phase)


def protocol_run(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], seed: int, tune: float = TUNE) -> ProtocolRun:
    """The simulator's pod sequence and node order for ``seed`` (see the module docstring)."""
    rng = GoRand(seed)
    rng.go_int()
    original = sorted(pods, key=lambda p: p.name.encode())
    order: list[object] = list(original)
    rng.shuffled(order)
    seq: list[PodSpec] = [p for p in order if isinstance(p, PodSpec)]
    total = sum(p.gpu_total for p in seq)
    target = tune * WHOLE * sum(n.gpus for n in nodes)
    if tune > 0 and total < target:
        i = 0
        while True:
            pick = original[rng.intn(len(original))]
            if total + pick.gpu_milli > target:
                break
            total += pick.gpu_total
            seq.append(_copy(pick, f"{pick.name}-tuned-{i}"))
            i += 1
    elif tune > 0:
        while total > target:
            if not seq:
                raise ValueError("no pods left while tuning down")
            total -= seq.pop(rng.intn(len(seq))).gpu_total
    for _ in range(INFORMER_DRAWS):
        rng.float64()
    by_name = sorted(range(len(nodes)), key=lambda k: nodes[k].name.encode())
    prefix = rng.perm(len(nodes))
    rank = [0] * len(nodes)
    for position, k in enumerate(by_name):
        rank[k] = prefix[position]
    return ProtocolRun(tuple(seq), tuple(rank))


def alloc_at(arrived: Sequence[int], used: Sequence[int], total_gpus: int, percent: int = ARRIVED_PERCENT) -> float:
    """``merge_alloc_discrete.py``'s figure from the per-pod rows (milli arrived, milli used)."""
    arrive = [round(a / total_gpus / 10, 0) for a in arrived]
    alloc = [round(u / total_gpus / 10, 2) for u in used]
    rows = [x for r, x in zip(arrive, alloc, strict=True) if r == percent]
    if not rows:
        rows = [x for r, x in zip(arrive, alloc, strict=True) if percent - 1 <= r <= percent + 1]
    if not rows:
        return float("nan")
    return float(np.round(np.mean(np.array(rows, dtype=np.float64)), 2))


def rows_of(pods: Sequence[PodSpec], placed: Sequence[int]) -> tuple[list[int], list[int]]:
    """Cumulative GPU milli arrived and allocated after each pod, ``placed`` the indices placed."""
    got = set(placed)
    arrived, used, a, u = [], [], 0, 0
    for j, p in enumerate(pods):
        a += p.gpu_total
        u += p.gpu_total if j in got else 0
        arrived.append(a)
        used.append(u)
    return arrived, used


def run_policy(policy: str, nodes: Sequence[NodeSpec], run: ProtocolRun, dist: TaskDistribution) -> float:
    """``policy`` (best-fit or fgd) on the run's sequence with the run's tie order: the figure."""
    cluster = Cluster.build(nodes)
    placed = [j for j, _ in place_one_at_a_time(policy, cluster, run.pods, dist, tie_rank=run.tie_rank)]
    return alloc_at(*rows_of(run.pods, placed), sum(n.gpus for n in nodes))


def typical_pods(pods: Sequence[PodSpec]) -> TaskDistribution:
    return task_distribution(pods)


def trace_name(path: Path) -> str:
    return path.stem


def read_published(path: Path) -> dict[tuple[str, str, int], float]:
    """(workload, policy, seed) -> published figure, from ``published_alloc_at_130.csv``."""
    out: dict[tuple[str, str, int], float] = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            if row.get("tune") not in ("1.3", None):
                continue
            out[(row["workload"], row["sc_policy"], int(row["seed"]))] = float(row["alloc_pct_at_130"])
    return out


PUBLISHED_POLICY = {"fgd": "06-FGD", "best-fit": "05-BestFit"}
