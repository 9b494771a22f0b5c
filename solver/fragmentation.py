"""Fragmentation deltas for the FGD greedy: how much placing one more pod of a class on
each candidate node would change that node's fragmentation."""

from __future__ import annotations

from models.fragmentation import FloatArray, TaskShapes, node_fragmentation
from models.gpu import first_fit
from models.problem import IntArray
from solver.state import PlacementState

__all__ = ["TaskShapes", "fragmentation_after"]


def fragmentation_after(state: PlacementState, shapes: TaskShapes, c: int, nodes: IntArray) -> FloatArray:
    """(B,) fragmentation after one pod of class c on each node minus before."""
    free = state.free[nodes]
    dev = state.device_free[nodes]
    before = node_fragmentation(shapes, free, dev, nodes)
    need = state.need(c)
    dev_after = dev.copy()
    for b in range(len(nodes)):
        for d in first_fit(dev[b], need):
            dev_after[b, d] -= need.milli
    after = node_fragmentation(shapes, free - state.problem.demand[c], dev_after, nodes)
    return after - before
