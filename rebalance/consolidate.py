"""``rebalance --consolidate``: which nodes to remove so that the cost per hour after moving their
pods is least, then the fewest evictions.

A node's price is its ``kubeplace.io/price-per-hour`` annotation when it has one, else the
catalogue's offering its labels name, as Karpenter labels its nodes: instance type
(``node.kubernetes.io/instance-type``), zone (``topology.kubernetes.io/zone``) and capacity type
(``karpenter.sh/capacity-type``). A node without a price is kept, and said so.

A node may go only when its owner can remove it (``rebalance.ownership``): a Karpenter NodeClaim,
or a node group the user opts in with ``--node-group``; never a control-plane node. It may go
unless: it has no price; it is annotated ``karpenter.sh/do-not-disrupt: "true"``, or one of its
running pods is protected by that annotation (``rebalance.do_not_disrupt``; DaemonSet and mirror
pods too, as in Karpenter); one of its pods may not move (``rebalance.movable``: bare, local
storage, system-critical, inter-pod rules the move model does not model...; the pods that go
with the node, DaemonSet, mirror and static pods, do not count); its NodePool's
``consolidationPolicy`` is ``WhenEmpty`` and it runs pods; its NodePool's ``consolidateAfter``
is ``Never``, or has not passed since its NodeClaim's last pod event (or initialization) at
``now``, as Karpenter's ``Consolidatable`` condition (``kube.karpenter_disruption``). A node labelled
``karpenter.sh/nodepool`` with a NodePool the input does not have is refused as bad input.

The model is the move model (``rebalance.model``: movable pods in classes, capacity and host-port
rows per node, ``--max-moves`` and PodDisruptionBudgets on the moves) with one removal binary
``r[i]`` per node that may go: the pods of a removed node all move (``y[c, i] = 0``), those of a
kept node stay (``y[c, i] = x0[c, i]``), and each NodePool disruption budget (``nodes`` a count or
a percentage of the NodePool's nodes as Karpenter counts them, rounded up as Karpenter rounds it,
less those already being disrupted (:func:`_pool_sizes`); for its ``reasons``,
``Empty`` for a node whose pods all go with it, else ``Underutilized``; a budget with a
``schedule`` only while active at ``now``, as Karpenter's ``Budget.IsActive``) bounds the removals
it covers. Stage 1 minimises the cost per hour of the
nodes kept; stage 2 keeps that cost and minimises the evictions. The bound on the cost after is
the higher of the backend's proved bound of stage 1 and :func:`capacity_bound` (an LP), over every
set of removals the model admits.

With ``--replace`` the provisioning's candidates (``kube.capacity.candidate_nodes``: a template
node per NodePool x offering, as it would register) join the model as nodes to buy, one binary
each; the pods of the nodes its answer removes are then planned by ``plan --provision`` on the
nodes left, which buys the new nodes itself (weights and limits included) and verifies. The
cheaper of that answer and the removal-only one is kept.

Every answer is then planned again as ``plan`` plans: the pods of the removed nodes pending on the
nodes that remain, the model's targets as a seed, through the independent verifier. When that
plan leaves a pod out or the verifier refuses it, that set of removals is cut off and the model
solved again (a few rounds), so an answer is only ever one the plan's rules and verifier accept.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kubeplace.kube.capacity import NodeTemplate, candidate_nodes
from kubeplace.kube.catalogue import PRICE_UNIT, InstanceType
from kubeplace.kube.errors import InputError
from kubeplace.kube.karpenter import CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, ZONE_LABEL
from kubeplace.kube.karpenter_disruption import budget_active, not_consolidatable
from kubeplace.kube.objects import Node, NodePool, Pod
from kubeplace.kube.price import parse_price
from kubeplace.models.config import Configuration, Profile
from kubeplace.models.formulation.capacity_rows import (
    BuyableTemplates,
    Pairs,
    RemovableNodes,
    bought_rows,
    removal_rows,
)
from kubeplace.models.linear import INF
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import NewNode, Provision
from kubeplace.plan.provision import make_provision_plan
from kubeplace.rebalance.cluster_state import ClusterState
from kubeplace.rebalance.do_not_disrupt import DO_NOT_DISRUPT, node_protected, protection
from kubeplace.rebalance.layout import Layout, build_layout
from kubeplace.rebalance.model import MoveModel, build_moves
from kubeplace.rebalance.movable import DAEMONSET, DELETING, MIRROR, NOT_RUNNING, STATIC, Rules
from kubeplace.rebalance.ownership import CAPI, KARPENTER, Owner, owner_of, removal_command, skip_reason
from kubeplace.rebalance.solve_moves import REPLACEMENT_NOTE, Move, Settings, run
from kubeplace.solver.budget import Budget
from kubeplace.solver.shares import (
    CONSOLIDATE_COST_SHARE,
    CONSOLIDATE_EVICTIONS_SHARE,
    CONSOLIDATE_REPLACE_SHARE,
    CONSOLIDATE_REPLAN_MIN_SECONDS,
    CONSOLIDATE_ROUND_MIN_SECONDS,
)

PRICE_ANNOTATION = "kubeplace.io/price-per-hour"
GOES_WITH_NODE = frozenset({MIRROR, STATIC, DAEMONSET, DELETING, NOT_RUNNING})
"""Exclusions of pods that never block a node's removal: they go (or are gone) with it."""
EMPTY, UNDERUTILIZED = "Empty", "Underutilized"
CUT_ROUNDS = 5
BOUND_KIND = ("the higher of the model's proved MIP bound (exact when status is optimal) and the capacity LP "
              "bound; with --replace, the model buys at most one node of each offering")


