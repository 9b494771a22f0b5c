"""Fast greedy placements: always an answer, and the exact backend's first hint.

Classes are taken in order of weight (priority), then size (largest dominant share
first, as first-fit decreasing). Within a class only the node that just received a
pod changes, so nodes are ranked once per class, not once per pod:

- ``best-fit`` fills the node that will have the least free capacity left;
- ``spread`` gives each next pod to the node with the most free capacity left
  (LeastAllocated), with a heap;
- ``frag-greedy`` (kubeplace's FGD-style warm start, not the FGD authors' policy, which is
  ``simulate.policies.fgd``) takes the node whose GPU fragmentation, measured against the
  workload's task shapes weighted by the devices they ask for (``models.fragmentation``), grows least
  (Weng et al., ATC 2023); pods without GPUs go best-fit to nodes with no free GPU first.

``greedy_in_queue`` runs a policy one pod at a time in scheduling-queue order instead.

Gangs are placed as a unit and rolled back when they stay below min-member. The inter-pod
rules are in the state's fit; a class whose limit is shared by the nodes of a
domain goes one pod at a time, a spread's carriers to the domain with the fewest counted pods
first (water-filling, as the kube-scheduler tends to); a group with required pod affinity goes
where its supporters are, else its first pod picks the cell (a domain per term) with the least
room that holds the whole group (best-fit on domains, like a gang with a topology key).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TypeVar

import numpy as np

from kubeplace.kube.objects import GangKey
from kubeplace.models.problem import Assignment, BoolArray, Gang, IntArray, Problem
from kubeplace.solver.placers import Placer, Within, best_fit, candidates, preferred_first, spread
from kubeplace.solver.policies import BEST_FIT as BEST_FIT
from kubeplace.solver.policies import FRAG_GREEDY as FRAG_GREEDY
from kubeplace.solver.policies import POLICIES as POLICIES
from kubeplace.solver.policies import SPREAD as SPREAD
from kubeplace.solver.state import PlacementState

_T = TypeVar("_T")


def class_order(problem: Problem) -> list[int]:
    """Largest first: single classes by the dominant share of one pod; a gang as one unit,
    by the total share of all its pods (first-fit decreasing on gangs), its classes
    together, largest first. Within a priority tier, classes under a per-domain inter-pod rule
    come first (the most constrained), and a pod affinity group's carriers last, together
    (after the pods that may support them)."""
    scale = np.maximum(problem.capacity.max(axis=0, initial=0), 1)
    share = (problem.demand / scale).max(axis=1) if problem.n_classes else np.zeros(0)
    weight = problem.exact_weight  # exact over the weight stages
    units: list[tuple[int, int, float, int, list[int]]] = []
    in_unit: set[int] = set()
    for gang in problem.gangs:
        members = sorted(gang.classes, key=lambda c: (-share[c], c))
        in_unit.update(members)
        size = float(sum(share[c] * problem.count[c] for c in members))
        units.append((-max(weight[c] for c in members), 1, -size, members[0], members))
    for at in problem.attractions:
        members = sorted((c for c in at.carriers if c not in in_unit), key=lambda c: (c not in at.starters, c))
        in_unit.update(members)
        if members:
            size = float(sum(share[c] * problem.count[c] for c in members))
            units.append((-max(weight[c] for c in members), 2, -size, members[0], members))
    ruled = {c for ex in problem.exclusions for c in (*ex.carriers, *ex.matched)}
    ruled |= {c for sp in problem.spreads for c in sp.carriers} | {c for cap in problem.group_caps for c in cap.classes
                                                                  if cap.domain is not None}
    units += [(-weight[c], 0 if c in ruled else 1, -float(share[c]), c, [c])
              for c in range(problem.n_classes) if c not in in_unit]
    return [c for *_, members in sorted(units, key=lambda u: u[:4]) for c in members]


def greedy(problem: Problem, policy: str = BEST_FIT, order: list[int] | None = None,
           state: PlacementState | None = None, steer: bool = False, exact: bool | None = None) -> Assignment:
    """A complete placement by ``policy``; ``state`` may hold placements kept fixed.
    ``steer`` (best-fit and spread only) keeps pods off resources they do not use, see
    :func:`_steered`. ``exact`` (FGD): full node fragmentation per candidate (None: up to
    EXACT_FGD_PODS pending pods)."""
    place = _steered(problem, policy) if steer else _placer(problem, policy, exact)
    classes = order if order is not None else class_order(problem)
    return _place_runs(problem, state or PlacementState.start(problem), place, ((c, None) for c in classes))


def queue_runs(problem: Problem) -> list[tuple[int, int]]:
    """The pending pods in scheduling-queue order as (class, pods) runs of one class."""
    rank = problem.queue_rank
    pods = sorted((int(rank[m]) if len(rank) else m, c, _copies(problem, c, ms))
                  for c, ms in enumerate(problem.members) for m in ms)
    runs: list[tuple[int, int]] = []
    for _, c, n in pods:
        if runs and runs[-1][0] == c:
            runs[-1] = (c, runs[-1][1] + n)
        else:
            runs.append((c, n))
    return runs


def _copies(problem: Problem, c: int, members: tuple[int, ...]) -> int:
    """How many pods one member of class ``c`` stands for: its class's count when it is alone in
    it (an object with ``Pod.copies``), else 1."""
    return int(problem.count[c]) if len(members) == 1 else 1


def greedy_in_queue(problem: Problem, policy: str = FRAG_GREEDY, exact: bool | None = None) -> Assignment:
    """``policy`` one pod at a time in scheduling-queue order, as a one-at-a-time scheduler
    would see a small batch of arrivals. Measured on FGD's saturation replay (windows of 100
    arrivals): the same FGD placer in queue order ends with more GPUs allocated than in
    largest-first order, whose big pods take the nodes later arrivals of the stream fit best.
    A gang is placed whole when its first member comes up. ``exact`` as for :func:`greedy`."""
    return in_queue_order(problem, _placer(problem, policy, exact))


def in_queue_order(problem: Problem, place: Placer) -> Assignment:
    """The pending pods by ``place`` in scheduling-queue order (``simulate``'s policies use it with
    their own placers); gangs whole, the inter-pod rules as for every greedy."""
    return _place_runs(problem, PlacementState.start(problem), place, queue_runs(problem))


def _place_runs(problem: Problem, state: PlacementState, place: Placer,
                runs: Iterable[tuple[int, int | None]]) -> Assignment:
    """Places ``runs`` of (class, pods; None: all its pods not yet placed) in order; a gang
    whole, all or nothing, when its first class comes up."""
    gang_of = {c: g for g in problem.gangs for c in g.classes}
    done_gangs: set[GangKey] = set()
    for c, k in runs:
        gang = gang_of.get(c)
        if gang is None:
            place_class(state, c, int(problem.count[c] - state.per_class[c]) if k is None else k, place)
        elif gang.key not in done_gangs:
            done_gangs.add(gang.key)
            state = _place_gang(problem, state, gang, place)
    return state.assignment()


def _placer(problem: Problem, policy: str, exact_fgd: bool | None = None) -> Placer:
    if policy not in POLICIES:
        raise ValueError(f"unknown greedy policy {policy!r}")
    return POLICIES[policy].placer(problem, exact_fgd)


def _steered(problem: Problem, policy: str) -> Placer:
    """``policy`` (best-fit or spread), but a pod that needs none of a resource only some
    nodes have (GPUs, say) goes first to the nodes with none of it free, and elsewhere only
    when those are full: CPU-only pods then leave GPU nodes' CPU and memory to the GPU pods."""
    place = POLICIES[policy].within
    assert place is not None, f"{policy} has no placer on a subset of nodes"
    cap = problem.capacity
    partial = np.nonzero((cap == 0).any(axis=0) & (cap > 0).any(axis=0))[0]

    def steered(state: PlacementState, c: int, want: int) -> int:
        unused = partial[problem.demand[c, partial] == 0]
        if len(unused) == 0:
            return place(state, c, want, None)
        return preferred_first(state, c, want, np.asarray((state.free[:, unused] <= 0).all(axis=1)), place)
    return steered


