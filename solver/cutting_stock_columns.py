"""The exact provisioning model: column generation over node patterns, Farley's bound, a MIP.

The master LP over patterns (a pattern: one node of offer j holding a[i] pods of item i)

    min  sum_p price[j(p)] x_p + sum_i penalty_i u_i
    s.t. sum_p a_p[i] x_p + u_i >= count_i                 (dual pi_i >= 0)
         sum_{p of pool P} counted[j(p)] x_p <= room_P       (dual mu_P <= 0, per limited resource)

penalises a pod left out far above any price (pods placed first, then cost). Pricing looks for a
pattern with sum_i pi_i a[i] above its offer's price (plus the limits' duals) by filling each
offer greedily in several orders, all offers at once, and from the LP relaxations of the
knapsacks of the offers they rank first; when that finds nothing, from their integer knapsacks.
For any duals, every pattern's value is at most its knapsack's LP relaxation (and a fractional
knapsack's over one resource, or all of them weighed by the node's capacity), so with
theta = max_j ((that value + mu . counted_j) / price_j) the duals divided by theta are feasible
for the dual of the full LP and LP / theta is a lower bound on every integer answer (Farley's
bound; at convergence theta is 1 and it is the LP value). The integer answer is a MIP over the
generated patterns, started from the greedy's nodes, each node then re-bought as the cheapest
offer holding it. Small batches (ENUMERATED_PODS) get every maximal pattern instead: the MIP is
then exact, and its own bound is the problem's.
"""

from __future__ import annotations

import numpy as np

from kubeplace.models.formulation.capacity_rows import (
    BuyableTemplates,
    ExistingNodes,
    Pairs,
    bought_rows,
    capacity_rows,
)
from kubeplace.models.fragmentation import FloatArray
from kubeplace.models.problem import BoolArray, IntArray
from kubeplace.solver.backends.highs_lp import INF, HighsLp
from kubeplace.solver.budget import NO_DEADLINE, Budget
from kubeplace.solver.cutting_stock import (
    UNLIMITED,
    Bin,
    Items,
    Offers,
    Provisioning,
    better,
    cost_of,
    fit_counts,
    greedy_bins,
    placed,
    rechosen,
    trimmed,
)
from kubeplace.solver.cutting_stock_exact import exact_nodes, slots_of
from kubeplace.solver.shares import (
    AGGREGATED_MIN_SECONDS,
    AGGREGATED_SECONDS,
    AGGREGATED_SHARE,
    ENUMERATION_SHARE,
    EXACT_SHARE,
    HIGHS_LP_MIN_SECONDS,
    HIGHS_MIP_MIN_SECONDS,
    KNAPSACK_SECONDS,
    LP_SHARE,
)

PRICE_SCALE = 1e-9
"""Prices enter the LP in currency per hour."""
TOL = 1e-9
MIP_GAP = 1e-3
"""The MIP over the patterns stops this close to its own bound."""
ENUMERATED_PATTERNS = 5_000
"""Up to this many maximal patterns in all, every one is a column and the MIP is exact."""
AGGREGATED_PAIRS = 20_000
"""Offers x items above which the aggregated MIP is not tried."""
ENUMERATED_PODS = 400
"""Batches of more pods are not tried for enumeration (their patterns are too many)."""
ENUMERATION_STEPS = 50_000
"""Partial patterns one offer's enumeration may visit before it gives up."""
EXACT_BOUNDS = 200
"""Offers whose pricing LP is solved exactly, at most, per Farley bound."""