@dataclass(frozen=True)
class Drain:
    """A node to remove: cordoned, its pods evicted, then removed through its owner
    (``rebalance.ownership``): its NodeClaim deleted, its Cluster API Machine marked and its
    MachineDeployment scaled down, or left cordoned with ``remove``, the command that removes its
    machine from its node group. Never its Node deleted."""

    node: str
    node_pool: str
    node_claim: str
    price: int
    reason: str
    pods: tuple[str, ...]
    node_group: str = ""
    """``KIND/NAME`` of an opted-in group (``--node-group``); "" for a Karpenter node."""
    machine: str = ""
    """Cluster API: its Machine, ``NAMESPACE/NAME``."""
    remove: str = ""
    """Another group's: the command that removes its machine from the group (printed, not run)."""

    def to_dict(self) -> dict[str, Any]:
        extra = {key: value for key, value in (("nodeGroup", self.node_group), ("machine", self.machine),
                                               ("removeWith", self.remove)) if value}
        return {"node": self.node, "nodePool": self.node_pool, "nodeClaim": self.node_claim,
                "pricePerHour": self.price / PRICE_UNIT, "reason": self.reason, "pods": list(self.pods), **extra}


@dataclass(frozen=True)
class Consolidation:
    drain: tuple[Drain, ...]
    moves: tuple[Move, ...]
    kept: tuple[tuple[str, str], ...]
    """(node, why it may not go) for every node that may not."""
    cost_before: int
    cost_after: int
    bound: int
    status: str
    verified: bool
    seconds: float
    notes: tuple[str, ...] = ()
    added: tuple[NewNode, ...] = ()
    """With ``--replace``: the new nodes the provisioning chooses for the pods the others cannot take."""

    def to_dict(self) -> dict[str, Any]:
        unit = PRICE_UNIT
        added = Provision(self.added, sum(n.template.price for n in self.added), None, 0, "").to_dict()["provision"]
        return {"moves": [m.to_dict() for m in self.moves],
                "consolidate": {"drain": [d.to_dict() for d in self.drain], "add": added,
                                "kept": [{"node": n, "why": w} for n, w in self.kept],
                                "costPerHourBefore": self.cost_before / unit,
                                "costPerHourAfter": self.cost_after / unit, "bound": self.bound / unit,
                                "boundKind": BOUND_KIND},
                "summary": {"nodes_removed": len(self.drain), "pods_moved": len(self.moves),
                            "status": self.status, "verified": self.verified, "seconds": round(self.seconds, 3)},
                "notes": list(self.notes)}


