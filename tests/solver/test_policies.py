"""The greedy policy registry (``solver.policies``): one line per policy, read by the solver's greedy
candidates (kubeplace's warm starts; ``simulate``'s baselines are ``simulate.policies``)."""

from __future__ import annotations

import dataclasses

import pytest

from kubeplace.solver.greedy import greedy, greedy_in_queue
from kubeplace.solver.policies import POLICIES
from tests.builders import node, pod, snapshot_of
from tests.solver.test_solver_greedy_fgd import problem_of


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_policy_places_a_checked_answer(name: str) -> None:
    snap = snapshot_of(*(node(n).cpu("4").memory("8Gi").pods(110) for n in "ab"),
                       *(pod(f"p{i}").cpu("1").memory("1Gi") for i in range(6)))
    problem = problem_of(snap)
    for answer in (greedy(problem, name), greedy_in_queue(problem, name)):
        per_node = [int(answer.counts[answer.node == i].sum()) for i in range(problem.n_nodes)]
        assert sum(per_node) == 6 and max(per_node) <= 4


def test_a_policy_is_its_registry_line() -> None:
    """A policy registered under a new name runs through ``greedy`` by that name alone."""
    snap = snapshot_of(*(node(n).cpu("4").memory("8Gi").pods(110) for n in "ab"),
                       *(pod(f"p{i}").cpu("1").memory("1Gi") for i in range(2)))
    problem = problem_of(snap)
    renamed = dataclasses.replace(POLICIES["spread"], name="spread-again")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(POLICIES, renamed.name, renamed)
        assert sorted(greedy(problem, "spread-again").counts.tolist()) == [1, 1]
    with pytest.raises(ValueError, match="unknown greedy policy"):
        greedy(problem, "spread-again")