def provision(items: Items, offers: Offers, budget: Budget) -> Provisioning:
    """The greedy's nodes, then the cheapest set of nodes the exact model finds within
    ``budget`` (never worse than the greedy's), with Farley's bound."""
    greedy = greedy_bins(items, offers)
    greedy_cost = cost_of(greedy, offers)
    if items.n_items == 0 or offers.n_offers == 0 or not greedy:
        return Provisioning(tuple(greedy), greedy_cost, tuple(greedy), greedy_cost, float(greedy_cost),
                            "optimal" if not greedy else "greedy")
    reps = representatives(items, offers)
    model = _Master(items, offers)
    for b in greedy:
        model.add(int(reps[b.offer]), b.counts)
    for j, a in single_item_patterns(items, offers, reps):
        model.add(j, a)
    every = _enumerated(items, offers, np.unique(reps), budget.first(ENUMERATION_SHARE))
    if every is not None:
        for j, a in every:
            model.add(j, a)
        bound, iterations = None, 0
    else:
        aggregated = _aggregated_seconds(items, np.unique(reps), budget.total)
        bound, iterations = _generate(model, items, offers, reps, budget.first(LP_SHARE).shortened(aggregated))
        if aggregated:
            pooled = _aggregated_bound(items, offers, np.unique(reps), Budget.of(aggregated))
            bound = pooled if bound is None else max(bound, pooled)
    small = every is None and slots_of(items, offers, np.unique(reps), greedy_cost) is not None
    chosen = model.integer(len(greedy), budget.first(1 - (EXACT_SHARE if small else 0)))
    if every is not None and chosen is not None:  # every pattern present: the MIP's bound is the problem's
        bound = model.mip_bound()
    best = greedy
    if chosen is not None:
        best = better(rechosen(trimmed(chosen, items.count), items, offers), greedy, items, offers)
    fewer = int(placed(best, items.n_items) @ items.weight) < int(items.count @ items.weight)
    if small and not fewer and not _proved(cost_of(best, offers), bound):
        best, bound = _exact(items, offers, reps, best, bound, budget)
    cost = cost_of(best, offers)
    status = "greedy" if best is greedy else "feasible"
    if bound is not None and not fewer and _proved(cost, bound):
        status = "optimal"
    if bound is not None and not fewer and status != "optimal":
        bound = max(bound, _aggregated_bound(items, offers, np.unique(reps), budget))
        if _proved(cost, bound):
            status = "optimal"
    if fewer:
        bound = None  # the LP's bound is then on cost and pods left out together, not on cost
    return Provisioning(tuple(best), cost, tuple(greedy), greedy_cost, bound, status, iterations, len(model.columns))


def _aggregated_seconds(items: Items, candidates: IntArray, time_limit: float) -> float:
    """The end of the column generation's time kept for the aggregated MIP's bound, on problems
    small enough for it: while the column generation has not converged, its Farley bound is
    weaker, and its last iterations add little."""
    if len(candidates) * items.n_items > AGGREGATED_PAIRS:
        return 0.0
    return min(AGGREGATED_SECONDS, AGGREGATED_SHARE * time_limit)


def _proved(cost: int, bound: float | None) -> bool:
    return bound is not None and cost <= bound * (1 + 1e-9) + 1


def _exact(items: Items, offers: Offers, reps: IntArray, best: list[Bin], bound: float | None,
           budget: Budget) -> tuple[list[Bin], float | None]:
    """The exact model's answer when cheaper than ``best``, and the higher of the bounds."""
    slots = slots_of(items, offers, np.unique(reps), cost_of(best, offers))
    found = None if slots is None else exact_nodes(items, offers, slots, best, reps, budget)
    if found is None:
        return best, bound
    answer = better(rechosen(list(found.bins), items, offers), best, items, offers)
    return answer, found.bound if bound is None else max(bound, found.bound)


def representatives(items: Items, offers: Offers) -> IntArray:
    """(J,) for each offer the cheapest offer with the same capacity, eligibility and (when its
    NodePool has limits) NodePool: the only one pricing needs to consider."""
    limited = np.asarray((offers.room < UNLIMITED).any(axis=1), dtype=np.bool_)
    pool_key = np.where(limited[offers.pool], offers.pool, -1)
    keys = np.concatenate([offers.capacity, items.eligible.T.astype(np.int64), pool_key[:, None]], axis=1)
    _, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.reshape(-1)
    order = np.lexsort((np.arange(offers.n_offers), offers.price, group))
    first = np.full(int(group.max()) + 1, -1, dtype=np.int64)
    for j in order[::-1].tolist():
        first[group[j]] = j
    return np.asarray(first[group], dtype=np.int64)