def node_price(node: Node, annotations: Mapping[str, str], catalogue: Sequence[InstanceType]) -> tuple[int | None, str]:
    """The node's price per hour (billionths) and how it was found, or None and why not."""
    if PRICE_ANNOTATION in annotations:
        field = f"metadata.annotations[{PRICE_ANNOTATION}]"
        try:
            price = parse_price(annotations[PRICE_ANNOTATION], field, text=True)
        except InputError as error:
            raise error.located(file=node.source or "the cluster", obj=f"Node {node.name}") from None
        return price, f"annotation {PRICE_ANNOTATION}"
    labels = [node.labels.get(key, "") for key in (INSTANCE_TYPE_LABEL, ZONE_LABEL, CAPACITY_TYPE_LABEL)]
    missing = [key for key, value in zip((INSTANCE_TYPE_LABEL, ZONE_LABEL, CAPACITY_TYPE_LABEL), labels, strict=True)
               if not value]
    if missing:
        return None, f"no price: no label {', '.join(missing)} and no annotation {PRICE_ANNOTATION}"
    name, zone, capacity_type = labels
    for instance_type in catalogue:
        if instance_type.name != name:
            continue
        for offering in instance_type.offerings:
            if offering.zone == zone and offering.capacity_type == capacity_type:
                return offering.price, f"catalogue {name} {zone} {capacity_type}"
    return None, f"no price: the catalogue has no offering {name} {zone} {capacity_type}"


@dataclass(frozen=True)
class _Candidates:
    """The nodes that may go (problem node indices), their prices, reasons and NodePools."""

    nodes: tuple[int, ...]
    price: Mapping[int, int]
    reason: Mapping[int, str]
    pool: Mapping[int, str]
    owner: Mapping[int, Owner]
    kept: tuple[tuple[str, str], ...]
    cost_before: int
    notes: tuple[str, ...]


def _blocking(state: ClusterState, layout: Layout, now: datetime.datetime) -> dict[str, str]:
    """Node name -> why a pod on it may not move (the first such pod). A running pod that
    ``karpenter.sh/do-not-disrupt`` protects (``rebalance.do_not_disrupt``) blocks its node
    whatever it is, DaemonSet and mirror pods included, as in Karpenter
    (``ValidatePodsDisruptable``); a pod being deleted does not."""
    out: dict[str, str] = {}
    for pod, why in layout.excluded:
        if why not in GOES_WITH_NODE and pod.node_name:
            out.setdefault(pod.node_name, f"pod {pod.key} may not move: {why}")
    for pod in state.snapshot.bound:
        raw = state.raw_pods.get(pod.key, {})
        value = protection(pod.annotations, raw.get("status") or {}, now) if not pod.deleting else ""
        if pod.node_name and value:
            out.setdefault(pod.node_name, f'pod {pod.key} is annotated {DO_NOT_DISRUPT}: "{value}"')
    return out


def _candidates(state: ClusterState, layout: Layout, catalogue: Sequence[InstanceType],
                node_groups: frozenset[str], now: datetime.datetime) -> _Candidates:
    snap = state.snapshot
    pools = {pool.name: pool for pool in snap.node_pools}
    claims = {claim.name: claim for claim in snap.node_claims}
    blocking = _blocking(state, layout, now)
    names = layout.problem.node_names
    index = {name: i for i, name in enumerate(names)}
    runs = layout.x0.sum(axis=0)
    nodes, price, reason, pool_of, owner_of_node, kept, notes = [], {}, {}, {}, {}, [], []
    groups_seen: set[str] = set()
    cost = 0
    for node in snap.nodes:
        annotations = state.node_annotations.get(node.name, {})
        pool_name = node.labels.get(NODEPOOL_LABEL, "")
        if pool_name and pool_name not in pools:
            raise InputError(f"label {NODEPOOL_LABEL} names NodePool {pool_name!r}, which the input does not have",
                             file=node.source or snap.source or "the cluster", obj=f"Node {node.name}",
                             field=f"metadata.labels[{NODEPOOL_LABEL}]")
        amount, how = node_price(node, annotations, catalogue)
        owner = owner_of(node, annotations, snap.node_claims, state.machines)
        if isinstance(owner, Owner):
            groups_seen.add(owner.group)
        skip = skip_reason(node, annotations, owner, node_groups)
        if amount is None:
            kept.append((node.name, skip or how))
            continue
        cost += amount
        i = index.get(node.name)
        empty = i is None or int(runs[i]) == 0
        why = skip or _keep_reason(node, annotations, pools.get(pool_name), blocking, empty)
        if not why and isinstance(owner, Owner) and owner.kind == KARPENTER:  # timed by the claim that owns it
            why = _being_disrupted(state, node.name, owner.claim) or not_consolidatable(
                pools[pool_name], claims[owner.claim], now)
        if why or i is None or not isinstance(owner, Owner):
            kept.append((node.name, why or "not in the model"))
            continue
        nodes.append(i)
        price[i], reason[i], pool_of[i] = amount, EMPTY if empty else UNDERUTILIZED, pool_name
        owner_of_node[i] = owner
    notes += [f"--node-group {group}: no node of the input belongs to it"
              for group in sorted(node_groups - groups_seen)]
    return _Candidates(tuple(nodes), price, reason, pool_of, owner_of_node, tuple(kept), cost, tuple(notes))


