"""Which new nodes to buy for the pods the existing nodes cannot take: a cutting-stock problem.

Items are groups of interchangeable pending pods (a pod class, possibly pinned to one zone);
offers are the nodes that could be launched (one per NodePool x instance type x zone x capacity
type, as they would register). A *bin* is one new node: an offer and how many pods of each item
it holds. Two answers are computed:

* the greedy (``greedy_bins``), as Karpenter's provisioner packs: pods sorted by decreasing CPU
  then memory, each put first-fit into an open node whose remaining instance types can still
  hold it, else into a new node open to every type that holds it; at the end each node takes
  the cheapest type that fits what it holds;
* the exact model (``solver.cutting_stock_columns``): the covering LP over node patterns (Gilmore-Gomory),
  its Farley bound, and a MIP over the generated patterns started from the greedy's nodes.

Prices are integers (billionths of the currency per hour); every answer says how many pods of
each item it leaves out (NodePool limits, or no offer can host them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kubeplace.models.problem import BoolArray, IntArray

UNLIMITED = 1 << 62
"""What a NodePool without a limit on a resource has room for."""


@dataclass(frozen=True)
class Offers:
    """The nodes that could be launched, J of them."""

    capacity: IntArray  # (J, R) allocatable left for pending pods
    price: IntArray  # (J,) billionths of the currency per hour
    pool: IntArray  # (J,) index of its NodePool
    counted: IntArray  # (J, L) what one node counts against its NodePool's limits
    room: IntArray  # (P, L) what each NodePool's limits leave (UNLIMITED where it has none)

    @property
    def n_offers(self) -> int:
        return int(self.price.shape[0])

    def within_room(self, room: IntArray) -> BoolArray:
        """(J,) the offers one more node of which the NodePools' ``room`` still allows."""
        return np.asarray((self.counted <= room[self.pool]).all(axis=1), dtype=np.bool_)


@dataclass(frozen=True)
class Items:
    """Groups of interchangeable pods, I of them."""

    demand: IntArray  # (I, R) requests of one pod
    count: IntArray  # (I,) pods
    weight: IntArray  # (I,) how much placing one pod matters (priority); >= 1
    most: IntArray  # (I,) most pods of the item on one node (hostname anti-affinity, spread)
    eligible: BoolArray  # (I, J) the offer's node passes every filter of the item's pods

    @property
    def n_items(self) -> int:
        return int(self.count.shape[0])


@dataclass(frozen=True)
class Bin:
    """One new node: the offer it is bought as and the pods of each item it holds."""

    offer: int
    counts: IntArray  # (I,)


@dataclass(frozen=True)
class Provisioning:
    bins: tuple[Bin, ...]
    cost: int
    greedy: tuple[Bin, ...]
    greedy_cost: int
    bound: float | None
    """Farley's lower bound on the cost of any set of new nodes placing as many pods (None when
    the LP did not finish)."""
    status: str
    """optimal (cost at the bound), feasible, or greedy (the exact model did not improve on it)."""
    iterations: int = 0
    columns: int = 0