def single_item_patterns(items: Items, offers: Offers, reps: IntArray) -> list[tuple[int, IntArray]]:
    """Per item, the node holding as many of its pods as fit on the offer cheapest per pod: the
    LP is then feasible from the start."""
    out = []
    candidates = np.unique(reps)
    for i in range(items.n_items):
        mask = items.eligible[i, candidates]
        if not mask.any():
            continue
        js = candidates[mask]
        fit = np.minimum(np.minimum(fit_counts(offers.capacity[js], items.demand[i]), items.most[i]), items.count[i])
        ok = fit > 0
        if not ok.any():
            continue
        per_pod = offers.price[js[ok]] / fit[ok]
        k = int(np.argmin(per_pod))
        a = np.zeros(items.n_items, dtype=np.int64)
        a[i] = int(fit[ok][k])
        out.append((int(js[ok][k]), a))
    return out


class _Master:
    """The master LP: cover rows (one per item), then limit rows (NodePool, resource)."""

    def __init__(self, items: Items, offers: Offers) -> None:
        self.items, self.offers = items, offers
        self.h = HighsLp()
        self.limit_rows = [(p, r) for p in range(offers.room.shape[0]) for r in range(offers.room.shape[1])
                           if offers.room[p, r] < UNLIMITED]
        lower = np.concatenate([items.count.astype(np.float64), np.full(len(self.limit_rows), -INF)])
        upper = np.concatenate([np.full(items.n_items, INF),
                                [float(offers.room[p, r]) for p, r in self.limit_rows]]).astype(np.float64)
        self.h.add_empty_rows(lower, upper)
        self.penalty = _penalties(items, offers)
        for i in range(items.n_items):
            self.h.add_col(float(self.penalty[i]), 0.0, INF, np.array([i], dtype=np.int32), np.array([1.0]))
        self.columns: list[tuple[int, IntArray]] = []
        self.seen: set[tuple[int, bytes]] = set()

    def add(self, j: int, a: IntArray) -> bool:
        key = (j, a.tobytes())
        if key in self.seen or not a.any():
            return False
        self.seen.add(key)
        rows = [int(i) for i in np.nonzero(a)[0]]
        values = [float(a[i]) for i in rows]
        pool = int(self.offers.pool[j])
        for k, (p, r) in enumerate(self.limit_rows):
            if p == pool and self.offers.counted[j, r] > 0:
                rows.append(self.items.n_items + k)
                values.append(float(self.offers.counted[j, r]))
        self.h.add_col(float(self.offers.price[j]) * PRICE_SCALE, 0.0, INF,
                       np.array(rows, dtype=np.int32), np.array(values, dtype=np.float64))
        self.columns.append((j, a.copy()))
        return True

    def solve(self, seconds: float) -> tuple[float, FloatArray, FloatArray] | None:
        """(LP value, pi per item, mu per limit row), or None when the time ran out."""
        if not self.h.solve(max(HIGHS_LP_MIN_SECONDS, seconds)):
            return None
        dual = self.h.row_duals()
        value = self.h.objective()
        return value, np.maximum(dual[: self.items.n_items], 0.0), np.minimum(dual[self.items.n_items:], 0.0)

    def effective_price(self, mu: FloatArray) -> FloatArray:
        """(J,) each offer's price plus what one more node costs the limit rows (-mu . counted)."""
        extra = np.zeros(self.offers.n_offers, dtype=np.float64)
        for k, (p, r) in enumerate(self.limit_rows):
            extra -= mu[k] * (self.offers.pool == p) * self.offers.counted[:, r]
        return np.asarray(self.offers.price * PRICE_SCALE + extra, dtype=np.float64)

    def integer(self, n_hint: int, budget: Budget) -> list[Bin] | None:
        """The MIP over the columns so far, started from the first ``n_hint`` columns (the
        greedy's nodes, one each); its nodes, or None without a solution in time."""
        n_items, n = self.items.n_items, len(self.columns)
        index = np.arange(n_items, n_items + n, dtype=np.int32)
        self.h.set_integer(index)
        seconds = max(HIGHS_MIP_MIN_SECONDS, budget.left())
        hint = np.zeros(n_items + n, dtype=np.float64)
        for k in range(min(n_hint, n)):
            hint[n_items + k] += 1.0
        hint[:n_items] = np.maximum(self.items.count - self._covered(hint[n_items:]), 0)
        self.h.solve(seconds, mip_gap=MIP_GAP, hint=hint)
        values = self.h.values()
        if len(values) != n_items + n or not self.h.feasible():
            return None
        copies = np.rint(values[n_items:]).astype(np.int64)
        return [Bin(j, a) for (j, a), k in zip(self.columns, copies.tolist(), strict=True) for _ in range(k)]

    def mip_bound(self) -> float | None:
        """The last MIP's dual bound on the cost, in price units (None when it has pods left out)."""
        value = self.h.dual_bound()
        return None if not np.isfinite(value) else max(0.0, value) / PRICE_SCALE

    def _covered(self, x: FloatArray) -> FloatArray:
        total = np.zeros(self.items.n_items, dtype=np.float64)
        for (_, a), value in zip(self.columns, x.tolist(), strict=True):
            total += value * a
        return total