def _place_gang(problem: Problem, state: PlacementState, gang: Gang, place: Placer) -> PlacementState:
    """The gang's members not yet placed (members already in ``state`` count towards
    min-member), or nothing when the gang would stay below min-member or minResources.
    A gang with a topology key tries its domains one at a time, see :func:`_gang_domains`."""
    for within in _gang_domains(problem, state, gang):
        trial = state.copy()
        trial.within = within
        for c in gang.classes:
            place_class(trial, c, int(problem.count[c] - trial.per_class[c]), place)
        trial.within = None
        if gang_complete(problem, trial, gang):
            return trial
    return state


def gang_complete(problem: Problem, state: PlacementState, gang: Gang) -> bool:
    """The gang's members in ``state`` (running ones counted) reach min-member, all in one domain
    of its topology key if it has one."""
    if int(state.per_class[list(gang.classes)].sum()) < gang.still_needed:
        return False
    if gang.domain is not None:
        held = {int(gang.domain[i]) for (c, i), k in state.placed.items() if k > 0 and c in gang.classes}
        return len(held) <= 1 and -1 not in held
    return True


def _gang_domains(problem: Problem, state: PlacementState, gang: Gang) -> list[BoolArray | None]:
    """The node masks to try the gang on: anywhere without a topology key; else the domain
    its members already placed hold (none if they span several), or every domain, the one
    with the least free room for the gang first (best-fit on domains: large domains stay
    whole for large gangs). With only a preferred key, the same, then anywhere."""
    domain = gang.domain if gang.domain is not None else gang.preferred
    if domain is None:
        return [None]
    fallback: list[BoolArray | None] = [] if gang.domain is not None else [None]  # a preference only
    held = {int(domain[i]) for (c, i), k in state.placed.items() if k > 0 and c in gang.classes}
    if held:
        return [domain == next(iter(held)), *fallback] if len(held) == 1 and -1 not in held else fallback
    usable = problem.eligible[list(gang.classes)].any(axis=0)
    room = (state.free / np.maximum(problem.capacity, 1)).sum(axis=1)
    domains = np.unique(domain[domain >= 0])
    order = np.argsort([float(room[usable & (domain == d)].sum()) for d in domains], kind="stable")
    return [domain == domains[j] for j in order] + fallback