def _being_disrupted(state: ClusterState, node: str, claim: str) -> str:
    """Why Karpenter is already removing the node (``ValidateNodeDisruptable``: "node is deleting or
    marked for deletion"): its Node or NodeClaim being deleted, or the node tainted
    ``karpenter.sh/disrupted``; "" otherwise (a node not Ready may still go)."""
    why = state.disrupting.get(node, "") or state.disrupting.get(f"NodeClaim/{claim}", "")
    return f"Karpenter is removing it already ({why})" if why and why != "not Ready" else ""


def _keep_reason(node: Node, annotations: Mapping[str, str], pool: NodePool | None, blocking: Mapping[str, str],
                 empty: bool) -> str:
    if node_protected(annotations):
        return f'annotated {DO_NOT_DISRUPT}: "true"'
    if node.name in blocking:
        return blocking[node.name]
    if pool is not None and pool.consolidation_policy == "WhenEmpty" and not empty:
        return f"NodePool {pool.name} consolidates only empty nodes (consolidationPolicy WhenEmpty)"
    return ""


def _pool_sizes(state: ClusterState) -> dict[str, tuple[int, int]]:
    """NodePool -> the nodes its budgets' percentages are of, and those of them already being
    disrupted, as Karpenter counts them (``BuildDisruptionBudgetMapping``): the nodes of a NodeClaim
    (managed) that is initialized and whose instance is not terminating; disrupted, those not
    Ready, being deleted (the Node or its NodeClaim) or tainted ``karpenter.sh/disrupted``."""
    snap = state.snapshot
    claims = {claim.name: claim for claim in snap.node_claims}
    sizes: dict[str, tuple[int, int]] = {}
    for node in snap.nodes:
        owner = owner_of(node, state.node_annotations.get(node.name, {}), snap.node_claims, state.machines)
        if not isinstance(owner, Owner) or owner.kind != KARPENTER:
            continue  # not managed: not counted
        claim = claims[owner.claim]
        if claim.initialized_at is None or state.disrupting.get(f"NodeClaim/{claim.name}") == "terminating":
            continue
        disrupted = node.name in state.disrupting or f"NodeClaim/{claim.name}" in state.disrupting
        total, busy = sizes.get(owner.name, (0, 0))
        sizes[owner.name] = (total + 1, busy + int(disrupted))
    return sizes


@dataclass
class _Model:
    moves: MoveModel
    r: np.ndarray
    nodes: tuple[int, ...]
    goal: list[tuple[int, int]]


def _build(layout: Layout, cands: _Candidates, state: ClusterState, settings: Settings, now: datetime.datetime,
           offers: Mapping[int, NodeTemplate] = {}) -> _Model:
    """The move model with a removal binary per node that may go and, for ``offers`` (the
    provisioning's candidates by the index of their template node), a binary per offering: its
    template holds pods only when bought, within its allocatable."""
    model = build_moves(layout, settings.budgets, max(layout.problem.n_nodes, 1), spread=False)
    lb = model.lb
    nodes = cands.nodes
    r = lb.add_vars(np.zeros(len(nodes), np.int64), np.ones(len(nodes), np.int64))
    r_of = {i: int(v) for i, v in zip(nodes, r.tolist(), strict=True)}
    count = layout.x0.sum(axis=1)
    pairs = Pairs(layout.agg_class[model.pair_cls], model.pair_node, model.y, count[model.pair_cls],
                  layout.problem.demand)
    removal_rows(lb, pairs, RemovableNodes(np.array(nodes, dtype=np.int64), r,
                                           layout.x0[model.pair_cls, model.pair_node]))
    sizes = _pool_sizes(state)
    for pool in state.snapshot.node_pools:
        for budget in pool.budgets:
            if not budget_active(budget, now):
                continue
            covered = [r_of[i] for i in nodes if cands.pool[i] == pool.name
                       and (not budget.reasons or cands.reason[i] in budget.reasons)]
            if covered:
                total, disrupted = sizes.get(pool.name, (0, 0))
                lb.add_row(np.array(covered), np.ones(len(covered), np.int64), -INF,
                           max(budget.allowed(total) - disrupted, 0))
    goal = [(r_of[i], -cands.price[i]) for i in nodes]
    b = lb.add_vars(np.zeros(len(offers), np.int64), np.ones(len(offers), np.int64))
    templates = np.array(list(offers), dtype=np.int64)
    bought_rows(lb, pairs, BuyableTemplates(templates, b, layout.free[templates]))
    goal += [(int(v), t.price) for t, v in zip(offers.values(), b.tolist(), strict=True)]
    return _Model(model, r, nodes, goal)