def _penalties(items: Items, offers: Offers) -> FloatArray:
    """Per item, what leaving one pod out costs in the LP: more than every node of any answer
    together, times the rank of its weight (pods of higher priority first when limits bind)."""
    most_cost = float(offers.price.max(initial=1)) * PRICE_SCALE * float(items.count.sum() + 1)
    ranks = np.searchsorted(np.unique(items.weight), items.weight) + 1
    return np.asarray(most_cost * ranks, dtype=np.float64)


def _generate(model: _Master, items: Items, offers: Offers, reps: IntArray,
              budget: Budget) -> tuple[float | None, int]:
    """Column generation until no improving pattern is found or the budget is spent: (the best Farley
    bound found in price units, iterations)."""
    candidates = np.unique(reps)
    most = _most_per_offer(items, offers, candidates)
    best: float | None = None
    iterations = 0
    while not budget.expired():
        solved = model.solve(budget.left())
        if solved is None:
            break
        iterations += 1
        value, pi, mu = solved
        price = model.effective_price(mu)[candidates]
        raw = np.asarray(offers.price[candidates] * PRICE_SCALE, dtype=np.float64)
        theta, exact_patterns = _theta(items, offers.capacity[candidates], most, pi, price - raw, raw)
        farley = value / theta / PRICE_SCALE
        best = farley if best is None else max(best, farley)
        patterns = _fill_patterns(items, offers.capacity[candidates], most, pi)
        gain = patterns @ pi - price
        added = 0
        for k in np.argsort(-gain)[: max(50, items.n_items)].tolist():
            if gain[k] > TOL * max(1.0, float(price[k])) and model.add(int(candidates[k]), patterns[k]):
                added += 1
        for k, a in exact_patterns:
            if float(a @ pi) > float(price[k]) * (1 + TOL) and model.add(int(candidates[k]), a):
                added += 1
        if added == 0:  # the fills found nothing: the integer knapsacks, while time allows
            theta, exact_patterns = _theta(items, offers.capacity[candidates], most, pi, price - raw, raw, True,
                                           budget)
            best = max(best, value / theta / PRICE_SCALE)
            for k, a in exact_patterns:
                if float(a @ pi) > float(price[k]) * (1 + TOL) and model.add(int(candidates[k]), a):
                    added += 1
        if added == 0:
            break
    return best, iterations


