"""Baselines users know, on the same layout (same movable pods, same filters, same capacity).

``low_node_utilization``: the descheduler's LowNodeUtilization (kubernetes-sigs/descheduler,
``descheduler/v1alpha2``). Nodes are under-utilised when every resource (cpu, memory, pods) is
below ``thresholds`` and over-utilised when any is above ``target_thresholds`` (percent of
allocatable; with ``deviation`` they are distances from the cluster's mean, as
``useDeviationThresholds``). From the most utilised over-utilised node down, pods are evicted
(lowest priority first) while the node stays over its target and the under-utilised nodes still
have room below their target, and only pods that fit on some other node (NodeFit). The
evicted pods are then placed one at a time, in priority order, by the default scheduler's
LeastAllocated score (mean over cpu and memory of the free share after placing), possibly back
on the node they left: every eviction counts as a move.

``evict_from_emptiest``: for a pending GPU job, greedy defragmentation: take the eligible node
with the most free GPUs, evict its pods (largest GPU request first) re-placing each by
LeastAllocated on other nodes, until a member fits; repeat for every member of a gang.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kubeplace.models.problem import IntArray, fits
from kubeplace.rebalance.layout import Layout
from kubeplace.rebalance.model import Budgets


@dataclass(frozen=True)
class LowNodeUtilization:
    thresholds: tuple[float | None, ...] = (20.0, 20.0, 20.0)
    """cpu, memory, pods (percent); None leaves a resource out, as a policy that does not name it."""
    target_thresholds: tuple[float | None, ...] = (50.0, 50.0, 50.0)
    deviation: bool = False
    max_per_node: int | None = None
    max_total: int | None = None


def _columns(layout: Layout) -> list[int]:
    p = layout.problem
    return [r for r in (p.resource_index("cpu"), p.resource_index("memory"), p.resource_index("pods"))
            if r is not None]


def least_allocated(layout: Layout, c: int, room: IntArray, exclude: set[int] = frozenset()) -> int | None:  # type: ignore[assignment]
    """The node the default scheduler's LeastAllocated score prefers for one pod of class c."""
    p = layout.problem
    ok = layout.eligible[c] & fits(room, layout.demand[c])
    for i in exclude:
        ok[i] = False
    if not ok.any():
        return None
    rs = [r for r in (p.resource_index("cpu"), p.resource_index("memory")) if r is not None]
    free_after = (room[:, rs] - layout.demand[c, rs]) / np.maximum(p.capacity[:, rs], 1)
    score = np.where(ok, free_after.mean(axis=1), -np.inf)
    return int(np.argmax(score))


def low_node_utilization(layout: Layout, policy: LowNodeUtilization = LowNodeUtilization()) -> tuple[IntArray, int]:
    """(placement after the descheduler and the re-placement, number of evictions)."""
    p = layout.problem
    named = [k for k, t in enumerate(policy.thresholds) if t is not None]
    cols = [_columns(layout)[k] for k in named]
    y = layout.x0.copy()
    load = layout.load(y)[:, cols].astype(np.float64)
    cap = np.maximum(p.capacity[:, cols], 1).astype(np.float64)
    util = 100 * load / cap
    low = np.array([policy.thresholds[k] for k in named], dtype=np.float64)
    high = np.array([policy.target_thresholds[k] for k in named], dtype=np.float64)
    if policy.deviation:
        mean = util.mean(axis=0)
        low, high = mean - low, mean + high
    under = (util < low).all(axis=1)
    over = (util > high).any(axis=1)
    if not under.any() or not over.any():
        return y, 0
    headroom = ((high * cap[under] / 100) - load[under]).clip(min=0).sum(axis=0)
    room = layout.room(y)
    evicted: list[int] = []
    budget = Budgets(policy.max_total, policy.max_per_node)
    for i in sorted(np.nonzero(over)[0], key=lambda n: -util[n].max()):
        on_node = [(c, k) for c in np.nonzero(y[:, i])[0] for k in range(int(y[c, i]))]
        on_node.sort(key=lambda ck: (layout.pods[_first(layout, int(ck[0]))].priority, -layout.demand[ck[0], cols[0]]))
        taken = 0
        for c, _ in on_node:
            if not (load[i] > high * cap[i] / 100).any() or (headroom <= 0).any():
                break
            if budget.per_node is not None and taken >= budget.per_node:
                break
            if budget.max_moves is not None and len(evicted) >= budget.max_moves:
                break
            if least_allocated(layout, int(c), room, {int(i)}) is None:
                continue  # NodeFit: it would not fit anywhere else
            y[c, i] -= 1
            room[i] += layout.demand[c]
            load[i] -= layout.demand[c, cols]
            headroom -= layout.demand[c, cols]
            evicted.append(int(c))
            taken += 1
    for back in sorted(evicted, key=lambda k: -layout.pods[_first(layout, k)].priority):
        target = least_allocated(layout, back, room)
        # nowhere to go: it stays pending; counted back where it was for the objective
        to = int(np.nonzero(layout.x0[back])[0][0]) if target is None else target
        y[back, to] += 1
        room[to] -= layout.demand[back]
    return y, len(evicted)


def _first(layout: Layout, c: int) -> int:
    return int(np.nonzero(layout.pod_class == c)[0][0])


def evict_from_emptiest(layout: Layout) -> int | None:
    """Moves the greedy defragmentation needs before every target pod fits, or None."""
    p = layout.problem
    y = layout.x0.copy()
    room = layout.room(y)
    g = p.resource_index(p.gpu.device_resource)
    moves = 0
    used_nodes: set[int] = set()
    for k in layout.target_agg_classes:
        for _ in range(int(layout.target_count[k])):
            order = sorted((i for i in range(p.n_nodes) if p.eligible[k, i] and i not in used_nodes),
                           key=lambda i: -(room[i, g] if g is not None else room[i].sum()))
            placed = False
            for i in order:
                trial_y, trial_room, trial_moves = y.copy(), room.copy(), 0
                pods_here = sorted(np.nonzero(trial_y[:, i])[0],
                                   key=lambda c: -(layout.demand[c, g] if g is not None else 0))
                queue = [int(c) for c in pods_here for _ in range(int(trial_y[c, i]))]
                while not fits(trial_room[i], p.demand[k]) and queue:
                    c = int(queue.pop(0))
                    j = least_allocated(layout, c, trial_room, {i, *used_nodes})
                    if j is None:
                        continue
                    trial_y[c, i] -= 1
                    trial_y[c, j] += 1
                    trial_room[i] += layout.demand[c]
                    trial_room[j] -= layout.demand[c]
                    trial_moves += 1
                if fits(trial_room[i], p.demand[k]):
                    y, room = trial_y, trial_room
                    room[i] -= p.demand[k]
                    moves += trial_moves
                    used_nodes.add(i)
                    placed = True
                    break
            if not placed:
                return None
    return moves
