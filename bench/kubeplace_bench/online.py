"""kubeplace online on FGD's protocol (``bench fgd-protocol --scheduler kubeplace``): windows of
arrivals, each placed twice from the same cluster state, the better placement kept.

The arrivals come in windows of ``window`` pods (the last one shorter). Each window is placed
pod by pod in arrival order with FGD's node score (``kubeplace.simulate.policies.fgd``: the authors'
fragmentation against the trace's typical pods, integer scores) twice:

- equal scores of a GPU pod broken by the seeded node order, as FGD's simulator breaks them
  (FGD's own choice), and
- equal scores to the node with the least free GPU milli first, then that order.

In both, a CPU-only pod's equal scores go to the node with the least free GPU milli (FGD's score
ties for a CPU-only pod wherever it leaves every typical pod's cpu). The earlier "fuller" ties
(best-fit's leftover, which counts cpu, so the 32-core 4-GPU nodes looked fullest) spent those
nodes' cpu and left their GPUs idle: 25 whole GPUs against FGD's 3 at the end of cpu100 seed 44
(-0.44 points), 24 against 8 on gpushare100 seed 42.

The window keeps the placement that allocates more GPU milli, and on a tie the one that leaves
the cluster less fragmented (FGD's measure summed over nodes); the other is undone. So each pod is
decided once, when its window has arrived; none is moved later; a pod that fits somewhere when
its turn in the window comes is placed (both candidates place every pod they can), and one that
does not stays pending, as in FGD's protocol.

What the window knows that FGD's one-pod view does not: how each choice of ties plays out over
the next ``window`` arrivals. Measured (docs/scaling-and-benchmarks.md, "FGD's own protocol"):
see there. The FGD score is the product's (``simulate.policies``); the window choice and its
ties (``WindowTies``) are still the benchmark's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubeplace.simulate.policies.fgd import Fgd
from kubeplace.simulate.policies.fgd_steered import fewest_free_gpus
from kubeplace.simulate.policies.node_view import TieOrder
from kubeplace.simulate.policies.typical import TaskDistribution
from kubeplace_bench.baselines import TieRank
from kubeplace_bench.gpusim import Cluster, IntArray, PodSpec, Workload

_State = tuple[np.ndarray[Any, Any], ...]
TIES = ("name", "fuller")
"""The two ways of breaking FGD's equal scores a window tries, in this order."""


class WindowTies(TieOrder):
    """FGD's tie order (``mode`` "name"), or (``mode`` "fuller") the node with the least free GPU
    milli first, then the order. A CPU-only pod (``cpu_only``, set by the caller before each
    choice) breaks its ties that way in both modes, as ``simulate.policies.fgd_steered`` does: its
    cpu goes where it strands the fewest GPUs. So the "name" placement is fgd-steered's. With
    ``watch``, notes in ``fuller_differs`` when the fuller node would have won a tie of a GPU pod
    the order broke."""

    def __init__(self, cluster: Cluster, rank: Sequence[int]) -> None:
        super().__init__(rank)
        self.cluster = cluster
        self.mode = TIES[0]
        self.watch = False
        self.fuller_differs = False
        self.cpu_only = False

    def best(self, nodes: IntArray, score: IntArray) -> int:
        tied = np.flatnonzero(score == score.max())
        if len(tied) == 1:
            return int(tied[0])
        fuller = fewest_free_gpus(self.cluster, self.rank, nodes, tied)
        if self.cpu_only or self.mode == "fuller":
            return fuller
        by_rank = int(tied[np.argmin(self.rank[nodes[tied]])])
        if self.watch:
            self.fuller_differs |= fuller != by_rank
        return by_rank


@dataclass(frozen=True)
class OnlineResult:
    placed: list[int]  # indices of the pods placed, in arrival order
    windows_won: dict[str, int]  # per way of breaking ties, the windows whose placement was kept


@dataclass
class _Placer:
    cluster: Cluster
    fgd: Fgd
    ties: WindowTies