def _aggregated_bound(items: Items, offers: Offers, candidates: IntArray, budget: Budget) -> float:
    """A lower bound on the cost from the MIP where each offer's nodes pool their capacity: n_j
    whole nodes of offer j, x_ji pods of item i on them (whole pods, but one pod's requests may
    straddle two nodes), every pod placed, the NodePools' limits kept. It drops only the packing
    of pods into single nodes, so its dual bound (even unsolved) bounds every answer; with few
    nodes it is often above the LP's, whose node counts are fractional. 0 when too large or no
    time is left."""
    n_offers, n_items = len(candidates), items.n_items
    seconds = budget.within(AGGREGATED_SECONDS).left()
    if n_offers * n_items > AGGREGATED_PAIRS or seconds < AGGREGATED_MIN_SECONDS:
        return 0.0
    h = HighsLp()
    fit = np.stack([fit_counts(offers.capacity[candidates], items.demand[i]) for i in range(n_items)], axis=1)
    most = np.where(items.eligible[:, candidates].T & (fit > 0), np.minimum(fit, items.most[None, :]), 0)
    nodes_upper = np.full(n_offers, float(items.count.sum()))
    h.add_vars(np.zeros(n_offers), nodes_upper)
    h.set_costs(np.arange(n_offers, dtype=np.int32), offers.price[candidates] * PRICE_SCALE)
    pair_upper = np.where(most > 0, items.count[None, :], 0).astype(np.float64).reshape(-1)
    h.add_vars(np.zeros(n_offers * n_items), pair_upper)
    h.set_integer(np.arange(n_offers + n_offers * n_items, dtype=np.int32))
    pairs = _pairs(items, most, n_offers)
    for i in range(n_items):
        h.add_row(float(items.count[i]), float(items.count[i]),
                  (n_offers + np.arange(n_offers) * n_items + i).astype(np.int32), np.ones(n_offers))
    bought_rows(h, pairs, BuyableTemplates(np.arange(n_offers, dtype=np.int64), np.arange(n_offers, dtype=np.int64),
                                           offers.capacity[candidates], most))
    for p, r in [(p, r) for p in range(offers.room.shape[0]) for r in range(offers.room.shape[1])
                 if offers.room[p, r] < UNLIMITED]:
        members = [k for k in range(n_offers) if offers.pool[candidates[k]] == p and offers.counted[candidates[k], r]]
        if members:
            h.add_row(-INF, float(offers.room[p, r]), np.array(members, dtype=np.int32),
                      np.array([float(offers.counted[candidates[k], r]) for k in members]))
    h.solve(seconds)
    value = h.dual_bound()
    return max(0.0, value) / PRICE_SCALE if np.isfinite(value) else 0.0


def _pairs(items: Items, most: IntArray, n_offers: int) -> Pairs:
    """The aggregated bound's pairs: x_ki, pods of item i on the nodes of offer k (variable
    n_offers + k * I + i, after the node counts), where one node holds some, offer by offer."""
    k, i = np.nonzero(most > 0)
    return Pairs(i.astype(np.int64), k.astype(np.int64), (n_offers + k * items.n_items + i).astype(np.int64),
                 items.count[i], items.demand)


def _enumerated(items: Items, offers: Offers, candidates: IntArray,
                budget: Budget) -> list[tuple[int, IntArray]] | None:
    """Every maximal pattern of every candidate offer (a node no further pod of the items fits
    on), or None when there are more than ENUMERATED_PATTERNS: small problems are then solved
    exactly by the MIP. None too when the budget is spent first."""
    if int(items.count.sum()) > ENUMERATED_PODS:
        return None
    most = _most_per_offer(items, offers, candidates)
    out: list[tuple[int, IntArray]] = []
    for k, j in enumerate(candidates.tolist()):
        used = [i for i in range(items.n_items) if most[k, i] > 0]
        found = _maximal(items.demand, offers.capacity[j], most[k], used, ENUMERATED_PATTERNS - len(out))
        if found is None or budget.expired():
            return None
        out += [(j, a) for a in found]
    return out


def _maximal(demand: IntArray, capacity: IntArray, most: IntArray, used: list[int],
             limit: int) -> list[IntArray] | None:
    found: list[IntArray] = []
    pattern = np.zeros(demand.shape[0], dtype=np.int64)
    visits = [0]

    def visit(k: int, free: IntArray) -> bool:
        visits[0] += 1
        if len(found) > limit or visits[0] > ENUMERATION_STEPS:
            return False
        if k == len(used):
            if not any(pattern[i] < most[i] and fit_counts(free[None, :], demand[i])[0] > 0 for i in used):
                found.append(pattern.copy())
            return True
        i = used[k]
        for n in range(min(int(most[i]), int(fit_counts(free[None, :], demand[i])[0])), -1, -1):
            pattern[i] = n
            if not visit(k + 1, free - n * demand[i]):
                return False
        pattern[i] = 0
        return True

    return found if visit(0, capacity.copy()) else None


