"""Why a pod was not placed, in the words of the kube-scheduler:
"0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint."

Each node counts once, for the first filter it fails; nodes that pass every filter
count for each resource they lack once the plan's own placements are taken.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from kubeplace.models.aggregate import Aggregation
from kubeplace.models.problem import IntArray

LEFT_OUT = "node(s) had room but the plan left the pod out (host port or gang rule, or the time limit)"


def explain(agg: Aggregation, c: int, free_after: IntArray) -> str:
    """The message for a pod of class ``c``; ``free_after`` is (N, R) free capacity after the plan."""
    p = agg.problem
    n = p.n_nodes
    if n == 0:
        return "0/0 nodes are available: no nodes in the snapshot."
    reasons: Counter[str] = Counter()
    open_nodes = np.ones(n, dtype=np.bool_)
    for table in agg.filters:
        fails = open_nodes & ~table.class_mask(c)
        if fails.any():
            reasons[table.plugin.reason] += int(fails.sum())
        open_nodes &= ~fails
    demand = p.demand[c]
    lacking = open_nodes[:, None] & (free_after < demand[None, :]) & (demand[None, :] > 0)
    for r, resource in enumerate(p.resources):
        count = int(lacking[:, r].sum())
        if count:
            label = "Too many pods" if resource == "pods" else f"Insufficient {resource}"
            reasons[label] += count
    room = int((open_nodes & ~lacking.any(axis=1)).sum())
    if room:
        reasons[LEFT_OUT] += room
    available = 0
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return f"{available}/{n} nodes are available: {parts}."
