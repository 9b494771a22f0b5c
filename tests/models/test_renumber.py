"""``models.renumber``: a problem's rules over new class numbers, the one copy the solver's
independent parts (``solver.split.subproblem``) and the preemption problem's split classes
(``models.preempt_problem.split_classes``) both use."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kubeplace.models.problem import Exclusion, GroupCap, NodePreference, Problem
from kubeplace.models.renumber import renumbered_rules
from kubeplace.solver.split import subproblem


def three_classes() -> Problem:
    """Classes 0, 1, 2 on nodes 0..3: a host-port cap over 0 and 2, an anti-affinity of 1
    against 2 in zones, a per-node preference of 0 and 2."""
    n = 4
    return Problem(
        node_names=("a", "b", "c", "d"), resources=("cpu",), capacity=np.full((n, 1), 8, np.int64),
        used=np.zeros((n, 1), np.int64), demand=np.ones((3, 1), np.int64), count=np.array([2, 1, 3]),
        weight=np.ones(3, np.int64), eligible=np.ones((3, n), np.bool_), members=((0, 1), (2,), (3, 4, 5)),
        group_caps=(GroupCap("hostPort TCP/80", (0, 2), np.array([1, 1, 2, 2])),),
        exclusions=(Exclusion("anti", (1,), (2,), np.array([0, 0, 1, 1])),),
        preferences=(NodePreference("NodeAffinity", (0, 2), np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), "default"),))


def test_split_classes_take_every_rule_of_their_class_and_a_per_node_row_each() -> None:
    p = three_classes()  # class 0 splits into new classes 0 and 3, 1 becomes 1, 2 becomes 2
    rules = renumbered_rules(p, {0: (0, 3), 1: (1,), 2: (2,)})
    assert [g.classes for g in rules["group_caps"]] == [(0, 2, 3)]
    assert [(r.carriers, r.matched) for r in rules["exclusions"]] == [((1,), (2,))]
    (pref,) = rules["preferences"]
    assert pref.classes == (0, 2, 3) and pref.raw.tolist() == [[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, 3, 4]]


def test_a_part_keeps_the_rules_over_its_classes_on_its_nodes() -> None:
    p = three_classes()  # the part: classes 1 and 2 on nodes 2 and 3
    sub = subproblem(p, np.array([1, 2]), np.array([2, 3]))
    assert sub.group_caps == ()  # its first class, 0, is not in the part
    (anti,) = sub.exclusions
    assert (anti.carriers, anti.matched, anti.domain.tolist()) == ((0,), (1,), [1, 1])
    (pref,) = sub.preferences
    assert pref.classes == (1,) and pref.raw.tolist() == [[7, 8]]
    whole = subproblem(replace(p, exclusions=()), np.arange(3), np.array([1, 3]))
    (cap,) = whole.group_caps
    assert cap.classes == (0, 2) and cap.cap.tolist() == [1, 2]
