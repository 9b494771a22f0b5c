"""The exact provisioning model for batches that need few nodes: CP-SAT over node slots.

The covering LP's bound (Farley's) leaves the packing of pods into single nodes fractional; on a
batch of a few large nodes that is where the cost goes (two 16 GiB pods do not fit a 32 GiB node
once its overhead is taken), and the gap stays at a few percent whatever columns are generated.
This model places every pod in whole nodes, so its proved bound is the problem's own.

*Slots.* Each candidate offer k (the cheapest of its group, ``representatives``) gets a number
of node slots, each used or not, holding x[s, i] pods of item i within the offer's capacity,
eligibility and per-node maxima, every pod placed, the NodePools' limits kept. How many slots
an optimal answer needs follows from two facts:

* no answer costing at most the incumbent's ``ceiling`` has more than ceiling // price_k nodes
  of offer k;
* *merging*: when one node of offer c can hold whatever any node of offer a and one of offer b
  hold together (c's capacity covers, per resource, the most the pods of a node of a and of one
  of b can request, ``_most_load``, or every pod of the batch; every item either may hold is
  eligible on c and has no per-node maximum; the NodePools' binding limits count no more) at
  price_c <= price_a + price_b, any answer with nodes of both a and b becomes one no dearer
  with one node fewer. Merging until no such pair is left turns an optimal answer
  into an optimal answer without one: so an offer that merges with itself needs one slot, and
  two offers that merge are never both used.

So the model's optimum is the problem's, and its proved lower bound (even when the time runs
out first) bounds every answer that places every pod. A NodePool limit is *binding* when an
answer within the ceiling could reach it (its room below ceiling x the most the pool's offers
count per unit of price); the others hold by themselves. The incumbent, merged the same way,
is the model's hint.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kubeplace.models.formulation.capacity_rows import BuyableTemplates, Pairs, bought_rows
from kubeplace.models.problem import BoolArray, IntArray
from kubeplace.solver.backends.cpsat_model import IntModel
from kubeplace.solver.budget import Budget
from kubeplace.solver.cutting_stock import UNLIMITED, Bin, Items, Offers, cost_of, fit_counts
from kubeplace.solver.shares import EXACT_MIN_SECONDS

EXACT_PODS = 2_000
"""Batches of more pods are not tried (they need many nodes)."""
EXACT_OFFERS = 200
"""Candidate offers above which the exact model is not tried (the merges are pairs of them)."""
EXACT_SLOTS = 400
"""Node slots above which the exact model is not tried (a batch of many nodes: the LP's bound is
then close, and the model too large)."""
EXACT_VARIABLES = 20_000
"""Slots x items above which the exact model is not tried."""
EXACT_WORKERS = 2
"""CP-SAT's search workers."""
NO_MERGE = -1


@dataclass(frozen=True)
class Slots:
    """The exact model's frame: the candidate offers, what merges into what, and the slots."""

    candidates: IntArray  # (K,) offer indices (representatives)
    merge: IntArray  # (K, K) the candidate (index into candidates) a node of each pair merges into, or NO_MERGE
    binding: BoolArray  # (P, L) the NodePool limits an answer within the ceiling could reach
    slot_offer: IntArray  # (S,) the candidate (index into candidates) of each slot, grouped
    ceiling: int


@dataclass(frozen=True)
class Exact:
    bins: tuple[Bin, ...]
    """The best answer found (every pod placed)."""
    bound: float
    """A lower bound on the cost of any new nodes placing every pod."""