def place_class(state: PlacementState, c: int, want: int, place: Placer) -> int:
    """``want`` more pods of class c by ``place``, within the inter-pod rules."""
    if want <= 0:
        return 0
    j = state.rules.carrier_of(c)
    if j >= 0:
        return _place_carrier(state, c, want, place, j)
    return _place_plain(state, c, want, place)


def _within(state: PlacementState, mask: BoolArray, run: Callable[[], int]) -> int:
    """``run`` with the state restricted to ``mask`` (and to what it was restricted to)."""
    before = state.within
    state.within = mask if before is None else mask & before
    try:
        return run()
    finally:
        state.within = before


def _shared_limits(state: PlacementState, c: int, want: int, place: Placer) -> int:
    """A class under a limit shared by the nodes of a domain. Under one spread alone (its
    carriers counted by it): the level of each domain is worked out first, as pods taken one at
    a time into the domain with the fewest counted pods among those with room would fill them
    (water-filling, each step within maxSkew of the floor), then each domain's pods go in at
    once. Otherwise one pod per step."""
    limits = state.rules.wide[c]
    if len(limits) == 1 and limits[0][0] == "spread" and c in state.rules.spread[limits[0][1]].rule.carriers:
        return _water_fill(state, c, want, place, limits[0][1])
    placed = 0
    while placed < want:
        got = place(state, c, 1)
        if got <= 0:
            break
        placed += got
    return placed


def _relaxed(state: PlacementState, j: int, run: Callable[[], _T]) -> _T:
    """``run`` with spread j's limit left out of the fit (the caller checked its levels)."""
    state.rules.relaxed = j
    try:
        return run()
    finally:
        state.rules.relaxed = -1


def _water_fill(state: PlacementState, c: int, want: int, place: Placer, j: int) -> int:
    s = state.rules.spread[j]
    rule = s.rule
    nodes, m = _relaxed(state, j, lambda: candidates(state, c))
    domain = rule.domain[nodes]
    inside = domain >= 0
    room = np.bincount(domain[inside], weights=m[inside], minlength=rule.n_domains).astype(np.int64)
    n, target = s.n.copy(), np.zeros(rule.n_domains, dtype=np.int64)
    for _ in range(want):
        floor = state.rules.floor_of(rule, n)
        ok = (target < room) & (n + 1 <= rule.max_skew + floor)
        if not ok.any():
            break
        d = int(np.argmin(np.where(ok, n, np.iinfo(np.int64).max)))
        n[d] += 1
        target[d] += 1
    placed = 0
    def fill(d: int, k: int) -> int:
        return _within(state, rule.domain == d, lambda: place(state, c, k))

    for d in np.nonzero(target)[0].tolist():
        placed += _relaxed(state, j, functools.partial(fill, d, int(target[d])))
    if placed < want and not inside.all():  # nodes the spread does not count
        placed += _within(state, rule.domain < 0, lambda: place(state, c, want - placed))
    return placed


