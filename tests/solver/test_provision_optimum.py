"""The provisioning model against the optimum found by brute force on tiny cases: small batches
get every maximal pattern, so the MIP's answer is the cheapest set of new nodes and its bound
proves it; the Farley bound never passes the optimum; without the enumeration, the exact model
over node slots finds the optimum and proves it."""

from __future__ import annotations

from functools import cache
from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeplace.solver import cutting_stock_columns, cutting_stock_exact
from kubeplace.solver.budget import Budget
from kubeplace.solver.cutting_stock import UNLIMITED, Items, Offers, cost_of, fit_counts, greedy_bins, placed
from kubeplace.solver.cutting_stock_columns import holds_all, provision, representatives
from kubeplace.solver.cutting_stock_exact import exact_nodes, slots_of


def cheapest(items: Items, offers: Offers) -> int:
    """The least cost of nodes holding every pod (each node within its offer, eligibility and the
    per-node maxima), by dynamic programming over the pods still to place."""
    @cache
    def best(left: tuple[int, ...]) -> float:
        if not any(left):
            return 0
        first = next(i for i, n in enumerate(left) if n)  # some node holds a pod of the first item left
        out = float("inf")
        for j in range(offers.n_offers):
            if not items.eligible[first, j]:
                continue
            for a in _patterns(items, offers.capacity[j], j, left, first):
                rest = tuple(n - k for n, k in zip(left, a, strict=True))
                out = min(out, int(offers.price[j]) + best(rest))
        return out

    return int(best(tuple(int(n) for n in items.count)))


def _patterns(items: Items, capacity: Any, j: int, left: tuple[int, ...], first: int) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []

    def visit(i: int, free: Any, chosen: list[int]) -> None:
        if i == len(left):
            if chosen[first] > 0:
                out.append(tuple(chosen))
            return
        most = 0 if not items.eligible[i, j] else min(left[i], int(items.most[i]),
                                                       int(fit_counts(free[None, :], items.demand[i])[0]))
        for n in range(most + 1):
            visit(i + 1, free - n * items.demand[i], [*chosen, n])

    visit(0, capacity.copy(), [])
    return out


@st.composite
def tiny(draw: Any, most_offers: int = 3, some_eligible: bool = False) -> tuple[Items, Offers]:
    n_items, n_offers = draw(st.integers(1, 3)), draw(st.integers(1, most_offers))
    demand = np.array([[draw(st.integers(1, 6)) * 250, draw(st.integers(1, 4)) * 512] for _ in range(n_items)],
                      dtype=np.int64)
    capacity = np.array([[draw(st.sampled_from([1000, 1500, 2000])), draw(st.sampled_from([2048, 4096]))]
                         for _ in range(n_offers)], dtype=np.int64)
    eligible = np.ones((n_items, n_offers), dtype=np.bool_)
    if some_eligible:  # each item on some offers, the first always
        eligible[:, 1:] = np.array(draw(st.lists(st.booleans(), min_size=n_items * (n_offers - 1),
                                                 max_size=n_items * (n_offers - 1)))).reshape(n_items, -1)
    for i in range(n_items):
        fits = fit_counts(capacity[eligible[i]], demand[i]) > 0
        if not fits.any():
            demand[i] = [250, 512]
    items = Items(demand, np.array([draw(st.integers(1, 4)) for _ in range(n_items)], dtype=np.int64),
                  np.ones(n_items, dtype=np.int64),
                  np.array([draw(st.sampled_from([1, 2, UNLIMITED])) for _ in range(n_items)], dtype=np.int64),
                  eligible)
    offers = Offers(capacity, np.array([draw(st.integers(1, 50)) for _ in range(n_offers)], dtype=np.int64) * 10**7,
                    np.zeros(n_offers, dtype=np.int64), np.zeros((n_offers, 0), dtype=np.int64),
                    np.zeros((1, 0), dtype=np.int64))
    return items, offers


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(tiny())
def test_small_batches_get_the_cheapest_nodes_with_the_bound_at_the_optimum(model: tuple[Items, Offers]) -> None:
    items, offers = model
    result = provision(items, offers, Budget.of(3.0))
    optimum = cheapest(items, offers)
    assert (placed(result.bins, items.n_items) == items.count).all()
    assert result.cost == optimum
    assert result.status == "optimal"
    assert result.bound is not None and optimum - 1 <= result.bound <= optimum + 1


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(tiny())
def test_column_generation_bounds_the_optimum_from_below(model: tuple[Items, Offers]) -> None:
    """Without the enumeration (as for large batches): the Farley bound is at most the optimum,
    the answer at least it."""
    items, offers = model
    with patch.object(cutting_stock_columns, "ENUMERATED_PODS", 0), patch.object(cutting_stock_exact, "EXACT_SLOTS", 0):
        result = provision(items, offers, Budget.of(3.0))
    optimum = cheapest(items, offers)
    assert result.cost >= optimum
    assert result.bound is None or result.bound <= optimum + 1


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(tiny(most_offers=4, some_eligible=True))
def test_the_exact_model_over_node_slots_finds_and_proves_the_optimum(model: tuple[Items, Offers]) -> None:
    """Without the enumeration (a batch of many patterns): the slots, with the merges of node
    pairs (what merges where, per-node maxima and eligibility barring some), still hold an
    optimal answer, so the model finds the optimum and its bound proves it, never above it."""
    items, offers = model
    with patch.object(cutting_stock_columns, "ENUMERATED_PODS", 0):
        result = provision(items, offers, Budget.of(3.0))
    optimum = cheapest(items, offers)
    assert (placed(result.bins, items.n_items) == items.count).all()
    assert result.bound is not None and optimum - 1 <= result.bound <= optimum + 1
    assert result.cost == optimum and result.status == "optimal"


