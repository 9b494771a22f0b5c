"""The score plugins' preferences (``Problem.preferences``) as numbers: the kube-scheduler's
per-node scores, their normalisation, and the exact points an assignment loses.

A preference is worth score points, as the kube-scheduler counts them: 0..100 per plugin per
pod (``MaxNodeScore``), times the plugin's weight in the profile. A pod *loses* the points its
node scores below the best node it could have had, so a pod on its best node costs nothing and
no preference ever makes a pod worth less than leaving it out (the goal of stage 2 keeps the
pods of stage 1 placed in any case).

- :class:`~models.problem.NodePreference`: the node's raw score, normalised over the class's
  eligible nodes as the plugin's NormalizeScore does (``helper.DefaultNormalizeScore``, reversed
  for TaintToleration; InterPodAffinity scales from the lowest to the highest). That is the
  kube-scheduler's score exactly wherever it depends on the snapshot only.
- :class:`~models.problem.DomainPreference`: ``points`` per counted pod already in the carrier's
  domain, summed over the placed carriers in any order: f(n) = n (n - 1) / 2 + n * bound per
  domain (convex, exact at every integer count), a linear proxy for a score that the
  kube-scheduler normalises per pod over the counts it sees at that moment (README, Scoring).

``POINTS_PER_UNIT`` points make one unit of the objective (a balance unit: one node at the
largest deviation of one resource); a weight-2 preference missed in full is 200 points, 10 units,
as much as one more gang domain (``plugins.gang_topology_preference.GANG_DOMAIN_WEIGHT``).
"""

from __future__ import annotations

import math

import numpy as np

from kubeplace.models.problem import Assignment, BoolArray, DomainPreference, IntArray, NodePreference, Problem

MAX_NODE_SCORE = 100
POINTS_PER_UNIT = 20
DEFAULT, REVERSE, MINMAX = "default", "reverse", "minmax"


def normalised(raw: IntArray, eligible: BoolArray, how: str) -> IntArray:
    """(k, N) 0..100 per row over the row's eligible nodes, as the plugin's NormalizeScore."""
    masked_max = np.where(eligible, raw, np.iinfo(np.int64).min).max(axis=1, initial=np.iinfo(np.int64).min)
    if how == MINMAX:
        masked_min = np.where(eligible, raw, np.iinfo(np.int64).max).min(axis=1, initial=np.iinfo(np.int64).max)
        spread = masked_max - masked_min
        flat = ~eligible.any(axis=1) | (spread <= 0)
        scaled = (MAX_NODE_SCORE * (raw - masked_min[:, None]) / np.where(flat, 1, spread)[:, None]).astype(np.int64)
        return np.where(flat[:, None], 0, scaled)
    top = np.where(eligible.any(axis=1), masked_max, 0)
    scaled = raw * MAX_NODE_SCORE // np.maximum(top, 1)[:, None]
    scaled = np.where((top > 0)[:, None], scaled, 0)
    return np.asarray(MAX_NODE_SCORE - scaled if how == REVERSE else scaled, dtype=np.int64)


def node_scores(problem: Problem, pref: NodePreference) -> IntArray:
    """(len(classes), N) the kube-scheduler's normalised score of each class on each node."""
    eligible = problem.eligible[list(pref.classes)]
    return normalised(pref.raw, eligible, pref.normalise)


def node_cost(problem: Problem, pref: NodePreference) -> IntArray:
    """(len(classes), N) points a pod of the class loses on the node against its best eligible
    node (0 where it is not eligible)."""
    eligible = problem.eligible[list(pref.classes)]
    score = normalised(pref.raw, eligible, pref.normalise)
    best = np.where(eligible, score, 0).max(axis=1, initial=0)
    return np.where(eligible, np.maximum(best[:, None] - score, 0), 0).astype(np.int64)


def pairs(n: IntArray, bound: IntArray) -> IntArray:
    """f(n) = n (n - 1) / 2 + n * bound, per domain."""
    return np.asarray(n * (n - 1) // 2 + n * bound, dtype=np.int64)


def typical_count(total: int, n_domains: int) -> int:
    """The count a domain holds when ``total`` pods are spread evenly over ``n_domains`` (at least 1)."""
    return max(1, math.ceil(total / max(n_domains, 1)))


def points_per_pod(total: int, n_domains: int) -> int:
    """What one more counted pod in a domain costs a carrier: a full score (100 points) over the
    count an evenly spread domain holds, since the kube-scheduler normalises by the largest count."""
    return math.ceil(MAX_NODE_SCORE / typical_count(total, n_domains))


def domain_points(a: Assignment, pref: DomainPreference) -> int:
    """The points a DomainPreference costs the placement ``a``."""
    mine = np.isin(a.cls, np.asarray(pref.carriers, dtype=np.int64))
    dom = pref.domain[a.node[mine]]
    inside = dom >= 0
    carriers = np.bincount(dom[inside], weights=a.counts[mine][inside], minlength=len(pref.bound)).astype(np.int64)
    if pref.self_counted:
        return pref.points * int(pairs(carriers, pref.bound).sum())
    return pref.points * int((carriers * pref.bound).sum())


def preference_points(problem: Problem, a: Assignment, plugin: str) -> int:
    """The points ``a`` loses on ``plugin``'s preferences (before the plugin's weight)."""
    total = 0
    for pref in problem.preferences:
        if pref.plugin != plugin:
            continue
        if isinstance(pref, NodePreference):
            row = np.full(problem.n_classes, -1, dtype=np.int64)
            row[list(pref.classes)] = np.arange(len(pref.classes))
            keep = row[a.cls] >= 0
            cost = node_cost(problem, pref)
            total += int((cost[row[a.cls[keep]], a.node[keep]] * a.counts[keep]).sum())
        else:
            total += domain_points(a, pref)
    return total
