"""The pods the existing nodes cannot take, as the provisioning model's items and offers.

The snapshot is aggregated once more with a *template node* per offering (the node as it would
register once ready: the NodePool's labels and taints, the offering's zone and capacity type,
its allocatable net of overhead and DaemonSet pods) beside the existing nodes, whose pods (the
running ones and those stage A placed) count as bound. A pod class eligible on a template
passes every filter there, so the items inherit every rule the model checks per node.
Inter-pod rules across nodes become:

* a DoNotSchedule spread over a key the templates share (a zone): the class's pods are dealt out
  to the domains one at a time, to the least-filled domain that keeps the skew (existing pods
  counted), and each share is an item pinned to its domain;
* a gang with a topology key: all its classes pinned to the one domain where the greedy's nodes
  for it cost least;
* required anti-affinity of a class with itself, or a spread, over a key each template holds
  alone (the hostname): at most one pod (``maxSkew`` pods) of the class per new node;
* NodePool ``minValues``: a class may use an offer only when it is eligible on the offer's
  alternatives too (``kube.capacity.NodeTemplate.alternatives``: the other instance types the
  NodeClaim lists), as Karpenter keeps minValues among the instance types compatible with a pod;
* NodePool weight: a class's items may use only the offers of the highest-weight NodePools that
  have an offer able to host it and room under their limits for one more node (Karpenter tries
  NodePools by decreasing weight); pods a NodePool's limits leave out go to the next one in the
  following round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.capacity import NodeTemplate
from kubeplace.kube.karpenter import NODEPOOL_LABEL
from kubeplace.kube.objects import Node, NodeClaim, NodePool
from kubeplace.models.aggregate import Aggregation
from kubeplace.models.problem import UNCAPPED, BoolArray, IntArray, Problem, Spread
from kubeplace.solver.cutting_stock import UNLIMITED, Items, Offers, cost_of, greedy_bins


@dataclass(frozen=True)
class ItemSet:
    """The items, and which class and domain pin each stands for."""

    items: Items
    cls: IntArray  # (I,) the pod class of the item
    pinned: IntArray  # (I,) the domain it is pinned to, -1 for none
    unhostable: tuple[int, ...]
    """Classes no offer can host at all."""


def offers_of(candidates: Sequence[NodeTemplate], problem: Problem, columns: IntArray, pools: Sequence[NodePool],
              room: Mapping[str, Mapping[str, int]]) -> Offers:
    """The offers of ``candidates`` (template nodes at ``columns`` of ``problem``)."""
    limit_names = sorted({name for pool in pools for name in pool.limits})
    pool_index = {pool.name: k for k, pool in enumerate(pools)}
    counted = np.array([[1 if name == "nodes" else c.instance_type.capacity.get(name, 0) for name in limit_names]
                        for c in candidates], dtype=np.int64).reshape(len(candidates), len(limit_names))
    rooms = np.array([[room.get(pool.name, {}).get(name, UNLIMITED) for name in limit_names] for pool in pools],
                     dtype=np.int64).reshape(len(pools), len(limit_names))
    return Offers(problem.capacity[columns] - problem.used[columns],
                  np.array([c.offering.price for c in candidates], dtype=np.int64),
                  np.array([pool_index[c.node_pool.name] for c in candidates], dtype=np.int64), counted,
                  np.maximum(rooms, 0))


def pool_room(pools: Sequence[NodePool], claims: Sequence[NodeClaim], nodes: Sequence[Node],
              added: Sequence[NodeTemplate]) -> dict[str, dict[str, int]]:
    """What each NodePool's limits leave: the limit less its NodeClaims' capacity, the allocatable
    of its labelled nodes no claim launched (as ``kube.karpenter.check_limits`` counts them) and
    the capacity of the nodes this plan adds."""
    claimed = {claim.node_name for claim in claims if claim.node_name}
    holdings = [(claim.node_pool, claim.capacity) for claim in claims]
    holdings += [(node.labels.get(NODEPOOL_LABEL, ""), node.allocatable) for node in nodes if node.name not in claimed]
    holdings += [(c.node_pool.name, c.instance_type.capacity) for c in added]
    used: dict[str, dict[str, int]] = {}
    for owner, amounts in holdings:
        total = used.setdefault(owner, {"nodes": 0})
        total["nodes"] += 1
        for resource, amount in amounts.items():
            total[resource] = total.get(resource, 0) + amount
    return {pool.name: {name: limit - used.get(pool.name, {}).get(name, 0) for name, limit in pool.limits.items()}
            for pool in pools if pool.limits}


def items_of(agg: Aggregation, columns: IntArray, candidates: Sequence[NodeTemplate], offers: Offers,
             companions: Sequence[IntArray] = ()) -> ItemSet:
    """The classes of ``agg`` as items over the template columns (see the module's text);
    ``companions[j]`` are the columns of offer j's alternatives (none without minValues)."""
    p = agg.problem
    allowed = offers.within_room(offers.room)  # a NodePool at its limits launches nothing: the next one does
    weights = np.array([c.node_pool.weight for c in candidates], dtype=np.int64)
    eligible = _by_weight(with_companions(p.eligible, columns, companions) & allowed[None, :], weights)
    most = _most_per_node(p, columns)
    unhostable = tuple(c for c in range(p.n_classes) if not eligible[c].any())
    shares: dict[int, list[tuple[int, int]]] = {c: [(-1, int(p.count[c]))] for c in range(p.n_classes)}
    domain_of: dict[int, IntArray] = {}
    for spread in p.spreads:
        if set(spread.carriers) <= set(spread.counted) and _shared(spread.domain[columns]):
            dealt = _dealt(p, spread, columns, eligible)
            for c, parts in dealt.items():
                if c not in domain_of:
                    shares[c], domain_of[c] = parts, spread.domain[columns]
    for gang in p.gangs:
        if gang.domain is not None and _shared(gang.domain[columns]):
            domain = gang.domain[columns]
            best = _cheapest_domain(p, gang.classes, domain, eligible, most, offers)
            for c in gang.classes:
                shares[c], domain_of[c] = [(best, int(p.count[c]))], domain
    cls, pinned, rows = [], [], []
    for c in range(p.n_classes):
        if c in unhostable:
            continue
        for d, n in shares[c]:
            if n <= 0:
                continue
            cls.append(c)
            pinned.append(d)
            rows.append(eligible[c] & (domain_of[c] == d) if d != -1 else eligible[c])
    cls_array = np.array(cls, dtype=np.int64)
    counts = [n for c in range(p.n_classes) if c not in unhostable for _, n in shares[c] if n > 0]
    items = Items(p.demand[cls_array].reshape(len(cls), p.demand.shape[1]), np.array(counts, dtype=np.int64),
                  p.weight[cls_array], most[cls_array],
                  np.array(rows, dtype=np.bool_).reshape(len(cls), len(columns)))
    return ItemSet(items, cls_array, np.array(pinned, dtype=np.int64), unhostable)


def with_companions(eligible: BoolArray, columns: IntArray, companions: Sequence[IntArray]) -> BoolArray:
    """(K, J) each class's eligibility on the offers at ``columns``, and on all of each offer's
    companion columns."""
    out = eligible[:, columns].copy()
    for j, others in enumerate(companions):
        if len(others):
            out[:, j] &= eligible[:, others].all(axis=1)
    return out


def _by_weight(eligible: BoolArray, weight: IntArray) -> BoolArray:
    """Each class's eligible offers of the highest NodePool weight among them."""
    out = eligible.copy()
    for c in range(eligible.shape[0]):
        if eligible[c].any():
            out[c] &= weight == weight[eligible[c]].max()
    return out


def _shared(domain: IntArray) -> bool:
    """Whether some domain holds two templates (a zone), not one each (a hostname)."""
    present = domain[domain >= 0]
    return len(present) > len(np.unique(present))


def _most_per_node(p: Problem, columns: IntArray) -> IntArray:
    """(K,) most pods of each class on one new node: 1 for a class in a required anti-affinity
    with itself over a per-node key, ``maxSkew`` for a spread over one."""
    most = np.full(p.n_classes, UNCAPPED, dtype=np.int64)
    for exclusion in p.exclusions:
        if not _shared(exclusion.domain[columns]):
            for c in set(exclusion.carriers) & set(exclusion.matched):
                most[c] = 1
    for spread in p.spreads:
        if not _shared(spread.domain[columns]):
            for c in spread.carriers:
                most[c] = min(int(most[c]), spread.max_skew)
    for cap in p.group_caps:
        if cap.domain is None and len(cap.classes) == 1:
            c = cap.classes[0]
            most[c] = min(int(most[c]), int(cap.cap[columns].min(initial=UNCAPPED)))
    return most


def _dealt(p: Problem, spread: Spread, columns: IntArray, eligible: BoolArray) -> dict[int, list[tuple[int, int]]]:
    """The carriers' pods dealt to the domains one at a time: to the least-filled domain with an
    offer for the class, while that keeps the skew within ``maxSkew`` of the least-filled
    domain of all (fewer domains than ``minDomains``: of zero). Pods that cannot be dealt are
    pinned to -2 (no domain: not provisioned)."""
    counts = spread.bound.astype(np.int64).copy()
    domain = spread.domain[columns]
    out: dict[int, list[tuple[int, int]]] = {}
    for c in spread.carriers:
        open_domains = np.unique(domain[eligible[c] & (domain >= 0)])
        dealt = np.zeros(spread.n_domains, dtype=np.int64)
        left = int(p.count[c])
        while left > 0 and len(open_domains):
            d = int(open_domains[np.argmin(counts[open_domains])])
            counts[d] += 1
            floor = 0 if spread.n_domains < spread.min_domains else int(counts.min())
            if counts[d] - floor > spread.max_skew:
                counts[d] -= 1
                break
            dealt[d] += 1
            left -= 1
        out[c] = [(d, int(n)) for d, n in enumerate(dealt.tolist()) if n > 0] + ([(-2, left)] if left else [])
    return out


def _cheapest_domain(p: Problem, classes: Sequence[int], domain: IntArray, eligible: BoolArray, most: IntArray,
                     offers: Offers) -> int:
    """The domain where the greedy's new nodes for the gang's pods cost least (placing the most
    pods first); -2 when no domain has an offer for all of them."""
    best, best_key = -2, (0, 0)
    cls = np.array(list(classes), dtype=np.int64)
    for d in np.unique(domain[domain >= 0]).tolist():
        rows = eligible[cls] & (domain == d)[None, :]
        if not rows.any(axis=1).all():
            continue
        items = Items(p.demand[cls], p.count[cls], p.weight[cls], most[cls], rows)
        bins = greedy_bins(items, offers)
        placed = sum(int(b.counts.sum()) for b in bins)
        key = (-placed, cost_of(bins, offers))
        if best == -2 or key < best_key:
            best, best_key = int(d), key
    return best
