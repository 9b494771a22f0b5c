"""Exact values of the goals for an assignment, independent of any linearisation.

These numbers are what plans report and what decides whether a solver's answer
improves on the incumbent; ``models.terms`` sums them into the objective, term by term.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kubeplace.models.problem import Assignment, Attraction, Problem

FloatArray = npt.NDArray[np.float64]


def placed_weight(problem: Problem, a: Assignment) -> int:
    """Exact over every weight stage (a higher stage outweighs all lower ones)."""
    return problem.weigh(a.cls, a.counts)


def stage_weights(problem: Problem, a: Assignment) -> tuple[int, ...]:
    """The weight placed in each stage, the highest first."""
    return problem.stage_weights(a.cls, a.counts)


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


def rule_violations(problem: Problem, a: Assignment) -> list[str]:
    """The group caps and inter-pod rules that ``a`` breaks, on its final placement, as the
    model states them; empty when it keeps every one."""
    y = a.dense(problem.n_classes, problem.n_nodes)
    out: list[str] = []

    def per_domain(classes: Sequence[int], domain: npt.NDArray[np.int64], size: int) -> npt.NDArray[np.int64]:
        counts = y[list(classes)].sum(axis=0) if classes else np.zeros(problem.n_nodes, dtype=np.int64)
        keep = domain >= 0
        return np.bincount(domain[keep], weights=counts[keep], minlength=size).astype(np.int64)

    for cap in problem.group_caps:
        if cap.domain is None:
            over = (y[list(cap.classes)].sum(axis=0) > cap.cap).any()
        else:
            over = (per_domain(cap.classes, cap.domain, len(cap.cap)) > cap.cap).any()
        if over:
            out.append(f"{cap.name}: over its cap")
    for ex in problem.exclusions:
        size = int(ex.domain.max(initial=-1)) + 1
        matched = set(ex.matched)
        a1 = per_domain([c for c in ex.carriers if c in matched], ex.domain, size)
        a0 = per_domain([c for c in ex.carriers if c not in matched], ex.domain, size)
        m = per_domain(ex.matched, ex.domain, size)
        if ((a1 > 1) | ((a1 > 0) & (m > 1)) | ((a0 > 0) & (m > 0))).any():
            out.append(f"{ex.name}: a carrier shares a domain with a pod it matches")
    for sp in problem.spreads:
        n = sp.bound + per_domain(sp.counted, sp.domain, sp.n_domains)
        floor = (int(n.min()) if sp.n_domains >= sp.min_domains and sp.n_domains else 0) if sp.ordered else sp.floor
        carriers = per_domain(sp.carriers, sp.domain, sp.n_domains)
        if ((carriers > 0) & (n > sp.max_skew + floor)).any():
            out.append(f"{sp.name}: a domain with a carrier exceeds maxSkew over the floor {floor}")
    starts: dict[str, bool] = {}
    for at in problem.attractions:
        problem_found, starts[at.name] = _attraction_problem(y, at)
        if problem_found:
            out.append(f"{at.name}: {problem_found}")
    for at in problem.attractions:
        if starts[at.name] and any(starts.get(r, False) for r in at.rivals):
            out.append(f"{at.name}: starts beside a rival group that matches its terms")
    return out


def _attraction_problem(y: npt.NDArray[np.int64], at: Attraction) -> tuple[str, bool]:
    """What breaks the group's rule ("" if nothing), and whether it needs its starter: every
    carrier domain that no running or planned supporter anchors must be the domain of one cell
    holding a pod that may start the group."""
    carriers = y[list(at.carriers)].sum(axis=0)
    if (carriers[at.cell < 0] > 0).any():
        return "a carrier on a node without a topology key", False
    support = y[list(at.supporters)].sum(axis=0) if at.supporters else np.zeros_like(carriers)
    have = at.cell >= 0
    cell_domain = np.full((int(at.cell.max(initial=-1)) + 1, len(at.domains)), -1, dtype=np.int64)
    if have.any():
        cell_domain[at.cell[have]] = np.stack([d[have] for d in at.domains], axis=1)
    candidates = np.ones(len(cell_domain), dtype=np.bool_)
    lonely = False
    for t, (dom, bound) in enumerate(zip(at.domains, at.bound_support, strict=True)):
        inside = dom >= 0
        anchored = bound | (np.bincount(dom[inside], weights=support[inside], minlength=len(bound)) > 0)
        there = np.bincount(dom[inside], weights=carriers[inside], minlength=len(bound)) > 0
        for d in np.nonzero(there & ~anchored)[0].tolist():
            lonely = True
            candidates &= cell_domain[:, t] == d
    if not lonely:
        return "", False
    starters = y[list(at.starters)].sum(axis=0) if at.starters else np.zeros_like(carriers)
    started = np.zeros(len(cell_domain), dtype=np.bool_)
    started[at.cell[(starters > 0) & have]] = True
    if not (candidates & started).any():
        return "a carrier's domain holds no supporter and is not the group's first pod's", True
    return "", True
