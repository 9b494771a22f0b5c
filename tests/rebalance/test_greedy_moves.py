"""The greedy moves, keyed by objective term (``rebalance.greedy_moves.MOVES``)."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.models.config import Configuration, Profile
from kubeplace.models.framework import Objective
from kubeplace.models.problem import IntArray
from kubeplace.models.terms import TERMS
from kubeplace.rebalance import solve_moves
from kubeplace.rebalance.cluster_state import state_of
from kubeplace.rebalance.greedy_moves import MOVES
from kubeplace.rebalance.layout import build_layout
from kubeplace.rebalance.model import Budgets
from kubeplace.rebalance.movable import Rules
from tests.rebalance.test_rebalance_objective import hot


def test_every_greedy_move_is_of_a_registered_term() -> None:
    assert set(MOVES) <= set(TERMS)


@pytest.mark.parametrize("objective", list(Objective))
def test_the_first_answer_tries_the_move_of_each_term_the_objective_has(objective: Objective,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    layout = build_layout(state_of([(o, "t") for o in hot()]), Rules(), Configuration(), Profile(objective=objective))
    tried: list[type] = []

    def recording(kind: type, move: Any) -> Any:
        def run(view: Any, budgets: Budgets) -> IntArray:
            tried.append(kind)
            return move(view, budgets)  # type: ignore[no-any-return]
        return run

    monkeypatch.setattr(solve_moves, "MOVES", {kind: recording(kind, move) for kind, move in MOVES.items()})
    solve_moves.first_answer(layout, Budgets())
    assert tried == [kind for kind in MOVES if any(isinstance(t, kind) for t in layout.terms)]
    assert tried  # (every objective has a term with a greedy move)
