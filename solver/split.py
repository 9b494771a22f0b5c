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

from kubeplace.models.problem import (
    Assignment,
    DeviceUse,
    DomainPreference,
    IntArray,
    NodePreference,
    Preference,
    Problem,
)


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


def rule_classes(problem: Problem) -> list[tuple[int, ...]]:
    """The classes each rule ties together (all of one rule must be solved together)."""
    groups: list[tuple[int, ...]] = [*(g.classes for g in problem.group_caps), *(g.classes for g in problem.gangs)]
    groups += [(*r.carriers, *r.matched) for r in problem.exclusions]
    groups += [(*r.carriers, *r.counted) for r in problem.spreads]
    groups += [(*r.carriers, *r.counted) for r in problem.preferences if isinstance(r, DomainPreference)]
    by_name = {a.name: a for a in problem.attractions}
    groups += [(*a.carriers, *a.supporters, *(c for r in a.rivals for c in by_name[r].carriers))
               for a in problem.attractions]
    return [g for g in groups if g]


def subproblem(problem: Problem, classes: IntArray, nodes: IntArray) -> Problem:
    new_index = {int(c): k for k, c in enumerate(classes)}

    def renumber(members: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(new_index[c] for c in members)

    caps = tuple(replace(g, classes=renumber(g.classes), cap=g.cap if g.domain is not None else g.cap[nodes],
                         domain=None if g.domain is None else g.domain[nodes])
                 for g in problem.group_caps if g.classes and g.classes[0] in new_index)
    exclusions = tuple(replace(r, carriers=renumber(r.carriers), matched=renumber(r.matched), domain=r.domain[nodes])
                       for r in problem.exclusions if r.carriers[0] in new_index)
    spreads = tuple(replace(r, carriers=renumber(r.carriers), counted=renumber(r.counted), domain=r.domain[nodes])
                    for r in problem.spreads if r.carriers[0] in new_index)
    attractions = tuple(replace(a, carriers=renumber(a.carriers), supporters=renumber(a.supporters),
                                starters=renumber(a.starters), domains=tuple(d[nodes] for d in a.domains),
                                cell=a.cell[nodes])
                        for a in problem.attractions if a.carriers[0] in new_index)
    gangs = tuple(replace(g, classes=tuple(new_index[c] for c in g.classes),
                          domain=None if g.domain is None else g.domain[nodes],
                          preferred=None if g.preferred is None else g.preferred[nodes])
                  for g in problem.gangs if g.classes and g.classes[0] in new_index)
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
        group_caps=caps, gangs=gangs, exclusions=exclusions, attractions=attractions, spreads=spreads,
        preferences=tuple(_sub_preferences(problem.preferences, new_index, nodes)),
        gpu_count=problem.gpu_count[classes] if has_gpu else problem.gpu_count,
        gpu_milli=problem.gpu_milli[classes] if has_gpu else problem.gpu_milli,
        device_free=problem.device_free[nodes] if problem.device_free.shape[0] else problem.device_free,
    )


def _sub_preferences(prefs: tuple[Preference, ...], new_index: dict[int, int], nodes: IntArray) -> list[Preference]:
    out: list[Preference] = []
    for pref in prefs:
        if isinstance(pref, NodePreference):
            rows = [k for k, c in enumerate(pref.classes) if c in new_index]
            if rows:
                out.append(replace(pref, classes=tuple(new_index[pref.classes[k]] for k in rows),
                                   raw=pref.raw[np.ix_(np.asarray(rows, dtype=np.int64), nodes)]))
        elif pref.carriers[0] in new_index:
            out.append(replace(pref, carriers=tuple(new_index[c] for c in pref.carriers),
                               counted=tuple(new_index[c] for c in pref.counted), domain=pref.domain[nodes]))
    return out


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