def _most_per_offer(items: Items, offers: Offers, candidates: IntArray) -> IntArray:
    """(J', I) the most pods of each item one node of each candidate offer could hold alone."""
    out = np.zeros((len(candidates), items.n_items), dtype=np.int64)
    for i in range(items.n_items):
        fit = fit_counts(offers.capacity[candidates], items.demand[i])
        out[:, i] = np.where(items.eligible[i, candidates], np.minimum(np.minimum(fit, items.most[i]),
                                                                       items.count[i]), 0)
    return out


def _weighings(capacity: IntArray) -> list[FloatArray]:
    """(J', R) weights per resource that turn a pod's requests into one size on each node: each
    resource alone, and all of them relative to the node's capacity."""
    share = 1.0 / np.maximum(capacity.astype(np.float64), 1.0)
    out = [share]
    for r in range(capacity.shape[1]):
        one = np.zeros_like(share)
        one[:, r] = share[:, r]
        out.append(one)
    return out


def _fill_patterns(items: Items, capacity: IntArray, most: IntArray, pi: FloatArray) -> IntArray:
    """(J', I) per candidate offer the best of greedy fills in decreasing value per size, one
    per weighing of the resources."""
    best = np.zeros((capacity.shape[0], items.n_items), dtype=np.int64)
    best_value = np.zeros(capacity.shape[0], dtype=np.float64)
    for weights in _weighings(capacity):
        pattern = _fill(items, capacity, most, pi, weights)
        value = pattern @ pi
        better_rows = value > best_value
        best[better_rows] = pattern[better_rows]
        best_value = np.maximum(best_value, value)
    return best