def place_in_windows(cluster: Cluster, pods: Sequence[PodSpec], dist: TaskDistribution, window: int,
                     tie_rank: TieRank = None) -> OnlineResult:
    """Places ``pods`` on ``cluster`` (mutated) in windows of ``window`` arrivals (see the module
    docstring); ``tie_rank``: the seeded node order (default: by name).

    The two placements of a window agree up to the first pod whose equal scores the fuller node
    would break otherwise: the second starts there (and is not made when no pod is such)."""
    if window < 1:
        raise ValueError("window must be at least 1")
    rank = TieOrder.by_name([n.name for n in cluster.nodes]).rank if tie_rank is None else tie_rank
    if len(rank) != len(cluster.nodes):
        raise ValueError("tie_rank must be a permutation of the node positions")
    ties = WindowTies(cluster, [int(r) for r in rank])
    placer = _Placer(cluster, Fgd(cluster, dist, ties), ties)
    w = cluster.workload(pods)
    placed: list[int] = []
    won = dict.fromkeys(TIES, 0)
    for start in range(0, len(w), window):
        arrivals = range(start, min(start + window, len(w)))
        ties.mode = TIES[0]
        got, fork = _place(placer, w, arrivals, watch=True)
        if fork is None:
            won[TIES[0]] += 1
            placed += got
            continue
        j, before = fork
        first = (_key(placer, w, got), got, _save(placer))
        _load(placer, before)
        ties.mode = TIES[1]
        second_got = [k for k in got if k < j] + _place(placer, w, range(j, arrivals.stop), watch=False)[0]
        if first[0] <= _key(placer, w, second_got):  # FGD's own ties on equal outcomes
            _load(placer, first[2])
            won[TIES[0]] += 1
            placed += got
        else:
            won[TIES[1]] += 1
            placed += second_got
    return OnlineResult(placed, won)


def _key(placer: _Placer, w: Workload, got: list[int]) -> tuple[int, int]:
    """Smaller is better: more GPU milli placed, then less fragmentation left in the cluster."""
    return -sum(int(w.pods[j].gpu_total) for j in got), int(placer.fgd.index.scaled.sum())


def _place(placer: _Placer, w: Workload, arrivals: range, watch: bool
           ) -> tuple[list[int], tuple[int, _State] | None]:
    """The pods of ``arrivals`` that fit, placed one at a time; with ``watch``, also the first pod
    whose equal scores the fuller node would break otherwise, and the state before it."""
    cluster, ties, got = placer.cluster, placer.ties, []
    fork: tuple[int, _State] | None = None
    ties.watch = watch
    for j in arrivals:
        nodes = np.flatnonzero(cluster.feasible(w, j))
        if not len(nodes):
            continue
        ties.fuller_differs = False
        ties.cpu_only = int(w.num[j]) == 0
        i, devices = placer.fgd.choose(w.pods[j], nodes)
        if ties.fuller_differs and fork is None:
            fork = (j, _save(placer))
            ties.watch = False
        reason = cluster.place(w.pods[j], i, devices)
        if reason is not None:  # FGD only ever picks feasible placements
            raise AssertionError(f"kubeplace chose an invalid placement for {w.names[j]}: {reason}")
        placer.fgd.refresh(np.array([i]))
        got.append(j)
    ties.watch = False
    return got, fork


def _arrays(placer: _Placer) -> list[np.ndarray[Any, Any]]:
    """Every array the cluster and FGD's fragmentation index change when a pod is placed."""
    c, x = placer.cluster, placer.fgd.index
    return [c.cpu_free, c.mem_free, c.dev_free, c.max_free, c.whole_free, x.count, x.usable, x.scaled, x.total,
            x.distinct, placer.fgd.go_before]


def _save(placer: _Placer) -> _State:
    return tuple(a.copy() for a in _arrays(placer))


def _load(placer: _Placer, state: _State) -> None:
    for target, saved in zip(_arrays(placer), state, strict=True):
        target[...] = saved
