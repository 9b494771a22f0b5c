"""Independent sub-problems: classes and nodes that no constraint connects.

Two classes are connected when some node is eligible for both, or when a group rule
(host ports, gang, the inter-pod rules: carriers with the pods their terms match) names
both. Each connected set of classes with the nodes they may
use is a sub-problem of its own; solving them separately keeps every model small and
lets small ones be solved whole. Only objectives that add up over nodes separate this
way (the balance term's mean is the whole cluster's, so it does not).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kubeplace.models.problem import Assignment, DeviceUse, IntArray, Problem
from kubeplace.models.renumber import renumbered_rules, rule_classes


class _Sets:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def components(problem: Problem) -> list[tuple[IntArray, IntArray]]:
    """(classes, nodes) of each independent part, largest first; nodes no class may use
    belong to none."""
    sets = _Sets(problem.n_classes)
    columns = np.unique(problem.eligible.T, axis=0) if problem.n_nodes else np.zeros((0, problem.n_classes))
    for column in columns:
        members = np.nonzero(column)[0]
        for c in members[1:]:
            sets.union(int(members[0]), int(c))
    for group in rule_classes(problem):
        for c in group[1:]:
            sets.union(group[0], c)
    roots = np.array([sets.find(c) for c in range(problem.n_classes)], dtype=np.int64)
    parts = []
    for root in np.unique(roots):
        classes = np.nonzero(roots == root)[0]
        nodes = np.nonzero(problem.eligible[classes].any(axis=0))[0]
        parts.append((classes.astype(np.int64), nodes.astype(np.int64)))
    return sorted(parts, key=lambda p: -int(problem.eligible[np.ix_(p[0], p[1])].sum()))


def subproblem(problem: Problem, classes: IntArray, nodes: IntArray) -> Problem:
    """The part of ``problem`` over ``classes`` and ``nodes``, numbered from 0 in their order."""
    has_gpu = problem.gpu_count.shape[0] > 0
    return replace(
        problem,
        node_names=tuple(problem.node_names[i] for i in nodes),
        capacity=problem.capacity[nodes], used=problem.used[nodes],
        measured=None if problem.measured is None else problem.measured[nodes],
        limit=None if problem.limit is None else problem.limit[nodes],
        demand=problem.demand[classes], count=problem.count[classes], weight=problem.weight[classes],
        weight_stage=problem.weight_stage[classes] if problem.weight_stage.shape[0] else problem.weight_stage,
        eligible=problem.eligible[np.ix_(classes, nodes)],
        members=tuple(problem.members[c] for c in classes),
        **renumbered_rules(problem, {int(c): (k,) for k, c in enumerate(classes)}, nodes),
        gpu_count=problem.gpu_count[classes] if has_gpu else problem.gpu_count,
        gpu_milli=problem.gpu_milli[classes] if has_gpu else problem.gpu_milli,
        device_free=problem.device_free[nodes] if problem.device_free.shape[0] else problem.device_free,
    )


def lift(a: Assignment, classes: IntArray, nodes: IntArray) -> Assignment:
    """A sub-problem's assignment in the whole problem's indices."""
    d = a.devices
    return Assignment(classes[a.cls], nodes[a.node], a.counts,
                      DeviceUse(classes[d.cls], nodes[d.node], d.device, d.counts))


def restrict(a: Assignment, classes: IntArray, nodes: IntArray) -> Assignment:
    """The part of ``a`` on a sub-problem's classes and nodes, in its indices (the inverse of :func:`lift`)."""
    cls_index = np.full(int(max(classes.max(initial=-1), a.cls.max(initial=-1))) + 1, -1, dtype=np.int64)
    cls_index[classes] = np.arange(len(classes))
    node_index = np.full(int(max(nodes.max(initial=-1), a.node.max(initial=-1))) + 1, -1, dtype=np.int64)
    node_index[nodes] = np.arange(len(nodes))
    keep = (cls_index[a.cls] >= 0) & (node_index[a.node] >= 0)
    d = a.devices
    dkeep = (cls_index[d.cls] >= 0) & (node_index[d.node] >= 0) if len(d.cls) else np.zeros(0, dtype=np.bool_)
    return Assignment(cls_index[a.cls[keep]], node_index[a.node[keep]], a.counts[keep],
                      DeviceUse(cls_index[d.cls[dkeep]], node_index[d.node[dkeep]], d.device[dkeep], d.counts[dkeep]))
