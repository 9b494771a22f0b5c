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
from kubeplace.models.preempt_rows import values_of_evicted
from kubeplace.models.preemption import NO_POWER
from kubeplace.models.problem import Assignment, GroupCap, IntArray
from kubeplace.solver.budget import NO_DEADLINE, Budget

MAX_TRIES = 64
"""Nodes a preemptor's greedy choice tries at most (the kube-scheduler tries max(10% of the
nodes, 100)): the exact stages look at every node."""


@dataclass
class _State:
    pp: PreemptionProblem
    y: IntArray  # (K, N)
    share_devices: IntArray  # (N,) wholly free devices opened by pods sharing a GPU
    here: list[IntArray]  # per node: the victim classes there

    @property
    def evicted(self) -> IntArray:
        pp = self.pp
        return pp.victim_count - self.y[pp.n_pending + np.arange(pp.n_victims), pp.victim_node]

    def ok(self, i: int) -> bool:
        """Node i's capacity, host-port, device and level rows hold."""
        pp, p = self.pp, self.pp.problem
        col = self.y[:, i]
        nz = np.nonzero(col)[0]
        load = p.demand[nz].T @ col[nz]
        if not ((load <= p.free[i]) | (load <= 0)).all():
            return False
        if any(self._over(cap, i) for cap in p.group_caps if cap.classes):
            return False
        if p.has_devices:
            whole = nz[(p.gpu_milli[nz] >= WHOLE) & (p.gpu_count[nz] > 0)]
            if int((col[whole] * p.gpu_count[whole]).sum()) + int(self.share_devices[i]) > int(
                    (p.device_free[i] >= WHOLE).sum()):
                return False
        n = pp.n_pending
        here = self.here[i]
        if len(here) == 0:
            return True
        placed = nz[nz < n]
        for t in np.unique(pp.power[placed]).tolist():
            new = placed[pp.power[placed] >= t]
            above = pp.victim_priority[here] >= t
            total = p.demand[new].T @ col[new]
            total = total + p.demand[n + here[above]].T @ pp.victim_count[here[above]]
            total = total + p.demand[n + here[~above]].T @ col[n + here[~above]]
            if not ((total <= p.free[i]) | (total <= 0)).all():
                return False
        return True

    def _over(self, cap: GroupCap, i: int) -> bool:
        """Whether node i's pods of ``cap``, or with a domain those of node i's domain, exceed it."""
        classes = np.asarray(cap.classes, dtype=np.int64)
        if cap.domain is None:
            return int(self.y[classes, i].sum()) > int(cap.cap[i])
        d = int(cap.domain[i])
        return d >= 0 and int(self.y[np.ix_(classes, np.nonzero(cap.domain == d)[0])].sum()) > int(cap.cap[d])


Edits = list[tuple[int, int, int]]
"""(row, node, old value) of the entries of ``y`` a trial changed, to undo it."""


def greedy_preemption(pp: PreemptionProblem, start: Assignment, budget: Budget = NO_DEADLINE) -> Assignment:
    """``start``: pending placements without evictions (victims are added, all kept); units left
    out are tried until ``budget`` is spent."""
    p = pp.problem
    y = start.dense(p.n_classes, p.n_nodes)
    y[pp.n_pending + np.arange(pp.n_victims), pp.victim_node] = pp.victim_count
    opened = np.zeros(p.n_nodes, dtype=np.int64)
    d = start.devices
    for i, dev in {(int(i), int(dv)) for c, i, dv in zip(d.cls.tolist(), d.node.tolist(), d.device.tolist(),
                                                        strict=True) if p.gpu_milli[c] < WHOLE}:
        opened[i] += int(p.device_free[i, dev] >= WHOLE)
    here = [np.nonzero(pp.victim_node == i)[0] for i in range(p.n_nodes)]
    state = _State(pp, y, opened, here)
    for unit in _left_out_units(pp, y):
        if budget.expired():
            break
        undo: Edits = []
        for c in unit:
            done = _place(state, c)
            if done is None:
                _undo(state, undo)
                break
            undo += done
    return Assignment.from_dense(state.y)


def _undo(state: _State, edits: Edits) -> None:
    for row, i, old in reversed(edits):
        state.y[row, i] = old


def _set(state: _State, edits: Edits, row: int, i: int, value: int) -> None:
    edits.append((row, i, int(state.y[row, i])))
    state.y[row, i] = value
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


