"""A first answer with preemption, the kube-scheduler's way: one preemptor at a time.

From a placement without evictions (the plan without preemption), the pending pods left out are
taken in queue order (priority, then creation), a gang as one unit (all its left-out members, or
none of them). For each pod, every eligible node is tried: all the victims it may evict there
are removed, the pod must then fit (capacity, host ports, the level rule of
``models.preempt_rows``), and victims are given back one by one, those whose eviction would
break a PodDisruptionBudget first, the most important first (``SelectVictimsOnNode``'s
reprieve). The node whose victims are best by the stated order (highest priority, budget
violations, weighted count) wins. The answer is the exact stages' starting incumbent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kubeplace.kube.gangs import gang_of
from kubeplace.models.gpu import WHOLE
from kubeplace.models.preempt_problem import PreemptionProblem
from kubeplace.models.preempt_rows import victim_values
from kubeplace.models.preemption import NO_POWER
from kubeplace.models.problem import Assignment, IntArray


@dataclass
class _State:
    pp: PreemptionProblem
    y: IntArray  # (K, N)
    share_devices: IntArray  # (N,) wholly free devices opened by pods sharing a GPU

    def load(self, i: int) -> IntArray:
        p = self.pp.problem
        return np.asarray(p.demand.T @ self.y[:, i], dtype=np.int64)

    def ok(self, i: int) -> bool:
        """Node i's capacity, host-port, device and level rows hold."""
        pp, p = self.pp, self.pp.problem
        col = self.y[:, i]
        load = p.demand.T @ col
        if not ((load <= p.free[i]) | (load <= 0)).all():
            return False
        if any(int(col[list(cap.classes)].sum()) > int(cap.cap[i]) for cap in p.group_caps if cap.classes):
            return False
        if p.has_devices:
            whole = (p.gpu_milli >= WHOLE) & (p.gpu_count > 0)
            if int((col[whole] * p.gpu_count[whole]).sum()) + int(self.share_devices[i]) > int(
                    (p.device_free[i] >= WHOLE).sum()):
                return False
        n = pp.n_pending
        here = np.nonzero(pp.victim_node == i)[0]
        if len(here) == 0:
            return True
        placed = np.nonzero(col[:n] > 0)[0]
        for t in np.unique(pp.power[placed]).tolist():
            new = placed[pp.power[placed] >= t]
            above = pp.victim_priority[here] >= t
            total = p.demand[new].T @ col[new]
            total = total + p.demand[n + here[above]].T @ pp.victim_count[here[above]]
            total = total + p.demand[n + here[~above]].T @ col[n + here[~above]]
            if not ((total <= p.free[i]) | (total <= 0)).all():
                return False
        return True


def greedy_preemption(pp: PreemptionProblem, start: Assignment) -> Assignment:
    """``start``: pending placements without evictions (victims are added, all kept)."""
    p = pp.problem
    y = start.dense(p.n_classes, p.n_nodes)
    y[pp.n_pending + np.arange(pp.n_victims), pp.victim_node] = pp.victim_count
    opened = np.zeros(p.n_nodes, dtype=np.int64)
    d = start.devices
    for i, dev in {(int(i), int(dv)) for c, i, dv in zip(d.cls.tolist(), d.node.tolist(), d.device.tolist(),
                                                        strict=True) if p.gpu_milli[c] < WHOLE}:
        opened[i] += int(p.device_free[i, dev] >= WHOLE)
    state = _State(pp, y, opened)
    for unit in _left_out_units(pp, y):
        saved = state.y.copy()
        for c in unit:
            if not _place(state, c):
                state.y = saved
                break
    return Assignment.from_dense(state.y)


def _left_out_units(pp: PreemptionProblem, y: IntArray) -> list[list[int]]:
    """Classes of the pods left out (one entry per pod), grouped by gang, in queue order."""
    p = pp.problem
    placed = y[: pp.n_pending].sum(axis=1)
    units: dict[object, list[tuple[int, int]]] = {}
    for c in range(pp.n_pending):
        if pp.power[c] == NO_POWER:
            continue
        for m in p.members[c][int(placed[c]):]:
            pod = pp.pods[m]
            rank = int(p.queue_rank[m]) if len(p.queue_rank) > m else m
            units.setdefault(gang_of(pod) or pod.key, []).append((rank, c))
    ordered = sorted(units.values(), key=lambda members: min(r for r, _ in members))
    return [[c for _, c in sorted(members, key=lambda rc: -int(p.demand[rc[1]].sum()))] for members in ordered]


def _place(state: _State, c: int) -> bool:
    """Places one pod of class c where its victims are best; False when no node takes it."""
    pp, p = state.pp, state.pp.problem
    best: tuple[tuple[int, int, int, int], IntArray] | None = None
    for i in np.nonzero(p.eligible[c])[0].tolist():
        state.y[c, i] += 1
        trial = _victims_on(state, c, i)
        state.y[c, i] -= 1
        if trial is None:
            continue
        score = (*_score(pp, trial), i)
        if best is None or score < best[0]:
            best = (score, trial)
    if best is None:
        return False
    state.y = best[1]
    return True


def _victims_on(state: _State, c: int, i: int) -> IntArray | None:
    """With one more pod of c on node i: the placement after evicting what it needs there
    (fewest and least important, reprieved one by one), or None when it cannot fit."""
    pp = state.pp
    n = pp.n_pending
    if state.ok(i):
        return state.y.copy()
    here = np.nonzero((pp.victim_node == i) & (pp.victim_priority < pp.power[c]))[0]
    units = sorted({(int(pp.victim_unit[v]), v if pp.victim_unit[v] < 0 else -1) for v in here.tolist()
                    if state.y[n + v, i] > 0})
    if not units:
        return None
    saved = state.y.copy()
    members = [_unit_classes(pp, u, v) for u, v in units]
    for classes in members:
        state.y[n + classes, pp.victim_node[classes]] = 0
    if not state.ok(i):
        state.y = saved
        return None
    order = sorted(range(len(members)), key=lambda k: (-int(_protected(pp, members[k])),
                                                       -int(pp.victim_priority[members[k]].max())))
    for k in order:  # reprieve: give back what is not needed
        for v in members[k].tolist():
            state.y[n + v, pp.victim_node[v]] = saved[n + v, pp.victim_node[v]]
        while not state.ok(i) and pp.victim_unit[members[k][0]] < 0 and state.y[n + members[k][0], i] > 0:
            state.y[n + members[k][0], i] -= 1  # a lone-pod class gives back as many pods as fit
        if not state.ok(i):
            state.y[n + members[k], pp.victim_node[members[k]]] = 0
    out = state.y.copy()
    state.y = saved
    return out


def _unit_classes(pp: PreemptionProblem, unit: int, v: int) -> IntArray:
    if unit < 0:
        return np.array([v], dtype=np.int64)
    return np.nonzero(pp.victim_unit == unit)[0].astype(np.int64)


def _protected(pp: PreemptionProblem, classes: IntArray) -> bool:
    return any(pp.victim_budgets[v] for v in classes.tolist())


def _score(pp: PreemptionProblem, y: IntArray) -> tuple[int, int, int]:
    return victim_values(pp, Assignment.from_dense(y)).key