def test_whole_node_counts_close_the_gap_the_lp_leaves() -> None:
    """Three 1-CPU pods, 2-CPU nodes at 1.0/h: the LP buys 1.5 nodes, the answer 2; the bound of
    the MIP over whole node counts is 2.0 and proves the answer (no enumeration)."""
    items = Items(np.array([[1000, 512]], dtype=np.int64), np.array([3], dtype=np.int64), np.ones(1, dtype=np.int64),
                  np.array([UNLIMITED], dtype=np.int64), np.ones((1, 1), dtype=np.bool_))
    offers = Offers(np.array([[2000, 4096]], dtype=np.int64), np.array([10**9], dtype=np.int64),
                    np.zeros(1, dtype=np.int64), np.zeros((1, 0), dtype=np.int64), np.zeros((1, 0), dtype=np.int64))
    with patch.object(cutting_stock_columns, "ENUMERATED_PODS", 0):
        result = provision(items, offers, Budget.of(3.0))
    assert result.cost == 2 * 10**9 and result.status == "optimal"
    assert result.bound is not None and abs(result.bound - 2 * 10**9) <= 1


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(tiny(most_offers=4, some_eligible=True))
def test_the_exact_model_alone_is_at_the_optimum_from_the_greedy(model: tuple[Items, Offers]) -> None:
    """The slots for answers no dearer than the greedy's, started from it: the answer is the
    optimum and the proved bound is not above it (a merge allowed where it should not be cuts
    the optimum off: the bound then passes it)."""
    items, offers = model
    greedy = greedy_bins(items, offers)
    reps = representatives(items, offers)
    slots = slots_of(items, offers, np.unique(reps), cost_of(greedy, offers))
    assert slots is not None
    found = exact_nodes(items, offers, slots, greedy, reps, Budget.of(3.0))
    optimum = cheapest(items, offers)
    assert found is not None and holds_all(found.bins, items, offers)
    assert (placed(found.bins, items.n_items) == items.count).all()
    assert found.bound <= optimum + 1 and cost_of(found.bins, offers) == optimum


def _cpu_offers(capacity: list[int], price: list[int], counted: list[int] | None = None,
                room: int = UNLIMITED) -> Offers:
    n = len(capacity)
    return Offers(np.array([[c, 1 << 40] for c in capacity], dtype=np.int64),
                  np.array(price, dtype=np.int64) * 10**8, np.zeros(n, dtype=np.int64),
                  np.array([[c] for c in (counted or capacity)], dtype=np.int64), np.array([[room]], dtype=np.int64))


def _exact_alone(items: Items, offers: Offers, ceiling: int) -> tuple[int, float]:
    reps = representatives(items, offers)
    slots = slots_of(items, offers, np.unique(reps), ceiling)
    assert slots is not None
    found = exact_nodes(items, offers, slots, [], reps, Budget.of(3.0))
    assert found is not None
    return cost_of(found.bins, offers), found.bound


def test_two_nodes_merge_only_into_one_no_dearer() -> None:
    """Two 1-CPU pods: two 1-CPU nodes at 1.0 beat one 2-CPU node at 2.5 (which holds both):
    the 1-CPU offer keeps its two slots."""
    items = Items(np.array([[1000, 1 << 20]], dtype=np.int64), np.array([2], dtype=np.int64),
                  np.ones((1,), dtype=np.int64), np.array([UNLIMITED], dtype=np.int64),
                  np.ones((1, 2), dtype=np.bool_))
    assert _exact_alone(items, _cpu_offers([1000, 2000], [10, 25]), 50 * 10**8) == (20 * 10**8, 20 * 10**8)


def test_a_merge_that_would_pass_a_nodepool_limit_is_not_made() -> None:
    """Two 1-CPU pods, a NodePool limit of 2 CPUs: one 2.5-CPU node (1.5/h) would hold both but
    counts 2.5 CPUs; a 2-CPU node costs 2.5/h; two 1-CPU nodes (2.0/h) are the optimum."""
    items = Items(np.array([[1000, 1 << 20]], dtype=np.int64), np.array([2], dtype=np.int64),
                  np.ones((1,), dtype=np.int64), np.array([UNLIMITED], dtype=np.int64),
                  np.ones((1, 3), dtype=np.bool_))
    offers = _cpu_offers([1000, 2500, 2000], [10, 15, 25], room=2000)
    assert _exact_alone(items, offers, 25 * 10**8) == (20 * 10**8, 20 * 10**8)