def slots_of(items: Items, offers: Offers, candidates: IntArray, ceiling: int) -> Slots | None:
    """The model's frame for answers costing at most ``ceiling``; None when it would be too large,
    or when offers of one group count differently against a binding limit (the representative
    could then not stand for them)."""
    if len(candidates) > EXACT_OFFERS or int(items.count.sum()) > EXACT_PODS:
        return None
    binding = _binding(offers, ceiling)
    if binding.any() and not _same_counted(offers, binding):
        return None
    merge = _merges(items, offers, candidates, binding)
    total_pods = int(items.count.sum())
    usable = np.asarray(items.eligible[:, candidates].any(axis=0), dtype=np.bool_)
    per_offer = []
    for k, j in enumerate(candidates.tolist()):
        price = int(offers.price[j])
        most = total_pods if price <= 0 else min(total_pods, ceiling // price)
        per_offer.append(0 if not usable[k] else 1 if merge[k, k] != NO_MERGE else most)
    slot_offer = np.repeat(np.arange(len(candidates)), per_offer).astype(np.int64)
    if len(slot_offer) > EXACT_SLOTS or len(slot_offer) * items.n_items > EXACT_VARIABLES:
        return None
    return Slots(candidates, merge, binding, slot_offer, ceiling)


def exact_nodes(items: Items, offers: Offers, slots: Slots, incumbent: list[Bin], reps: IntArray,
                budget: Budget) -> Exact | None:
    """The cheapest nodes placing every pod the model finds within ``budget``, and its proved bound;
    None when it found no answer (or no time was left)."""
    seconds = budget.left()
    if seconds < EXACT_MIN_SECONDS:
        return None
    model = _Model(items, offers, slots)
    model.hint(merged([Bin(int(reps[b.offer]), b.counts) for b in incumbent], slots))
    solved = model.m.solve(seconds, workers=EXACT_WORKERS, seed=0)
    if not solved.status.has_solution:
        return None
    return Exact(model.bins(solved.values), solved.bound)


def merged(bins: list[Bin], slots: Slots) -> list[Bin]:
    """The nodes with every pair the frame's merges allow merged into one (no dearer); ``bins``
    are nodes of candidate offers."""
    position = {int(j): k for k, j in enumerate(slots.candidates.tolist())}
    if any(b.offer not in position for b in bins):
        return bins
    nodes = [(position[b.offer], b.counts) for b in bins]
    while (pair := _mergeable(nodes, slots.merge)) is not None:
        s, t = pair
        nodes[s] = (int(slots.merge[nodes[s][0], nodes[t][0]]), nodes[s][1] + nodes[t][1])
        del nodes[t]
    return [Bin(int(slots.candidates[k]), counts) for k, counts in nodes]


def _mergeable(nodes: list[tuple[int, IntArray]], merge: IntArray) -> tuple[int, int] | None:
    for s in range(len(nodes)):
        for t in range(s + 1, len(nodes)):
            if merge[nodes[s][0], nodes[t][0]] != NO_MERGE:
                return s, t
    return None


def _binding(offers: Offers, ceiling: int) -> BoolArray:
    """(P, L) the limits some answer costing at most ``ceiling`` could reach."""
    binding = np.zeros(offers.room.shape, dtype=np.bool_)
    for p, resource in zip(*np.nonzero(offers.room < UNLIMITED), strict=True):
        members = offers.pool == p
        counted = offers.counted[members, resource].astype(np.float64)
        price = offers.price[members].astype(np.float64)
        if ((counted > 0) & (price <= 0)).any():
            binding[p, resource] = True
            continue
        per_price = np.where(counted > 0, counted / np.maximum(price, 1.0), 0.0)
        binding[p, resource] = float(offers.room[p, resource]) < ceiling * float(per_price.max(initial=0.0))
    return binding


def _same_counted(offers: Offers, binding: BoolArray) -> bool:
    """Whether the offers of one NodePool and capacity (so each candidate and the offers it
    stands for) count alike against the binding limits."""
    keys: dict[tuple[int, ...], tuple[int, ...]] = {}
    limited = binding.any(axis=0)
    for j in range(offers.n_offers):
        key = (int(offers.pool[j]), *offers.capacity[j].tolist())
        counted = tuple(offers.counted[j, limited].tolist())
        if keys.setdefault(key, counted) != counted:
            return False
    return True


def _merges(items: Items, offers: Offers, candidates: IntArray, binding: BoolArray) -> IntArray:
    """(K, K) for each pair of candidates the cheapest candidate one node of which can take the
    place of a node of each (see the module's text), or NO_MERGE."""
    n = len(candidates)
    capacity = np.maximum(offers.capacity[candidates], 0)
    price = offers.price[candidates]
    eligible = items.eligible[:, candidates]
    uncapped = items.most >= items.count
    total = items.count @ items.demand
    most_load = _most_load(items, capacity, eligible)
    pool = offers.pool[candidates]
    counted = offers.counted[candidates]
    by_price = np.argsort(price, kind="stable")
    out = np.full((n, n), NO_MERGE, dtype=np.int64)
    for a in range(n):
        for b in range(a, n):
            either = eligible[:, a] | eligible[:, b]
            if not uncapped[either].all():
                continue
            needed = np.minimum(most_load[a] + most_load[b], total)
            fits = ((capacity >= needed).all(axis=1) & eligible[either].all(axis=0) & (price <= price[a] + price[b]))
            for c in by_price[fits[by_price]].tolist():
                if _within_limits(binding, pool, counted, a, b, c):
                    out[a, b] = out[b, a] = c
                    break
    return out


def _most_load(items: Items, capacity: IntArray, eligible: BoolArray) -> IntArray:
    """(K, R) the most of each resource the pods on one node of each candidate can request: its
    capacity, what the items it may hold request at most, and for each other resource s the
    fractional knapsack's bound capacity_s x the largest ratio demand_r / demand_s among them
    (when each of them requests s): the pods resource of a node is bounded by its CPUs."""
    demand = items.demand.astype(np.float64)
    out = capacity.copy()
    for k in range(capacity.shape[0]):
        held = eligible[:, k]
        each = np.array([min(int(items.count[i]), int(items.most[i]),
                             int(fit_counts(capacity[k][None, :], items.demand[i])[0])) if held[i] else 0
                         for i in range(items.n_items)], dtype=np.int64)
        out[k] = np.minimum(out[k], each @ items.demand)
        used = each > 0
        for r in range(capacity.shape[1]):
            requesting = used & (items.demand[:, r] > 0)
            for other in range(capacity.shape[1]):
                if other == r or not requesting.any() or (items.demand[requesting, other] <= 0).any():
                    continue
                ratio = float((demand[requesting, r] / demand[requesting, other]).max())
                out[k, r] = min(int(out[k, r]), int(np.floor(float(capacity[k, other]) * ratio * (1 + 1e-9))))
    return out


def _within_limits(binding: BoolArray, pool: IntArray, counted: IntArray, a: int, b: int, c: int) -> bool:
    """Whether a node of c in place of one of a and one of b counts no more against any binding limit."""
    for p, resource in zip(*np.nonzero(binding), strict=True):
        change = sum(sign * int(counted[k, resource]) for k, sign in ((c, 1), (a, -1), (b, -1)) if pool[k] == p)
        if change > 0:
            return False
    return True


class _Model:
    """The slots' model: used[s], x[s][i] (None where the item cannot be on the slot's offer)."""

    def __init__(self, items: Items, offers: Offers, slots: Slots) -> None:
        self.items, self.offers, self.slots = items, offers, slots
        self.m = IntModel()
        capacity = np.maximum(offers.capacity[slots.candidates], 0)
        self.used = [self.m.bool_var(f"used{s}") for s in range(len(slots.slot_offer))]
        self.x: list[list[int | None]] = []
        for s, k in enumerate(slots.slot_offer.tolist()):
            self.x.append([self._pods(s, k, i, capacity[k]) for i in range(items.n_items)])
            self._capacity(s, capacity[k])
            if s > 0 and slots.slot_offer[s - 1] == k:  # slots of one offer: used first, fuller first
                self.m.add_implication(self.used[s], self.used[s - 1])
                self.m.add_le([*self._load(s), *((-c, x) for c, x in self._load(s - 1))], 0)
        first = {int(k): s for s, k in reversed(list(enumerate(slots.slot_offer.tolist())))}
        for a, b in zip(*np.nonzero(slots.merge != NO_MERGE), strict=True):
            if a < b and int(a) in first and int(b) in first:
                self.m.add_not_both(self.used[first[int(a)]], self.used[first[int(b)]])
        for i in range(items.n_items):
            self.m.add_eq([(1, x) for row in self.x if (x := row[i]) is not None], int(items.count[i]))
        self._limits()
        price = offers.price[slots.candidates[slots.slot_offer]]
        cost = [(int(p), u) for p, u in zip(price.tolist(), self.used, strict=True)]
        self.m.add_le(cost, slots.ceiling)
        self.m.minimize(cost)

    def _pods(self, s: int, k: int, i: int, capacity: IntArray) -> int | None:
        if not self.items.eligible[i, self.slots.candidates[k]]:
            return None
        most = min(int(self.items.count[i]), int(self.items.most[i]),
                   int(fit_counts(capacity[None, :], self.items.demand[i])[0]))
        if most <= 0:
            return None
        x = self.m.int_var(0, most, f"x{s}_{i}")
        self.m.add_le([(1, x), (-most, self.used[s])], 0)
        return x

    def _capacity(self, s: int, capacity: IntArray) -> None:
        """Slot s is a template node bought once when used: the capacity writer's rows."""
        held = [(i, x) for i, x in enumerate(self.x[s]) if x is not None]
        cls = np.array([i for i, _ in held], dtype=np.int64)
        pairs = Pairs(cls, np.zeros(len(held), np.int64), np.array([x for _, x in held], dtype=np.int64),
                      np.minimum(self.items.count[cls], self.items.most[cls]), self.items.demand)
        bought_rows(self.m, pairs, BuyableTemplates(np.zeros(1, np.int64), np.array([self.used[s]], np.int64),
                                                    capacity[None, :]))

    def _load(self, s: int) -> list[tuple[int, int]]:
        """The first resource requested on slot s, as (coefficient, variable) terms."""
        return [(int(self.items.demand[i, 0]), x) for i, x in enumerate(self.x[s]) if x is not None]

    def _limits(self) -> None:
        slot_offers = self.slots.candidates[self.slots.slot_offer]
        for p, resource in zip(*np.nonzero(self.slots.binding), strict=True):
            terms = [(int(self.offers.counted[j, resource]), self.used[s]) for s, j in enumerate(slot_offers.tolist())
                     if self.offers.pool[j] == p and self.offers.counted[j, resource] > 0]
            if terms:
                self.m.add_le(terms, int(self.offers.room[p, resource]))

    def hint(self, bins: list[Bin]) -> None:
        """Start from these nodes (of candidate offers), when they fit the slots."""
        position = {int(j): k for k, j in enumerate(self.slots.candidates.tolist())}
        by_offer: dict[int, list[Bin]] = {}
        for b in bins:
            by_offer.setdefault(position.get(b.offer, -1), []).append(b)
        starts = {int(k): s for s, k in reversed(list(enumerate(self.slots.slot_offer.tolist())))}
        room = np.bincount(self.slots.slot_offer, minlength=len(self.slots.candidates))
        if -1 in by_offer or any(len(group) > room[k] for k, group in by_offer.items()):
            return
        if cost_of(bins, self.offers) > self.slots.ceiling:
            return
        values: list[tuple[int, int]] = []
        for s in range(len(self.used)):
            k = int(self.slots.slot_offer[s])
            group = sorted(by_offer.get(k, []), key=lambda b: -int(b.counts @ self.items.demand[:, 0]))
            n = s - starts[k]
            counts = group[n].counts if n < len(group) else np.zeros(self.items.n_items, dtype=np.int64)
            if any(counts[i] > 0 and x is None for i, x in enumerate(self.x[s])):
                return
            values.append((self.used[s], int(n < len(group))))
            values += [(x, int(counts[i])) for i, x in enumerate(self.x[s]) if x is not None]
        for variable, value in values:
            self.m.hint(variable, value)

    def bins(self, values: tuple[int, ...]) -> tuple[Bin, ...]:
        """The used slots of a solution (``values`` per variable) as nodes."""
        out = []
        for s, k in enumerate(self.slots.slot_offer.tolist()):
            if values[self.used[s]]:
                counts = np.array([0 if x is None else values[x] for x in self.x[s]], dtype=np.int64)
                out.append(Bin(int(self.slots.candidates[k]), counts))
        return tuple(out)