def _place(state: _State, c: int) -> Edits | None:
    """Places one pod of class c where its victims are best; the edits made, or None when no
    node takes it."""
    pp = state.pp
    base = state.evicted
    for nodes in _candidate_nodes(state, c):
        best: tuple[tuple[int, int, int, int], int] | None = None
        for i in nodes.tolist():
            trial = _victims_on(state, c, i)
            if trial is None:
                continue
            evicted = base.copy()
            for row, node, old in trial:
                if row >= pp.n_pending:
                    evicted[row - pp.n_pending] += old - int(state.y[row, node])
            _undo(state, trial)
            score = (*values_of_evicted(pp, evicted).key, i)
            if best is None or score < best[0]:
                best = (score, i)
        if best is not None:
            done = _victims_on(state, c, best[1])
            assert done is not None
            return done
    return None


def _candidate_nodes(state: _State, c: int) -> list[IntArray]:
    """Nodes to try, in two rounds: the eligible nodes where the pod fits as things are, then
    those where it could fit with every pod it may evict gone (a necessary condition, cheap for
    all nodes at once), at most MAX_TRIES of them, those whose evictable pods have the lowest
    priority first."""
    pp, p = state.pp, state.pp.problem
    load = p.demand.T.astype(np.float64) @ state.y.astype(np.float64)  # (R, N), floats: sums never wrap
    v = np.arange(pp.n_victims)
    kept = state.y[pp.n_pending + v, pp.victim_node].astype(np.float64)
    evictable = np.where(pp.victim_priority < pp.power[c], kept, 0.0)
    freeable = np.zeros_like(load)
    np.add.at(freeable.T, pp.victim_node, (p.demand[pp.n_pending + v].T * evictable).T)
    need = p.demand[c].astype(np.float64)[:, None]
    eligible = p.eligible[c]
    now = eligible & ((p.free.T - load >= need) | (need <= 0)).all(axis=0)
    later = eligible & ~now & ((p.free.T - load + freeable >= need) | (need <= 0)).all(axis=0)
    highest = np.full(p.n_nodes, np.iinfo(np.int64).min, dtype=np.int64)  # per node, of its evictable pods
    np.maximum.at(highest, pp.victim_node[evictable > 0], pp.victim_priority[evictable > 0])
    order = np.lexsort((np.arange(p.n_nodes), highest))
    later_nodes = order[later[order]][:MAX_TRIES]
    return [np.nonzero(now)[0][:MAX_TRIES], np.sort(later_nodes)]


def _victims_on(state: _State, c: int, i: int) -> Edits | None:
    """One more pod of c on node i, with what it needs evicted there (fewest and least important,
    reprieved one by one): the edits made (applied), or None (nothing changed) when it cannot fit."""
    pp = state.pp
    n = pp.n_pending
    edits: Edits = []
    _set(state, edits, c, i, int(state.y[c, i]) + 1)
    if state.ok(i):
        return edits
    here = state.here[i]
    here = here[(pp.victim_priority[here] < pp.power[c]) & (state.y[n + here, i] > 0)]
    units = sorted({(int(pp.victim_unit[v]), v if pp.victim_unit[v] < 0 else -1) for v in here.tolist()})
    if not units:
        _undo(state, edits)
        return None
    members = [_unit_classes(pp, u, v) for u, v in units]
    kept = {int(v): int(state.y[n + v, pp.victim_node[v]]) for classes in members for v in classes}
    for classes in members:
        for v in classes.tolist():
            _set(state, edits, n + v, int(pp.victim_node[v]), 0)
    if not state.ok(i):
        _undo(state, edits)
        return None
    order = sorted(range(len(members)), key=lambda k: (-int(_protected(pp, members[k])),
                                                       -int(pp.victim_priority[members[k]].max())))
    for k in order:  # reprieve: give back what is not needed
        classes = members[k]
        for v in classes.tolist():
            state.y[n + v, pp.victim_node[v]] = kept[v]
        lone = pp.victim_unit[classes[0]] < 0
        while not state.ok(i) and lone and state.y[n + classes[0], i] > 0:
            state.y[n + classes[0], i] -= 1  # a lone-pod class gives back as many pods as fit
        if not state.ok(i):
            for v in classes.tolist():
                state.y[n + v, pp.victim_node[v]] = 0
    return edits


def _unit_classes(pp: PreemptionProblem, unit: int, v: int) -> IntArray:
    if unit < 0:
        return np.array([v], dtype=np.int64)
    return np.nonzero(pp.victim_unit == unit)[0].astype(np.int64)


def _protected(pp: PreemptionProblem, classes: IntArray) -> bool:
    return any(pp.victim_budgets[v] for v in classes.tolist())
