"""The provisioning model against the optimum found by brute force on tiny cases: small batches
get every maximal pattern, so the MIP's answer is the cheapest set of new nodes and its bound
proves it; the Farley bound never passes the optimum."""

from __future__ import annotations

from functools import cache
from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeplace.solver import cutting_stock_columns
from kubeplace.solver.cutting_stock import UNLIMITED, Items, Offers, fit_counts, placed
from kubeplace.solver.cutting_stock_columns import provision


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
def tiny(draw: Any) -> tuple[Items, Offers]:
    n_items, n_offers = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    demand = np.array([[draw(st.integers(1, 6)) * 250, draw(st.integers(1, 4)) * 512] for _ in range(n_items)],
                      dtype=np.int64)
    capacity = np.array([[draw(st.sampled_from([1000, 1500, 2000])), draw(st.sampled_from([2048, 4096]))]
                         for _ in range(n_offers)], dtype=np.int64)
    eligible = np.ones((n_items, n_offers), dtype=np.bool_)
    for i in range(n_items):
        fits = fit_counts(capacity, demand[i]) > 0
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
    result = provision(items, offers, 3.0)
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
    with patch.object(cutting_stock_columns, "ENUMERATED_PODS", 0):
        result = provision(items, offers, 3.0)
    optimum = cheapest(items, offers)
    assert result.cost >= optimum
    assert result.bound is None or result.bound <= optimum + 1


def test_whole_node_counts_close_the_gap_the_lp_leaves() -> None:
    """Three 1-CPU pods, 2-CPU nodes at 1.0/h: the LP buys 1.5 nodes, the answer 2; the bound of
    the MIP over whole node counts is 2.0 and proves the answer (no enumeration)."""
    items = Items(np.array([[1000, 512]], dtype=np.int64), np.array([3], dtype=np.int64), np.ones(1, dtype=np.int64),
                  np.array([UNLIMITED], dtype=np.int64), np.ones((1, 1), dtype=np.bool_))
    offers = Offers(np.array([[2000, 4096]], dtype=np.int64), np.array([10**9], dtype=np.int64),
                    np.zeros(1, dtype=np.int64), np.zeros((1, 0), dtype=np.int64), np.zeros((1, 0), dtype=np.int64))
    with patch.object(cutting_stock_columns, "ENUMERATED_PODS", 0):
        result = provision(items, offers, 3.0)
    assert result.cost == 2 * 10**9 and result.status == "optimal"
    assert result.bound is not None and abs(result.bound - 2 * 10**9) <= 1