def fit_counts(free: IntArray, demand: IntArray) -> IntArray:
    """(J,) how many pods of ``demand`` (R,) fit in each row of ``free`` (J, R); a resource not
    requested is not checked (the kubelet's rule)."""
    used = demand > 0
    if not used.any():
        return np.full(free.shape[0], UNLIMITED, dtype=np.int64)
    return np.asarray(np.asarray(np.maximum(free[:, used], 0) // demand[used], dtype=np.int64).min(axis=1),
                      dtype=np.int64)


def cost_of(bins: tuple[Bin, ...] | list[Bin], offers: Offers) -> int:
    return int(sum(int(offers.price[b.offer]) for b in bins))


def placed(bins: tuple[Bin, ...] | list[Bin], n_items: int) -> IntArray:
    total = np.zeros(n_items, dtype=np.int64)
    for b in bins:
        total += b.counts
    return total


def pod_order(items: Items) -> IntArray:
    """Karpenter's packing order: decreasing CPU, then memory (resources 0 and 1)."""
    cpu, memory = items.demand[:, 0], items.demand[:, 1] if items.demand.shape[1] > 1 else items.demand[:, 0]
    return np.asarray(np.lexsort((-memory, -cpu)), dtype=np.int64)


@dataclass
class _OpenNode:
    viable: BoolArray  # (J,) the offers that still hold everything it holds
    load: IntArray  # (R,)
    counts: IntArray  # (I,)


def greedy_bins(items: Items, offers: Offers) -> list[Bin]:
    """Karpenter's first-fit decreasing into new nodes, then the cheapest type that fits each."""
    open_nodes: list[_OpenNode] = []
    allowed = offers.within_room(offers.room)
    for i in pod_order(items).tolist():
        left = int(items.count[i])
        demand = items.demand[i]
        for node in open_nodes:
            if left == 0:
                break
            mask = node.viable & items.eligible[i]
            if not mask.any() or node.counts[i] >= items.most[i]:
                continue
            fit = np.minimum(fit_counts(offers.capacity - node.load, demand), items.most[i] - node.counts[i])
            n = min(left, int(fit[mask].max()))
            if n > 0:
                node.viable = mask & (fit >= n)
                node.load = node.load + n * demand
                node.counts[i] += n
                left -= n
        mask = items.eligible[i] & allowed
        fit = np.minimum(fit_counts(offers.capacity, demand), items.most[i])
        while left > 0 and mask.any():
            n = min(left, int(fit[mask].max()))
            if n <= 0:
                break
            counts = np.zeros(items.n_items, dtype=np.int64)
            counts[i] = n
            open_nodes.append(_OpenNode(mask & (fit >= n), n * demand, counts))
            left -= n
    return cheapest_types([(node.viable, node.counts) for node in open_nodes], items, offers)


def cheapest_types(nodes: list[tuple[BoolArray, IntArray]], items: Items, offers: Offers) -> list[Bin]:
    """Each node (offers it may be, pods it holds) as the cheapest offer that holds its pods and
    the NodePools' limits still allow, in order; a node no offer can be left out (its pods
    unplaced). Empty nodes are dropped."""
    room = offers.room.copy()
    out = []
    for viable, counts in nodes:
        if not counts.any():
            continue
        load = counts @ items.demand
        holds = viable & (offers.capacity >= load).all(axis=1) & items.eligible[counts > 0].all(axis=0)
        holds &= offers.within_room(room)
        if not holds.any():
            continue
        candidates = np.nonzero(holds)[0]
        j = int(candidates[np.argmin(offers.price[candidates])])
        room[offers.pool[j]] -= offers.counted[j]
        out.append(Bin(j, counts.copy()))
    return out


def rechosen(bins: list[Bin], items: Items, offers: Offers) -> list[Bin]:
    """The same nodes, each as the cheapest offer that holds what it holds."""
    everything = np.ones(offers.n_offers, dtype=np.bool_)
    return cheapest_types([(everything, b.counts) for b in bins], items, offers)


def trimmed(bins: list[Bin], count: IntArray) -> list[Bin]:
    """The bins holding no more than ``count`` pods of each item (a covering may hold more)."""
    left = count.copy()
    out = []
    for b in bins:
        take = np.minimum(b.counts, left)
        left -= take
        if take.any():
            out.append(Bin(b.offer, take))
    return out


def better(a: list[Bin], b: list[Bin], items: Items, offers: Offers) -> list[Bin]:
    """The one placing more (weighted), then the cheaper; ``b`` on a tie."""
    weight_a, weight_b = int(placed(a, items.n_items) @ items.weight), int(placed(b, items.n_items) @ items.weight)
    if weight_a != weight_b:
        return a if weight_a > weight_b else b
    return a if cost_of(a, offers) < cost_of(b, offers) else b
