"""A backend-neutral linear integer model: what every backend receives.

Variables are integers (or continuous) with bounds; constraints are sparse rows
``row_lb <= A x <= row_ub`` in CSR form; the objective is linear with integer
coefficients. Plugins and the model builder write only this; the backends in
``solver.backends`` translate it to CP-SAT or to a MILP, which keeps them
interchangeable and lets one catalogue of scenarios check them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
_Scalar = TypeVar("_Scalar", bound=np.generic)

INF = 1 << 53
"""Bound standing for +infinity; exact in float64 so both backends read it the same."""


class Rows(Protocol):
    """What rows are written into: a ``LinearBuilder``, or a backend's own model (HiGHS's
    incremental LP, CP-SAT's ``IntModel``) for the searches that build one, each reading ``INF``
    as no bound. The capacity writer (``models.formulation.capacity_rows``) writes into any."""

    def add_rows(self, counts: IntArray, cols: IntArray, coefs: IntArray,
                 lb: IntArray | int, ub: IntArray | int) -> None:
        """Adds len(counts) rows; row r uses the next counts[r] entries of cols/coefs."""


@dataclass(frozen=True)
class LinearModel:
    var_lb: IntArray
    var_ub: IntArray
    var_integer: BoolArray
    indptr: IntArray  # CSR row pointer, len = n_rows + 1
    indices: IntArray  # column (variable) index per non-zero
    data: IntArray  # coefficient per non-zero
    row_lb: IntArray  # -INF for none
    row_ub: IntArray  # INF for none
    objective: IntArray  # coefficient per variable
    maximize: bool
    objective_offset: int = 0
    hint: IntArray | None = None
    """A complete feasible assignment, or None."""

    @property
    def n_vars(self) -> int:
        return int(self.var_lb.shape[0])

    @property
    def n_rows(self) -> int:
        return int(self.indptr.shape[0]) - 1

    def row(self, r: int) -> tuple[IntArray, IntArray]:
        lo, hi = int(self.indptr[r]), int(self.indptr[r + 1])
        return self.indices[lo:hi], self.data[lo:hi]

    def evaluate(self, x: IntArray) -> int:
        return int(self.objective @ x) + self.objective_offset

    def violations(self, x: IntArray) -> list[str]:
        """Rows and bounds that ``x`` breaks (empty when feasible)."""
        bad = [f"var {j} = {x[j]} outside [{self.var_lb[j]}, {self.var_ub[j]}]"
               for j in np.nonzero((x < self.var_lb) | (x > self.var_ub))[0]]
        counts = np.diff(self.indptr)
        rows = np.repeat(np.arange(self.n_rows), counts)
        act = np.bincount(rows, weights=self.data * x[self.indices], minlength=self.n_rows)
        for r in np.nonzero((act < self.row_lb - 1e-6) | (act > self.row_ub + 1e-6))[0]:
            bad.append(f"row {r}: {act[r]} outside [{self.row_lb[r]}, {self.row_ub[r]}]")
        return bad


class LinearBuilder:
    """Accumulates variables and rows in numpy chunks, then freezes a LinearModel."""

    def __init__(self) -> None:
        self._lb: list[IntArray] = []
        self._ub: list[IntArray] = []
        self._int: list[BoolArray] = []
        self._n = 0
        self._row_cols: list[IntArray] = []
        self._row_coefs: list[IntArray] = []
        self._row_counts: list[IntArray] = []
        self._row_lb: list[IntArray] = []
        self._row_ub: list[IntArray] = []
        self._obj: dict[int, int] = {}
        self._obj_chunks: list[tuple[IntArray, IntArray]] = []

    @property
    def n_vars(self) -> int:
        return self._n

    def upper_bounds(self) -> IntArray:
        """Upper bound of every variable added so far."""
        return np.concatenate(self._ub) if self._ub else np.zeros(0, dtype=np.int64)

    def add_vars(self, lb: IntArray, ub: IntArray, integer: bool = True) -> IntArray:
        """Adds len(lb) variables; returns their indices."""
        lb = np.asarray(lb, dtype=np.int64)
        ub = np.broadcast_to(np.asarray(ub, dtype=np.int64), lb.shape).copy()
        idx = np.arange(self._n, self._n + lb.shape[0], dtype=np.int64)
        self._lb.append(lb)
        self._ub.append(ub)
        self._int.append(np.full(lb.shape[0], integer))
        self._n += lb.shape[0]
        return idx

    def add_rows(self, counts: IntArray, cols: IntArray, coefs: IntArray,
                 lb: IntArray | int, ub: IntArray | int) -> None:
        """Adds len(counts) rows; row r uses the next counts[r] entries of cols/coefs."""
        counts = np.asarray(counts, dtype=np.int64)
        n = counts.shape[0]
        self._row_counts.append(counts)
        self._row_cols.append(np.asarray(cols, dtype=np.int64))
        self._row_coefs.append(np.asarray(coefs, dtype=np.int64))
        self._row_lb.append(np.broadcast_to(np.asarray(lb, dtype=np.int64), (n,)).copy())
        self._row_ub.append(np.broadcast_to(np.asarray(ub, dtype=np.int64), (n,)).copy())

    def add_row(self, cols: IntArray, coefs: IntArray, lb: int = -INF, ub: int = INF) -> None:
        cols = np.asarray(cols, dtype=np.int64)
        self.add_rows(np.array([cols.shape[0]]), cols, coefs, lb, ub)

    def add_objective(self, cols: IntArray, coefs: IntArray) -> None:
        self._obj_chunks.append((np.asarray(cols, dtype=np.int64), np.asarray(coefs, dtype=np.int64)))

    def build(self, maximize: bool, offset: int = 0, hint: IntArray | None = None) -> LinearModel:
        def cat(chunks: Sequence[npt.NDArray[Any]], dtype: type[_Scalar]) -> npt.NDArray[_Scalar]:
            return np.concatenate(chunks).astype(dtype) if chunks else np.zeros(0, dtype=dtype)

        objective = np.zeros(self._n, dtype=np.int64)
        for cols, coefs in self._obj_chunks:
            np.add.at(objective, cols, coefs)
        counts = cat(self._row_counts, np.int64)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return LinearModel(
            var_lb=cat(self._lb, np.int64), var_ub=cat(self._ub, np.int64),
            var_integer=cat(self._int, np.bool_), indptr=indptr,
            indices=cat(self._row_cols, np.int64), data=cat(self._row_coefs, np.int64),
            row_lb=cat(self._row_lb, np.int64), row_ub=cat(self._row_ub, np.int64),
            objective=objective, maximize=maximize, objective_offset=offset,
            hint=None if hint is None else np.asarray(hint, dtype=np.int64),
        )