def _place_plain(state: PlacementState, c: int, want: int, place: Placer) -> int:
    if c in state.rules.wide:
        return _shared_limits(state, c, want, place)
    return place(state, c, want)


def _place_carrier(state: PlacementState, c: int, want: int, place: Placer, j: int) -> int:
    """A pod affinity carrier: where its group is anchored, then, if it may start the group
    and none has, in one more cell: the one with the least room that holds what is left of
    the group (best-fit), else the roomiest."""
    rules, p = state.rules, state.problem
    everywhere = np.arange(p.n_nodes, dtype=np.int64)
    placed = _within(state, rules.anchored(j, everywhere), lambda: _place_plain(state, c, want, place))
    if placed >= want or c not in rules.attr[j].rule.starters or not rules.starter_possible(j):
        return placed
    nodes, m = candidates(state, c)
    cell = rules.attr[j].rule.cell[nodes]
    if not (cell >= 0).any():
        return placed
    room = np.bincount(cell[cell >= 0], weights=m[cell >= 0], minlength=int(cell.max()) + 1)
    group = rules.attr[j].rule.carriers
    need = int(sum(int(p.count[k] - state.per_class[k]) for k in group))
    fits = np.nonzero(room >= need)[0]
    chosen = int(fits[np.argmin(room[fits])]) if len(fits) else int(np.argmax(room))
    mask = rules.anchored(j, everywhere) | (rules.attr[j].rule.cell == chosen)
    return placed + _within(state, mask, lambda: _place_plain(state, c, want - placed, place))


def guided(problem: Problem, quotas: IntArray, node_kind: IntArray, packed: bool = False) -> Assignment:
    """A greedy that follows a plan by node kind: ``quotas[c, k]`` pods of class c go to nodes
    of kind k first (from the aggregated model's solution, which sees every class at once and
    so knows which node shapes each class should use), the rest anywhere.

    Spread within each kind (even use of the kind's nodes), each class's pods beyond its quotas
    right after them; ``packed``: best-fit within each kind (a kind's nodes hold what its quotas
    add up to only if no pod takes a sliver of a node another class's pod needs whole), and the
    pods beyond the quotas once every class of the same weight has had its quotas (before, they
    would take the room the plan keeps for the classes after them). At 20,000 nodes x 100,000
    pods, 4-GPU pods spread over the GPU nodes, or beyond their quota, left 655 more pods out."""
    place: Within = best_fit if packed else spread
    state = PlacementState.start(problem)
    gang_classes = {c for g in problem.gangs for c in g.classes}
    order = class_order(problem)
    ruled = [c for c in order if c in state.rules.roles and c not in gang_classes]
    plain = [c for c in order if c not in gang_classes and c not in state.rules.roles]
    weight = problem.exact_weight
    for tier in _runs_of(plain, lambda c: weight[c]) if packed else [[c] for c in plain]:
        for c in tier:
            for k in np.argsort(-quotas[c], kind="stable"):
                if quotas[c, k] <= 0:
                    break
                place(state, c, int(quotas[c, k]), node_kind == k)
        for c in tier:
            place(state, c, int(problem.count[c] - state.per_class[c]), None)
    for c in ruled:  # the inter-pod rules' classes by the rules-aware path, after the others
        place_class(state, c, int(problem.count[c] - state.per_class[c]), best_fit)
    for gang in problem.gangs:
        state = _place_gang(problem, state, gang, best_fit)
    return state.assignment()


def _runs_of(items: list[int], key: Callable[[int], object]) -> list[list[int]]:
    """``items`` cut into runs of consecutive items of equal ``key``."""
    runs: list[list[int]] = []
    for item in items:
        if runs and key(runs[-1][-1]) == key(item):
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs
