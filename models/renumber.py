"""The classes of a problem's rules: which classes each ties together, and the rules over new
class numbers (and, optionally, a part of the nodes). A kind of rule over classes is named here
once for both.

Two places make a problem of other classes from one: the solver's independent parts
(``solver.split.subproblem``: a part's classes, numbered from 0, on its nodes) and the preemption
problem (``models.preempt_problem.split_classes``: each class split into several, every node
kept). Both hand :func:`renumbered_rules` each old class's new classes (``children``, ascending;
a class without any is left out) and get every rule over classes back: a rule whose first class
has no child is dropped (a part's rules are all over its own classes), every other rule's classes
are its classes' children, ascending, and with ``nodes`` its per-node arrays (domains, per-node
caps, a per-node preference's scores) keep those nodes only, in that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from kubeplace.models.problem import DomainPreference, IntArray, NodePreference, Preference, Problem


def rule_classes(problem: Problem) -> list[tuple[int, ...]]:
    """The classes each rule ties together (all of one rule must be solved together)."""
    groups: list[tuple[int, ...]] = [*(g.classes for g in problem.group_caps), *(g.classes for g in problem.gangs)]
    groups += [(*r.carriers, *r.matched) for r in problem.exclusions]
    groups += [(*r.carriers, *r.counted) for r in problem.spreads]
    groups += [(*r.carriers, *r.counted) for r in problem.preferences if isinstance(r, DomainPreference)]
    by_name = {a.name: a for a in problem.attractions}
    groups += [(*a.carriers, *a.supporters, *(c for r in a.rivals for c in by_name[r].carriers))
               for a in problem.attractions]
    return [g for g in groups if g]


def renumbered_rules(p: Problem, children: Mapping[int, Sequence[int]],
                     nodes: IntArray | None = None) -> dict[str, Any]:
    """``p``'s group caps, gangs, inter-pod rules and preferences over the new classes (the
    fields of a ``Problem``, to ``replace`` into one), on ``nodes`` when given."""

    def remap(classes: Sequence[int]) -> tuple[int, ...]:
        return tuple(sorted(n for c in classes for n in children.get(c, ())))

    def kept(classes: Sequence[int]) -> bool:
        return bool(classes) and bool(children.get(classes[0]))

    def on(values: IntArray) -> IntArray:
        return values if nodes is None else values[nodes]

    def maybe(values: IntArray | None) -> IntArray | None:
        return None if values is None else on(values)

    def preference(pref: Preference) -> Preference | None:
        if isinstance(pref, DomainPreference):
            if not kept(pref.carriers):
                return None
            return replace(pref, carriers=remap(pref.carriers), counted=remap(pref.counted), domain=on(pref.domain))
        assert isinstance(pref, NodePreference)
        rows = sorted((n, k) for k, c in enumerate(pref.classes) for n in children.get(c, ()))
        if not rows:
            return None
        raw = pref.raw[np.array([k for _, k in rows], dtype=np.int64)]
        return replace(pref, classes=tuple(n for n, _ in rows), raw=raw if nodes is None else raw[:, nodes])

    preferences = (preference(pref) for pref in p.preferences)
    return {
        "group_caps": tuple(replace(g, classes=remap(g.classes), cap=g.cap if g.domain is not None else on(g.cap),
                                    domain=maybe(g.domain)) for g in p.group_caps if kept(g.classes)),
        "gangs": tuple(replace(g, classes=remap(g.classes), domain=maybe(g.domain), preferred=maybe(g.preferred))
                       for g in p.gangs if kept(g.classes)),
        "exclusions": tuple(replace(r, carriers=remap(r.carriers), matched=remap(r.matched), domain=on(r.domain))
                            for r in p.exclusions if kept(r.carriers)),
        "spreads": tuple(replace(r, carriers=remap(r.carriers), counted=remap(r.counted), domain=on(r.domain))
                         for r in p.spreads if kept(r.carriers)),
        "attractions": tuple(replace(a, carriers=remap(a.carriers), supporters=remap(a.supporters),
                                     starters=remap(a.starters), domains=tuple(on(d) for d in a.domains),
                                     cell=on(a.cell)) for a in p.attractions if kept(a.carriers)),
        "preferences": tuple(pref for pref in preferences if pref is not None),
    }