@dataclass(frozen=True)
class _Answer:
    removed: tuple[int, ...]
    moves: tuple[Move, ...]
    added: tuple[NewNode, ...]
    cost_after: int


Replan = Callable[[list[int], np.ndarray], "_Answer | None"]


def _search(model: _Model, settings: Settings, budget: Budget, before: int,
            replan: Replan) -> tuple[_Answer | None, str, int]:
    """Stage 1 (cost), stage 2 (evictions at that cost), then ``replan`` of the answer; an answer
    it refuses is cut off and the model solved again. Returns the verified answer (None: none),
    the status and the bound on the cost after."""
    cuts: list[tuple[list[tuple[int, int]], int]] = []
    status, bound = "no answer", before
    for _ in range(CUT_ROUNDS):
        cut_round = budget.at_least(CONSOLIDATE_ROUND_MIN_SECONDS)
        first = run(model.moves, model.goal, settings, cut_round.part(CONSOLIDATE_COST_SHARE), rows=cuts,
                    hint=model.moves.hint())
        status = first.status.value
        if first.values is None:
            return None, status, bound
        if first.bound is not None:
            bound = max(0, before + int(np.floor(first.bound)))
        best = int(sum(c * int(first.values[v]) for v, c in model.goal))
        moves_goal = [(int(v), 1) for v in model.moves.m]
        second = run(model.moves, moves_goal, settings, cut_round.part(CONSOLIDATE_EVICTIONS_SHARE),
                     rows=[*cuts, (model.goal, best)], hint=first.values)
        values = second.values if second.values is not None else first.values
        removed = [i for i, v in zip(model.nodes, model.r.tolist(), strict=True) if int(values[v])]
        if not removed:
            return _Answer((), (), (), before), status, min(bound, before)
        answer = replan(removed, values)
        if answer is not None:
            return answer, status, min(bound, answer.cost_after)
        cuts.append(([(int(model.r[model.nodes.index(i)]), 1) for i in removed], len(removed) - 1))
    return None, f"{status} (no verified answer)", bound


def consolidate(state: ClusterState, catalogue: Sequence[InstanceType], rules: Rules, config: Configuration,
                profile: Profile, settings: Settings, replace_nodes: bool = False,
                node_groups: frozenset[str] = frozenset(), now: datetime.datetime | None = None) -> Consolidation:
    """The nodes to remove and the moves (see the module's text); with ``replace_nodes``, also
    the answers that add new nodes, the cheaper kept. Only nodes a NodeClaim owns may go, and
    those of the groups in ``node_groups`` (``KIND/NAME``, ``rebalance.ownership``). ``now``
    (default: the clock, UTC) is when consolidateAfter, the budgets' schedules and
    do-not-disrupt grace periods are judged."""
    started = time.monotonic()
    now = now or datetime.datetime.now(datetime.UTC)
    if replace_nodes and not state.snapshot.node_pools:
        raise InputError("--replace needs at least one karpenter.sh/v1 NodePool in the input", field="--replace")
    layout = build_layout(state, rules, config, profile)
    cands = _candidates(state, layout, catalogue, node_groups, now)
    notes = (*cands.notes, REPLACEMENT_NOTE)
    before = cands.cost_before
    if not cands.nodes:
        return Consolidation((), (), cands.kept, before, before, before, "no node may go", True,
                             time.monotonic() - started, notes)
    budget = Budget(started, settings.solver.time_limit)
    if replace_nodes:  # the same for the answer that adds nodes, after this one
        budget = budget.first(CONSOLIDATE_REPLACE_SHARE)
    model = _build(layout, cands, state, settings, now)

    def removal(removed: list[int], values: np.ndarray) -> _Answer | None:
        moves = _replanned(state, layout, removed, values, model, config, profile, settings,
                           budget.at_least(CONSOLIDATE_REPLAN_MIN_SECONDS))
        return None if moves is None else _Answer(tuple(removed), moves, (), before - sum(cands.price[i]
                                                                                          for i in removed))

    answer, status, bound = _search(model, settings, budget, before, removal)
    bound = min(max(bound, capacity_bound(layout, cands)), before if answer is None else answer.cost_after)
    result = _result(state, layout, cands, answer, status, bound, started, notes)
    if not replace_nodes:
        return result
    other = _replaced(state, catalogue, rules, config, profile, settings, notes, node_groups, now, budget)
    if other.cost_after < result.cost_after or (other.cost_after == result.cost_after
                                                and len(other.moves) < len(result.moves)):
        return replace(other, bound=min(other.bound, result.bound), seconds=time.monotonic() - started)
    return replace(result, bound=min(other.bound, result.bound), seconds=time.monotonic() - started)


