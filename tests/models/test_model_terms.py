"""The table from objective term type to its meaning (``models.terms``): every term type has an exact
value and either a linear form or the reason it has none, and the evaluator, the placement model
and the move model all read a term through it (no term type skipped silently anywhere)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any, get_args

import numpy as np
import pytest

from kubeplace.models import evaluate, terms
from kubeplace.models.config import Configuration
from kubeplace.models.formulation.placement import Neighbourhood, objective_model
from kubeplace.models.framework import (
    FragmentationTerm,
    GangDomainsTerm,
    LoadBalanceTerm,
    NodesUsedTerm,
    ObjectiveTerm,
    PreferenceTerm,
)
from kubeplace.rebalance.cluster_state import state_of
from kubeplace.rebalance.layout import build_layout
from kubeplace.rebalance.model import Budgets, build_moves, objective_goal
from kubeplace.rebalance.movable import Rules
from kubeplace_bench.rebalance_clusters import node, pod

ONE_OF_EACH: tuple[ObjectiveTerm, ...] = (LoadBalanceTerm("cpu", 1), NodesUsedTerm(1), FragmentationTerm(1),
                                          GangDomainsTerm(1), PreferenceTerm("NodeAffinity", 2))


def test_every_term_type_has_a_row_in_the_table() -> None:
    assert set(terms.TERMS) == set(get_args(ObjectiveTerm)) == {type(t) for t in ONE_OF_EACH}


@pytest.mark.parametrize("kind", list(terms.TERMS), ids=lambda k: k.__name__)
def test_every_term_type_is_linear_or_says_why_not(kind: type) -> None:
    row = terms.TERMS[kind]
    assert callable(row.evaluate)
    assert (row.linearise is None) == bool(row.no_linear_form.strip())


def test_a_term_of_no_known_type_is_refused() -> None:
    with pytest.raises(KeyError):
        terms.kind_of(object())  # type: ignore[arg-type]


def test_the_evaluator_and_both_models_read_every_term_through_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each term of every type is evaluated by the table's ``evaluate``, and each with a linear
    form is written by the table's ``linearise`` into the placement model and into the move model."""
    evaluated: Counter[type] = Counter()
    linearised: Counter[type] = Counter()

    def recording(kind: type, row: terms.TermKind[Any]) -> terms.TermKind[Any]:
        def evaluate_(p: Any, a: Any, t: Any) -> float:
            evaluated[kind] += 1
            return row.evaluate(p, a, t)

        def linearise_(m: Any, t: Any, mu: Any) -> Any:
            linearised[kind] += 1
            assert row.linearise is not None
            return row.linearise(m, t, mu)

        return replace(row, evaluate=evaluate_, linearise=None if row.linearise is None else linearise_)

    monkeypatch.setattr(terms, "TERMS", {kind: recording(kind, row) for kind, row in terms.TERMS.items()})
    state = state_of([(o, "test") for o in (node("a", 4000, 16384), node("b", 4000, 16384),
                                            pod("p", "web", 500, 256, node_name="a", owner=("ReplicaSet", "p")))])
    config = Configuration()
    layout = replace(build_layout(state, Rules(), config, config.profile(None)), terms=ONE_OF_EACH)
    p, now = layout.problem, layout.assignment(layout.x0)
    mu = evaluate.mean_utilisation(p, now)
    linear = {kind for kind, row in terms.TERMS.items() if row.linearise is not None}

    terms.objective_value(p, now, ONE_OF_EACH)
    assert evaluated == Counter(set(terms.TERMS))
    objective_model(p, Neighbourhood.whole(p), ONE_OF_EACH, evaluate.stage_weights(p, now), mu, now)
    assert linearised == Counter(linear)
    objective_goal(build_moves(layout, Budgets()), np.asarray(mu))
    assert linearised == Counter({kind: 2 for kind in linear})
