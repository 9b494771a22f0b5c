"""kubeplace online on FGD's protocol (``bench fgd-protocol --scheduler kubeplace``): windows of
arrivals, each placed twice from the same cluster state, the better placement kept.

The arrivals come in windows of ``window`` pods (the last one shorter). Each window is placed
pod by pod in arrival order with FGD's node score (``baselines.fgd_chooser``: the authors'
fragmentation against the trace's typical pods, integer scores) twice:

- equal scores broken by the seeded node order, as FGD's simulator breaks them (FGD's own
  choice), and
- equal scores to the fuller node first (best-fit's leftover), then that order.

The window keeps the placement that allocates more GPU milli, and on a tie the one that leaves
the cluster less fragmented (FGD's measure summed over nodes); the other is undone. So each pod is
decided once, when its window has arrived; none is moved later; a pod that fits somewhere when
its turn in the window comes is placed (both candidates place every pod they can), and one that
does not stays pending, as in FGD's protocol.

What the window knows that FGD's one-pod view does not: how each choice of ties plays out over
the next ``window`` arrivals. Measured (docs/scaling-and-benchmarks.md, "FGD's own protocol"):
never below FGD on the mean of a trace tried. The fragmentation score lives in the benchmark
(``bench.fragmentation``, ``bench.fgd_score``) until it moves into the product.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace_bench.baselines import FgdChooser, TieRank, fgd_chooser
from kubeplace_bench.fragmentation import TaskDistribution
from kubeplace_bench.gpusim import Cluster, IntArray, PodSpec, Workload

_State = tuple[IntArray, ...]
TIES = ("name", "fuller")
"""The two ways of breaking FGD's equal scores a window tries, in this order."""


@dataclass(frozen=True)
class OnlineResult:
    placed: list[int]  # indices of the pods placed, in arrival order
    windows_won: dict[str, int]  # per way of breaking ties, the windows whose placement was kept


def place_in_windows(cluster: Cluster, pods: Sequence[PodSpec], dist: TaskDistribution, window: int,
                     tie_rank: TieRank = None) -> OnlineResult:
    """Places ``pods`` on ``cluster`` (mutated) in windows of ``window`` arrivals (see the module
    docstring); ``tie_rank``: the seeded node order (default: by name).

    The two placements of a window agree up to the first pod whose equal scores the fuller node
    would break otherwise: the second starts there (and is not made when no pod is such)."""
    if window < 1:
        raise ValueError("window must be at least 1")
    chooser = fgd_chooser(cluster, dist, tie_rank)
    w = cluster.workload(pods)
    placed: list[int] = []
    won = dict.fromkeys(TIES, 0)
    for start in range(0, len(w), window):
        arrivals = range(start, min(start + window, len(w)))
        chooser.ties.mode = TIES[0]
        got, fork = _place(chooser, w, arrivals, watch=True)
        if fork is None:
            won[TIES[0]] += 1
            placed += got
            continue
        j, before = fork
        first = (_key(chooser, w, got), got, _save(chooser))
        _load(chooser, before)
        chooser.ties.mode = TIES[1]
        second_got = [k for k in got if k < j] + _place(chooser, w, range(j, arrivals.stop), watch=False)[0]
        if first[0] <= _key(chooser, w, second_got):  # FGD's own ties on equal outcomes
            _load(chooser, first[2])
            won[TIES[0]] += 1
            placed += got
        else:
            won[TIES[1]] += 1
            placed += second_got
    return OnlineResult(placed, won)


def _key(chooser: FgdChooser, w: Workload, got: list[int]) -> tuple[int, int]:
    """Smaller is better: more GPU milli placed, then less fragmentation left in the cluster."""
    return -sum(int(w.pods[j].gpu_total) for j in got), int(chooser.index.scaled.sum())


def _place(chooser: FgdChooser, w: Workload, arrivals: range, watch: bool
           ) -> tuple[list[int], tuple[int, _State] | None]:
    """The pods of ``arrivals`` that fit, placed one at a time; with ``watch``, also the first pod
    whose equal scores the fuller node would break otherwise, and the state before it."""
    cluster, got = chooser.c, []
    fork: tuple[int, _State] | None = None
    chooser.ties.watch = watch
    for j in arrivals:
        nodes = np.flatnonzero(cluster.feasible(w, j))
        if not len(nodes):
            continue
        chooser.ties.fuller_differs = False
        i, devices = chooser.choose(w, j, nodes)
        if chooser.ties.fuller_differs and fork is None:
            fork = (j, _save(chooser))
            chooser.ties.watch = False
        reason = cluster.place(w.pods[j], i, devices)
        if reason is not None:  # FGD only ever picks feasible placements
            raise AssertionError(f"kubeplace chose an invalid placement for {w.names[j]}: {reason}")
        chooser.placed(i)
        got.append(j)
    chooser.ties.watch = False
    return got, fork


def _arrays(chooser: FgdChooser) -> list[IntArray]:
    """Every array the cluster and the chooser's fragmentation index change when a pod is placed."""
    c, x = chooser.c, chooser.index
    return [c.cpu_free, c.mem_free, c.dev_free, c.max_free, c.whole_free, x.count, x.usable, x.scaled, x.total,
            x.distinct, chooser.go_before]


def _save(chooser: FgdChooser) -> _State:
    return tuple(a.copy() for a in _arrays(chooser))


def _load(chooser: FgdChooser, state: _State) -> None:
    for target, saved in zip(_arrays(chooser), state, strict=True):
        target[...] = saved
