"""What the score parts of the rules share: the profile's score weight checked (and the args of
an objective score that has nothing but its weight), the
``PreferenceTerm`` a rule adds when it has preferences, and the ``NodePreference`` rows of a
score that depends on the node only (classes grouped by what the score reads).

A score part keys the classes by what it reads and returns ``Problem.preferences`` over classes
and domains; its term carries the profile's weight for the plugin (by default the
kube-scheduler's default profile: TaintToleration 3, NodeAffinity 2, InterPodAffinity 2,
PodTopologySpread 2).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.models.framework import ObjectiveTerm, PreferenceTerm
from kubeplace.models.problem import IntArray, NodePreference, Problem, Rule


def check_weight(weight: int) -> list[str]:
    return [] if 0 <= weight <= 100 else [f"weight: expected an integer from 0 to 100, got {weight}"]


@dataclass(frozen=True)
class ObjectiveWeightArgs:
    """The args of an objective score that has nothing but its weight (BinPack,
    GPUFragmentation)."""

    weight: int = 1

    def validate(self) -> list[str]:
        return [] if self.weight >= 1 else [f"weight: expected an integer >= 1, got {self.weight}"]


def preference_terms(plugin: str, weight: int, problem: Problem) -> Sequence[ObjectiveTerm]:
    if weight <= 0 or not any(p.plugin == plugin for p in problem.preferences):
        return ()
    return (PreferenceTerm(plugin, weight),)


def class_groups(keys: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    out: dict[Hashable, list[int]] = {}
    for c, key in enumerate(keys):
        out.setdefault(key, []).append(c)
    return out


def node_preference(raw_by_key: Mapping[Hashable, IntArray], groups: Mapping[Hashable, list[int]],
                     normalise: str) -> list[Rule]:
    """One NodePreference over every class whose raw score is not the same on every node."""
    classes = [c for key, members in groups.items() if raw_by_key[key].size and np.ptp(raw_by_key[key]) > 0
               for c in members]
    if not classes:
        return []
    rows = {c: raw_by_key[key] for key, members in groups.items() for c in members}
    return [NodePreference("", tuple(classes), np.stack([rows[c] for c in classes]).astype(np.int64), normalise)]
