"""``plan --provision``: the pending pods placed on the existing nodes first, then on the
cheapest new nodes Karpenter's NodePools may launch, every placement verified.

The objective is lexicographic: (1) pods placed by priority, existing nodes first; (2) the cost
per hour of the new nodes; (3) the profile's objective. Stage A is the normal plan on the
existing nodes. The pods it leaves go to the provisioning model (``plan.provision_items``,
``solver.cutting_stock_columns``): Karpenter's greedy first, then column generation and a MIP, with
Farley's bound. The chosen nodes are materialised as ``<nodePool>-<n>`` with the labels, taints
and zone they would register with, and the whole batch is planned again on the existing and new
nodes (the provisioning's placement as a seed), which the independent verifier checks. Pods that
plan still leaves (a rule the model only approximates for new nodes) go round again (a repair
round), and new nodes left empty are dropped before the final plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from kubeplace.kube.capacity import NodeTemplate, candidate_nodes, unused_pools
from kubeplace.kube.catalogue import InstanceType
from kubeplace.kube.errors import InputError
from kubeplace.kube.karpenter import check_limits
from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.models.aggregate import Aggregation, aggregate
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.problem import Assignment
from kubeplace.plan.explain import After, explain
from kubeplace.plan.pipeline import Planned, make_plan, with_stand_ins
from kubeplace.plan.plan import NewNode, Provision
from kubeplace.plan.provision_items import items_of, offers_of, pool_room, with_companions
from kubeplace.solver.budget import Budget
from kubeplace.solver.cutting_stock import Bin
from kubeplace.solver.cutting_stock_columns import provision
from kubeplace.solver.run import Event
from kubeplace.solver.shares import (
    PROVISION_MIN_SECONDS,
    PROVISION_OBJECTIVE_PASS_SHARE,
    PROVISION_OBJECTIVE_SHARE,
    PROVISION_STAGE_SHARES,
)

REPAIR_ROUNDS = 3
"""Provisioning rounds after the first, for pods the plan on the new nodes still leaves."""
STAGE_A, ROUND, GROWN = PROVISION_STAGE_SHARES
NO_CANDIDATE = ("no new node can host it: no offering of the catalogue is available and admitted by a NodePool's "
                "requirements")


@dataclass(frozen=True)
class _Added:
    """New nodes chosen so far (their pods are the plan's, known at the end)."""

    new: tuple[NewNode, ...] = ()

    @cached_property
    def nodes(self) -> tuple[Node, ...]:
        """As they register once ready, under their names in the plan."""
        return tuple(n.template.to_node(n.name) for n in self.new)


@dataclass(frozen=True)
class _Round:
    added: _Added
    intended: tuple[tuple[str, str], ...]
    bound: float | None
    """On the cost of new nodes for the pods ``placing`` (None if the answer leaves some out)."""
    cost: int
    greedy_cost: int
    status: str
    reasons: dict[str, str]

    @property
    def placing(self) -> set[str]:
        return {pod for pod, _ in self.intended}


def make_provision_plan(snapshot: Snapshot, catalogue: Sequence[InstanceType], config: Configuration,
                        profile: Profile, settings: SolverSettings,
                        on_event: Callable[[Event], None] | None = None, budget: Budget | None = None) -> Planned:
    """The plan with new nodes (see the module's text); ``Plan.provision`` says which and at what
    cost. Within ``budget`` (a caller's phase; else ``settings.time_limit``), from now."""
    if not snapshot.node_pools:
        raise InputError("--provision needs at least one karpenter.sh/v1 NodePool in the snapshot",
                         file=snapshot.source or "the cluster", obj="NodePool")
    check_limits(snapshot.node_pools, snapshot.node_claims, snapshot.nodes)
    budget = Budget.of(settings.time_limit) if budget is None else budget.from_now()
    candidates = candidate_nodes(snapshot.node_pools, catalogue, snapshot.daemon_pods)
    unused = tuple(unused_pools(snapshot.node_pools, catalogue))
    planned: Planned | None = None
    if snapshot.nodes:
        planned = make_plan(snapshot, config, profile, replace(settings, stop_when_placed=True), on_event,
                            budget=budget.part(STAGE_A))
    added, first, reasons, rounds = _Added(), None, {}, 0
    intended = () if planned is None else tuple((f"{p.namespace}/{p.name}", p.node) for p in planned.plan.placements)
    for round_number in range(1, REPAIR_ROUNDS + 2):
        rounds = round_number
        left = ({(pod.namespace, pod.name) for pod in snapshot.pending} if planned is None else
                {(u.namespace, u.name) for u in planned.plan.unplaced if not u.left_to_default_scheduler})
        if not left or not candidates:
            break
        chosen = _provision_round(snapshot, planned, left, candidates, added, config, profile,
                                  budget.split(ROUND).at_least(PROVISION_MIN_SECONDS))
        reasons.update(chosen.reasons)
        first = first or chosen
        if len(chosen.added.new) == len(added.new):
            break
        added, intended = chosen.added, with_later(intended, chosen.intended)
        planned = _replanned(snapshot, added, config, profile, replace(settings, stop_when_placed=True), budget,
                             intended)
    if planned is None:  # no node, and none added
        planned = make_plan(snapshot, config, profile, settings, on_event, budget=Budget.of(PROVISION_MIN_SECONDS))
    if not candidates:
        reasons = {f"{u.namespace}/{u.name}": NO_CANDIDATE for u in planned.plan.unplaced
                   if not u.left_to_default_scheduler}
    if added.new:
        used = {p.node for p in planned.plan.placements}
        kept = _Added(tuple(n for n in added.new if n.name in used))
        if len(kept.new) < len(added.new):
            trimmed = _replanned(snapshot, kept, config, profile, replace(settings, stop_when_placed=True), budget,
                                 intended)
            if not trimmed.violations and trimmed.plan.summary.placed_weight >= planned.plan.summary.placed_weight:
                planned, added = trimmed, kept
    planned = _objective_pass(snapshot, planned, added, config, profile, settings, budget)
    return _with_provision(planned, added, first, reasons, rounds, unused)


def with_later(intended: Sequence[tuple[str, str]], later: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The (pod, node) intentions so far with a later round's: a pod a later round provisions for
    again (the plan left it out) keeps only its new node, so that no pod is seeded twice."""
    again = {pod for pod, _ in later}
    return (*[(pod, node) for pod, node in intended if pod not in again], *later)


def _objective_pass(snapshot: Snapshot, planned: Planned, added: _Added, config: Configuration, profile: Profile,
                    settings: SolverSettings, budget: Budget) -> Planned:
    """With a good part of the time limit left, the plan on the grown cluster once more, spending
    part of it on the profile's objective (3) from the plan so far; kept when it is verified, places
    as much and leaves no new node empty (a node bought for nothing)."""
    if not added.new or budget.left() < budget.part(PROVISION_OBJECTIVE_SHARE).seconds:
        return planned
    intended = tuple((f"{p.namespace}/{p.name}", p.node) for p in planned.plan.placements)
    grown = replace(snapshot, nodes=(*snapshot.nodes, *added.nodes))
    better = make_plan(grown, config, profile, settings, None, intended, budget.split(PROVISION_OBJECTIVE_PASS_SHARE))
    used = {p.node for p in better.plan.placements}
    if (better.violations or better.plan.summary.placed_weight < planned.plan.summary.placed_weight
            or any(n.name not in used for n in added.new)):
        return planned
    return better


def _replanned(snapshot: Snapshot, added: _Added, config: Configuration, profile: Profile, settings: SolverSettings,
               budget: Budget, intended: Sequence[tuple[str, str]]) -> Planned:
    plan_budget = budget.within(budget.part(GROWN).seconds).at_least(PROVISION_MIN_SECONDS)
    grown = replace(snapshot, nodes=(*snapshot.nodes, *added.nodes))
    return make_plan(grown, config, profile, settings, None, intended, plan_budget)


def _provision_round(snapshot: Snapshot, planned: Planned | None, left: set[tuple[str, str]],
                     candidates: Sequence[NodeTemplate], added: _Added, config: Configuration, profile: Profile,
                     budget: Budget) -> _Round:
    """New nodes for the pods ``left`` (the plan so far places the others), on top of ``added``,
    within ``budget``'s seconds from when the provisioning model is built."""
    nodes = (*snapshot.nodes, *added.nodes)
    placed = {} if planned is None else {(p.namespace, p.name): p.node for p in planned.plan.placements}
    templates = [c.to_node() for c in candidates]
    named = {t.name for t in templates}
    spare = {a.node.name: a for c in candidates for a in c.alternatives if a.node.name not in named}
    companion_nodes = {name: a.to_node() for name, a in spare.items()}
    pending = tuple(pod for pod in snapshot.pending if (pod.namespace, pod.name) in left)
    now_bound = tuple(replace(pod, node_name=placed[(pod.namespace, pod.name)]) for pod in snapshot.pending
                      if (pod.namespace, pod.name) in placed)
    shaped = replace(snapshot, nodes=(*nodes, *templates, *companion_nodes.values()), pending=pending,
                     bound=(*snapshot.bound, *now_bound), reserved=())
    plugins = instantiate(config, profile, shaped)
    planning = plugins.defaulted(with_stand_ins(shaped))
    agg = aggregate(planning, plugins, config.gpu, profile.placement_weight)
    p = agg.problem
    index = {name: i for i, name in enumerate(p.node_names)}
    columns = np.array([index[t.name] for t in templates], dtype=np.int64)
    companions = [np.array([index[a.node.name] for a in c.alternatives], dtype=np.int64) for c in candidates]
    room = pool_room(snapshot.node_pools, snapshot.node_claims, snapshot.nodes, [n.template for n in added.new])
    offers = offers_of(candidates, p, columns, snapshot.node_pools, room)
    item_set = items_of(agg, columns, candidates, offers, companions)
    result = provision(item_set.items, offers, budget.from_now())
    after = After.of(p, Assignment.empty())
    everyone = (*candidates, *spare.values())
    every_column = np.array([*columns.tolist(), *(index[name] for name in spare)], dtype=np.int64)
    reasons = {planning.pending[m].key: _unhostable_reason(agg, c, (columns, companions), candidates,
                                                           (every_column, everyone), after)
               for c in item_set.unhostable for m in p.members[c]}
    new_nodes = list(added.new)
    names = {n.name for n in nodes}
    on_node = []
    for b in result.bins:
        candidate = candidates[b.offer]
        name = _free_name(candidate.node_pool.name, names)
        names.add(name)
        new_nodes.append(NewNode(name, candidate, ()))
        on_node.append((b, name))
    intended = _level_order(on_node, item_set.cls, item_set.pinned, p.members, planning.pending)
    return _Round(_Added(tuple(new_nodes)), tuple(intended), result.bound, result.cost, result.greedy_cost,
                  result.status, reasons)


def _unhostable_reason(agg: Aggregation, c: int, offered: tuple[np.ndarray, Sequence[np.ndarray]],
                       candidates: Sequence[NodeTemplate], every: tuple[np.ndarray, Sequence[NodeTemplate]],
                       after: After) -> str:
    """Why no new node can host class ``c``: the NodePools whose nodes could are at their limits;
    their minValues are not met among the instance types compatible with it (it fits some
    template, candidates' and their alternatives' alike, but no candidate with all of its
    alternatives); or the kube-scheduler's message over the existing nodes and the templates.
    ``offered`` is the candidates' columns and their companions' (``items_of``), ``every`` the
    columns of every template and whose they are."""
    eligible = agg.problem.eligible
    hosts = np.nonzero(with_companions(eligible, *offered)[c])[0]
    if len(hosts):
        pools = ", ".join(sorted({candidates[k].node_pool.name for k in hosts.tolist()}))
        return f"no new node can host it: the NodePools whose nodes could ({pools}) are at their spec.limits"
    columns, owners = every
    single = [owners[k] for k in np.nonzero(eligible[c, columns])[0].tolist()]
    minded = sorted({o.node_pool.name for o in single if o.node_pool.min_values})
    if minded:
        keys = sorted({key for o in single for key in o.node_pool.min_values})
        return (f"no new node can host it: pod didn’t schedule because NodePool couldn’t meet minValues requirements, "
                f"minValues requirement is not met for label(s) {keys} (NodePool {', '.join(minded)})")
    return f"no new node can host it: {explain(agg, c, after)}"


def _level_order(on_node: Sequence[tuple[Bin, str]], cls: np.ndarray, pinned: np.ndarray,
                 members: tuple[tuple[int, ...], ...], pending: tuple[Pod, ...]) -> list[tuple[str, str]]:
    """(pod key, node) for the pods of the bins, in an order that fills the domains of a class
    level by level (the k-th pod of every domain before the (k+1)-th of any), as a spread
    replayed pod by pod needs."""
    taken = np.zeros(len(members), dtype=np.int64)
    rank: dict[tuple[int, int], int] = {}
    ranked: list[tuple[int, int, str, str]] = []
    for b, node in on_node:
        for i in np.nonzero(b.counts)[0].tolist():
            c, d, n = int(cls[i]), int(pinned[i]), int(b.counts[i])
            for m in members[c][int(taken[c]): int(taken[c]) + n]:
                level = rank.get((c, d), 0)
                rank[(c, d)] = level + 1
                ranked.append((level, len(ranked), pending[m].key, node))
            taken[c] += n
    return [(pod, node) for _, _, pod, node in sorted(ranked)]


def _free_name(pool: str, names: set[str]) -> str:
    """The name of a new node of NodePool ``pool``: ``<nodePool>-<n>``, the first free n from 1."""
    n = 1
    while f"{pool}-{n}" in names:
        n += 1
    return f"{pool}-{n}"


def _with_provision(planned: Planned, added: _Added, first: _Round | None, reasons: dict[str, str],
                    rounds: int, unused: tuple[str, ...]) -> Planned:
    """The plan with its provisioning summary; each pod left out says why, and why each NodePool
    not used (``unused``: static, or minValues the catalogue cannot meet) is not."""
    plan = planned.plan
    pods_on: dict[str, list[str]] = {}
    for p in plan.placements:
        pods_on.setdefault(p.node, []).append(f"{p.namespace}/{p.name}")
    nodes = tuple(replace(n, pods=tuple(pods_on.get(n.name, ()))) for n in added.new)
    cost = sum(n.template.price for n in nodes)
    missed = first is not None and any(f"{u.namespace}/{u.name}" in first.placing for u in plan.unplaced)
    if first is None:  # nothing needed new nodes (or nothing could use them): none is the cheapest
        bound: int | None = cost
    else:
        bound = None if first.bound is None or missed else min(cost, int(first.bound))
    greedy_cost = 0 if first is None else first.greedy_cost
    status = "optimal" if first is None else first.status
    unplaced = tuple(u if u.left_to_default_scheduler else
                     replace(u, reasons=(*u.reasons, *_at(reasons, f"{u.namespace}/{u.name}"), *unused))
                     for u in plan.unplaced)
    provision_summary = Provision(nodes, cost, bound, greedy_cost, status, rounds)
    return replace(planned, plan=replace(plan, unplaced=unplaced, provision=provision_summary))


def _at(reasons: dict[str, str], key: str) -> tuple[str, ...]:
    return (reasons[key],) if key in reasons else ()
