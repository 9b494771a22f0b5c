"""TaintToleration's score part: the node's PreferNoSchedule taints the pod does not tolerate
(only tolerations with effect "" or PreferNoSchedule count), fewer is better
(``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`` Score)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.objects import PREFER_NO_SCHEDULE, Node, Pod, Taint, Toleration
from kubeplace.models.framework import ClassView, ObjectiveTerm, RunContext
from kubeplace.models.plugins.score_parts import class_groups, node_preference, preference_terms
from kubeplace.models.plugins.taint_toleration.args import TaintTolerationArgs
from kubeplace.models.plugins.taint_toleration.plugin import NAME, TaintToleration, build, tolerates
from kubeplace.models.preferences import REVERSE
from kubeplace.models.problem import IntArray, Problem, Rule


def soft_tolerations(pod: Pod) -> tuple[Toleration, ...]:
    """The tolerations TaintToleration's score reads (``getAllTolerationPreferNoSchedule``)."""
    return tuple(t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE))

def untolerated_soft_taints(tolerations: Sequence[Toleration], nodes: Sequence[Node]) -> IntArray:
    """TaintToleration's raw score: the node's PreferNoSchedule taints not tolerated."""
    memo: dict[tuple[Taint, ...], int] = {}

    def count(taints: tuple[Taint, ...]) -> int:
        if taints not in memo:
            memo[taints] = sum(1 for taint in taints if taint.effect == PREFER_NO_SCHEDULE
                               and not any(tolerates(t, taint) for t in tolerations))
        return memo[taints]
    return np.array([count(n.taints) for n in nodes], dtype=np.int64)

@dataclass(frozen=True)
class TaintTolerationScore:
    weight: int
    name: str = NAME

    def pod_key(self, pod: Pod) -> Hashable:
        return soft_tolerations(pod)

    def constraints(self, view: ClassView) -> Sequence[Rule]:
        if not any(t.effect == PREFER_NO_SCHEDULE for n in view.nodes for t in n.taints):
            return []
        groups = class_groups([soft_tolerations(p) for p in view.class_pods])
        raw = {key: untolerated_soft_taints(key, view.nodes) for key in groups}  # type: ignore[arg-type]
        return node_preference(raw, groups, REVERSE)

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return preference_terms(self.name, self.weight, problem)


def build_taint_toleration(args: TaintTolerationArgs, ctx: RunContext) -> tuple[TaintToleration,
                                                                                TaintTolerationScore]:
    """TaintToleration: the filter (NoSchedule, NoExecute) and the PreferNoSchedule score."""
    return build(None, ctx), TaintTolerationScore(args.weight)