def _result(state: ClusterState, layout: Layout, cands: _Candidates, answer: _Answer | None, status: str, bound: int,
            started: float, notes: tuple[str, ...]) -> Consolidation:
    before = cands.cost_before
    if answer is None or not answer.removed:
        return Consolidation((), (), cands.kept, before, before, min(bound, before), status, True,
                             time.monotonic() - started, notes)
    return Consolidation(_drains(state, layout, answer.removed, cands), answer.moves, cands.kept, before,
                         answer.cost_after, min(bound, answer.cost_after), status, True, time.monotonic() - started,
                         notes, answer.added)


def _replaced(state: ClusterState, catalogue: Sequence[InstanceType], rules: Rules, config: Configuration,
              profile: Profile, settings: Settings, notes: tuple[str, ...], node_groups: frozenset[str],
              now: datetime.datetime, budget: Budget) -> Consolidation:
    """The answer that may add nodes: the provisioning's candidates (one template node per
    NodePool x offering, as it would register) join the model as nodes to buy, at most one of
    each; the pods of the nodes it removes are then planned by ``plan --provision`` on the nodes
    left, which chooses the new nodes itself (NodePool weights and limits included) and verifies."""
    started = time.monotonic()
    budget = budget.from_now()
    snap = state.snapshot
    candidates = candidate_nodes(snap.node_pools, catalogue, snap.daemon_pods)
    templates = [c.to_node() for c in candidates]
    layout = build_layout(replace(state, snapshot=replace(snap, nodes=(*snap.nodes, *templates))), rules, config,
                          profile)
    cands = _candidates(state, layout, catalogue, node_groups, now)
    index = {name: i for i, name in enumerate(layout.problem.node_names)}
    offers = {index[t.name]: c for t, c in zip(templates, candidates, strict=True)}
    model = _build(layout, cands, state, settings, now, offers)
    before = cands.cost_before

    def provisioned(removed: list[int], values: np.ndarray) -> _Answer | None:
        gone = {layout.problem.node_names[i] for i in removed}
        moving = [p for p in layout.pods if p.node_name in gone]
        view = replace(snap, nodes=tuple(n for n in snap.nodes if n.name not in gone),
                       pending=tuple(replace(p, node_name="") for p in moving),
                       bound=tuple(p for p in snap.bound if p.node_name not in gone), reserved=())
        planned = make_provision_plan(view, catalogue, config, profile, settings.solver,
                                      budget=budget.at_least(CONSOLIDATE_REPLAN_MIN_SECONDS))
        target = {(p.namespace, p.name): p.node for p in planned.plan.placements}
        if planned.violations or any((p.namespace, p.name) not in target for p in moving):
            return None
        added = planned.plan.provision.nodes if planned.plan.provision is not None else ()
        moves = tuple(sorted((_move(p, target[(p.namespace, p.name)]) for p in moving),
                             key=lambda m: (m.source, m.namespace, m.name)))
        cost = before - sum(cands.price[i] for i in removed) + sum(n.template.price for n in added)
        return _Answer(tuple(removed), moves, added, cost)

    answer, status, bound = _search(model, settings, budget, before, provisioned)
    bound = min(max(bound, capacity_bound(layout, cands, offers)), before if answer is None else answer.cost_after)
    return _result(state, layout, cands, answer, f"{status} (replace)", bound, started, notes)