def _fill(items: Items, capacity: IntArray, most: IntArray, pi: FloatArray, weights: FloatArray) -> IntArray:
    size = weights @ items.demand.T.astype(np.float64)  # (J', I)
    ratio = np.where(most > 0, pi[None, :] / np.maximum(size, 1e-12), -1.0)
    order = np.argsort(-ratio, axis=1, kind="stable")
    free = capacity.copy()
    pattern = np.zeros_like(most)
    rows = np.arange(capacity.shape[0])
    for step in range(items.n_items):
        i = order[:, step]
        demand = items.demand[i]  # (J', R)
        per = np.where(demand > 0, np.maximum(free, 0) // np.maximum(demand, 1), UNLIMITED).min(axis=1)
        n = np.where(pi[i] > 0, np.minimum(per, most[rows, i]), 0)
        free -= n[:, None] * demand
        pattern[rows, i] += n
    return pattern


def _knapsack_upper(items: Items, capacity: IntArray, most: IntArray, pi: FloatArray) -> FloatArray:
    """(J',) an upper bound on the value sum_i pi_i a_i of any pattern of each offer: the least
    over the weighings of the fractional knapsack with the weighed sizes (a relaxation each)."""
    best = np.full(capacity.shape[0], np.inf)
    value = most * pi[None, :]  # (J', I) everything the offer could hold of each item alone
    for weights in _weighings(capacity):
        size = weights @ items.demand.T.astype(np.float64)  # (J', I)
        room = (weights * capacity).sum(axis=1)  # (J',)
        free_items = size <= 0
        base = np.where(free_items, value, 0.0).sum(axis=1)
        ratio = np.where(free_items | (most == 0), -1.0, pi[None, :] / np.maximum(size, 1e-300))
        order = np.argsort(-ratio, axis=1)
        sizes = np.take_along_axis(np.where(free_items, 0.0, size * most), order, axis=1)
        values = np.take_along_axis(np.where(free_items, 0.0, value), order, axis=1)
        before = np.cumsum(sizes, axis=1) - sizes
        share = np.clip((room[:, None] - before) / np.maximum(sizes, 1e-300), 0.0, 1.0)
        best = np.minimum(best, base + (values * share).sum(axis=1))
    return np.asarray(best, dtype=np.float64)


def _theta(items: Items, capacity: IntArray, most: IntArray, pi: FloatArray, extra: FloatArray, price: FloatArray,
           integer: bool = False, budget: Budget = NO_DEADLINE) -> tuple[float, list[tuple[int, IntArray]]]:
    """max(1, max_j (the most any pattern of offer j is worth - extra_j) / price_j), with each
    pattern's worth bounded by the LP relaxation of its knapsack: the cheap surrogate bounds for
    every offer first, then the exact LP (``integer``: the integer knapsack, within ``budget``)
    for the offers at the top until one stays there. Also the patterns found there, rounded
    down and filled up: the best columns pricing knows."""
    ratio = (_knapsack_upper(items, capacity, most, pi) - extra) / np.maximum(price, TOL)
    exact = np.zeros(len(ratio), dtype=np.bool_)
    found = []
    for _ in range(len(ratio) if integer else EXACT_BOUNDS):
        j = int(np.argmax(ratio))
        if exact[j] or ratio[j] <= 1.0 or budget.expired():
            break
        value, a = _knapsack(items, capacity[j], most[j], pi, integer)
        ratio[j] = (value - extra[j]) / max(float(price[j]), TOL)
        exact[j] = True
        found.append((j, _completed(items, capacity[j], most[j], pi, a)))
    return max(1.0, float(ratio.max(initial=0.0))), found


def _knapsack(items: Items, capacity: IntArray, most: IntArray, pi: FloatArray,
              integer: bool) -> tuple[float, FloatArray]:
    """One offer's pricing knapsack, max pi.a, a.demand <= capacity, 0 <= a <= most: its LP
    relaxation, or ``integer`` the knapsack itself (for at most KNAPSACK_SECONDS); an upper
    bound on its value (the LP's value, the MIP's dual bound) and the best pattern found."""
    a = np.zeros(items.n_items, dtype=np.float64)
    used = np.nonzero((most > 0) & (pi > 0))[0]
    if len(used) == 0:
        return 0.0, a
    h = HighsLp(maximize=True)
    h.add_vars(np.zeros(len(used)), most[used].astype(np.float64))
    h.set_costs(np.arange(len(used), dtype=np.int32), pi[used])
    if integer:
        h.set_integer(np.arange(len(used), dtype=np.int32))
    one_node = np.zeros(len(used), dtype=np.int64)
    capacity_rows(h, Pairs(used.astype(np.int64), one_node, np.arange(len(used), dtype=np.int64), most[used],
                           items.demand), ExistingNodes(np.zeros(1, np.int64), capacity[None, :]))
    h.solve(KNAPSACK_SECONDS)
    upper = h.dual_bound() if integer else h.objective()
    if not np.isfinite(upper) or not (h.optimal() or h.timed_out()):
        return float(most[used] @ pi[used]), a  # every pod it could hold: a bound all the same
    if h.feasible():
        a[used] = h.values()[: len(used)]
    return upper, a


def _completed(items: Items, capacity: IntArray, most: IntArray, pi: FloatArray, a: FloatArray) -> IntArray:
    """``a`` rounded down, then filled up in decreasing value per share of the node."""
    pattern = np.floor(a + 1e-9).astype(np.int64)
    free = capacity - pattern @ items.demand
    size = (items.demand / np.maximum(capacity, 1)).sum(axis=1)
    for i in np.argsort(-pi / np.maximum(size, 1e-12)).tolist():
        if pi[i] <= 0 or pattern[i] >= most[i]:
            continue
        n = min(int(most[i] - pattern[i]), int(fit_counts(free[None, :], items.demand[i])[0]))
        if n > 0:
            pattern[i] += n
            free -= n * items.demand[i]
    return pattern


def holds_all(bins: list[Bin] | tuple[Bin, ...], items: Items, offers: Offers) -> bool:
    """Every bin within its offer's capacity, per-node maxima and eligibility (for tests)."""
    for b in bins:
        load = b.counts @ items.demand
        if ((load > offers.capacity[b.offer]) & (load > 0)).any() or (b.counts > items.most).any():
            return False
        if not items.eligible[b.counts > 0, b.offer].all():
            return False
    return True


def eligible_any(items: Items) -> BoolArray:
    return np.asarray(items.eligible.any(axis=1), dtype=np.bool_)
