"""Exact values of the goals for an assignment, independent of any linearisation.

These numbers are what plans report and what decides whether a solver's answer
improves on the incumbent.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kubeplace.models.fragmentation import cluster_fragmentation
from kubeplace.models.framework import FragmentationTerm, GangDomainsTerm, LoadBalanceTerm, NodesUsedTerm, ObjectiveTerm
from kubeplace.models.gpu import WHOLE
from kubeplace.models.problem import Assignment, Problem

FloatArray = npt.NDArray[np.float64]


def placed_weight(problem: Problem, a: Assignment) -> int:
    return int((problem.weight[a.cls] * a.counts).sum())


def pods_placed(a: Assignment) -> int:
    return int(a.counts.sum())


def utilisation(problem: Problem, a: Assignment, measured: bool = False) -> FloatArray:
    """(N, R) requested (or, with ``measured``, measured load plus placed requests) over
    allocatable after placement; 0 where allocatable is 0."""
    load = problem.base(measured).astype(np.float64) + a.load(problem)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(problem.capacity > 0, load / np.maximum(problem.capacity, 1), 0.0)


def mean_utilisation(problem: Problem, a: Assignment, measured: bool = False) -> FloatArray:
    """(R,) the cluster's mean utilisation, over the nodes that have the resource."""
    u = utilisation(problem, a, measured)
    has = problem.capacity > 0
    return np.where(has.any(axis=0), (u * has).sum(axis=0) / np.maximum(has.sum(axis=0), 1), 0.0)


def measured_shift(problem: Problem) -> FloatArray:
    """(R,) the mean measured utilisation less the mean requested one: the same for every
    assignment, so a measured term's mean is the requested mean plus this."""
    empty = Assignment.empty()
    return mean_utilisation(problem, empty, True) - mean_utilisation(problem, empty)


def balance(problem: Problem, a: Assignment, resource: str, measured: bool = False) -> float:
    """sum_i (u_i - mu)^2 over the nodes having the resource; mu is their mean."""
    r = problem.resource_index(resource)
    if r is None:
        return 0.0
    has = problem.capacity[:, r] > 0
    u = utilisation(problem, a, measured)[has, r]
    return float(((u - u.mean()) ** 2).sum()) if len(u) else 0.0


def nodes_used(problem: Problem, a: Assignment) -> int:
    pods = problem.resource_index("pods")
    busy = np.zeros(problem.n_nodes, dtype=np.bool_)
    if pods is not None:
        busy |= problem.used[:, pods] > 0
    busy[a.node[a.counts > 0]] = True
    return int(busy.sum())


def gang_domains(problem: Problem, a: Assignment) -> int:
    """Domains of their preferred topology keys that gangs' placed members use, summed."""
    total = 0
    for gang in problem.gangs:
        if gang.preferred is not None:
            total += len(np.unique(gang.preferred[a.node[np.isin(a.cls, np.asarray(gang.classes))]]))
    return total


def objective_value(problem: Problem, a: Assignment, terms: Sequence[ObjectiveTerm]) -> float:
    """The second goal as the plan reports it (lower is better)."""
    total = 0.0
    for t in terms:
        if isinstance(t, LoadBalanceTerm):
            total += t.weight * balance(problem, a, t.resource, t.measured)
        elif isinstance(t, NodesUsedTerm):
            total += t.weight * nodes_used(problem, a)
        elif isinstance(t, GangDomainsTerm):
            total += t.weight * gang_domains(problem, a)
        elif isinstance(t, FragmentationTerm):
            total += t.weight * cluster_fragmentation(problem, a, by_devices=True)[0] / WHOLE
    return total


def better(problem: Problem, a: Assignment, b: Assignment, terms: Sequence[ObjectiveTerm]) -> bool:
    """True when a beats b lexicographically (placed weight, then objective)."""
    wa, wb = placed_weight(problem, a), placed_weight(problem, b)
    if wa != wb:
        return wa > wb
    return objective_value(problem, a, terms) < objective_value(problem, b, terms) - 1e-9