def capacity_bound(layout: Layout, cands: _Candidates, offers: Mapping[int, NodeTemplate] = {}) -> int:
    """A lower bound on the cost after by linear programming: the nodes that stay whatever
    (kept or unpriced) hold what they can of the movable pods' requests, and the rest is bought
    fractionally, per resource, from the nodes that may go (up to one each) and the ``offers``
    (any number), the cheapest per unit first; the highest of the resources' bounds. Eligibility,
    integrality and the resources' coupling are relaxed, so no answer costs less."""
    now = layout.requests(layout.x0)
    room = np.maximum(layout.free, now)
    variable = {*cands.nodes, *offers}
    fixed = [i for i in range(layout.problem.n_nodes) if i not in variable]
    need = now.sum(axis=0) - room[fixed].sum(axis=0)
    sources = [(cands.price[i], i, False) for i in cands.nodes] + [(t.price, o, True) for o, t in offers.items()]
    best = 0.0
    for r in range(len(layout.problem.resources)):
        left, cost = float(need[r]), 0.0
        for price, i, unlimited in sorted(sources, key=lambda s: s[0] / max(int(room[s[1], r]), 1)):
            if left <= 0 or room[i, r] <= 0:
                continue
            take = left if unlimited else min(left, float(room[i, r]))
            cost += price * take / float(room[i, r])
            left -= take
        if left <= 0:
            best = max(best, cost)
    fixed_cost = cands.cost_before - sum(cands.price[i] for i in cands.nodes)
    return fixed_cost + int(np.floor(best))


def _drains(state: ClusterState, layout: Layout, removed: Sequence[int], cands: _Candidates) -> tuple[Drain, ...]:
    names = layout.problem.node_names
    nodes = {node.name: node for node in state.snapshot.nodes}
    out = []
    for i in sorted(removed, key=lambda i: names[i]):
        pods = tuple(sorted(p.key for p in layout.pods if p.node_name == names[i]))
        owner = cands.owner[i]
        group = "" if owner.kind == KARPENTER else owner.group
        remove = removal_command(nodes[names[i]], owner) if group and owner.kind != CAPI else ""
        out.append(Drain(names[i], cands.pool[i], owner.claim, cands.price[i], cands.reason[i], pods, group,
                         owner.machine, remove))
    return tuple(out)


def _intended(layout: Layout, values: np.ndarray, model: _Model, removed: set[str]) -> list[tuple[str, str]]:
    """(pod key, node) of the model's answer for the pods of the removed nodes."""
    arrivals = np.maximum(model.moves.dense(values) - layout.x0, 0)
    names = layout.problem.node_names
    room = {c: [names[i] for i in np.nonzero(arrivals[c])[0] for _ in range(int(arrivals[c, i]))]
            for c in range(layout.n_classes)}
    out = []
    for k, pod in enumerate(layout.pods):
        targets = room[int(layout.pod_class[k])]
        if pod.node_name in removed and targets:
            out.append((pod.key, targets.pop()))
    return out


def _replanned(state: ClusterState, layout: Layout, removed: Sequence[int], values: np.ndarray, model: _Model,
               config: Configuration, profile: Profile, settings: Settings,
               budget: Budget) -> tuple[Move, ...] | None:
    """The moves of the plan of the removed nodes' pods on the nodes that remain, or None when
    that plan leaves one out or its verifier refuses it."""
    snap = state.snapshot
    gone = {layout.problem.node_names[i] for i in removed}
    moving = [p for p in layout.pods if p.node_name in gone]
    view = replace(snap, nodes=tuple(n for n in snap.nodes if n.name not in gone),
                   pending=tuple(replace(p, node_name="") for p in moving),
                   bound=tuple(p for p in snap.bound if p.node_name not in gone), reserved=())
    planned = make_plan(view, config, profile, replace(settings.solver, stop_when_placed=True),
                        intended=_intended(layout, values, model, gone), budget=budget)
    target = {(p.namespace, p.name): p.node for p in planned.plan.placements}
    if planned.violations or any((p.namespace, p.name) not in target for p in moving):
        return None
    return tuple(sorted((_move(p, target[(p.namespace, p.name)]) for p in moving),
                        key=lambda m: (m.source, m.namespace, m.name)))


def _move(pod: Pod, target: str) -> Move:
    return Move(pod.namespace, pod.name, pod.uid, pod.node_name, target, f"drains {pod.node_name}",
                pod.owner_kind, pod.scheduler_name)
