"""PodTopologySpread's score part (``podtopologyspread/scoring.go``): each ScheduleAnyway
constraint is a DomainPreference over the nodes its inclusion policies keep (the matching pods of
the pod's namespace per domain); nodes missing one of the pod's soft keys score 0. ``build``
makes the filter and constraint part (``plugin``) and this score part together."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.objects import HONOR, Pod
from kubeplace.models.domains import Matcher, SpreadId, canonical, spread_ids
from kubeplace.models.framework import ClassView, ObjectiveTerm, PreferenceTerm, RunContext
from kubeplace.models.plugins.topology_spread.args import PodTopologySpreadArgs
from kubeplace.models.plugins.topology_spread.plugin import NAME, DomainCounter, PodTopologySpread, counting
from kubeplace.models.preferences import DEFAULT, points_per_pod
from kubeplace.models.problem import DomainPreference, NodePreference, Problem, Rule


def soft_spread_ids(pod: Pod) -> tuple[SpreadId, ...]:
    """The pod's ScheduleAnyway constraints as they count pods: every soft key is required of a
    scored node (``requireAllTopologies``; not for the system defaults), minDomains does not apply."""
    if not pod.spread:
        return ()
    soft = [c for c in pod.spread if not c.hard]
    keys = tuple(sorted({c.topology_key for c in soft if not c.system_default}))
    affinity = (tuple(sorted(pod.node_selector.items())), pod.required_terms)
    return tuple(SpreadId(pod.namespace, canonical(c.selector), c.topology_key, c.max_skew, 1, keys,
                          affinity if c.node_affinity_policy == HONOR else None,
                          pod.tolerations if c.node_taints_policy == HONOR else None) for c in soft)


@dataclass(frozen=True)
class SpreadScore:
    """The ScheduleAnyway constraints (``podtopologyspread/scoring.go``): per constraint, a
    DomainPreference over the nodes its inclusion policies keep; nodes missing one of the
    pod's soft keys score 0 (a NodePreference)."""

    weight: int
    live: tuple[SpreadId, ...]
    pending: Mapping[SpreadId, int]
    """Per live constraint: the pending pods it counts (the even count it aims at)."""
    running: tuple[tuple[Pod, tuple[str, ...]], ...]
    matcher: Matcher = field(default_factory=lambda: Matcher({}))
    counted_by: dict[int, tuple[SpreadId, ...]] = field(default_factory=dict)
    name: str = NAME

    def counting(self, pod: Pod) -> tuple[SpreadId, ...]:
        return counting(self.live, self.matcher, self.counted_by, pod)

    def pod_key(self, pod: Pod) -> Hashable:
        return soft_spread_ids(pod), self.counting(pod)

    def constraints(self, view: ClassView) -> Sequence[Rule]:
        pods = view.class_pods
        carried = [soft_spread_ids(p) for p in pods]
        counter = DomainCounter(view.nodes, self.running)
        rules: list[Rule] = []
        missing: dict[tuple[str, ...], list[int]] = {}
        for c, ids in enumerate(carried):
            if ids:
                missing.setdefault(ids[0].hard_keys, []).append(c)
        for keys, classes in missing.items():
            raw = np.array([all(k in n.labels for k in keys) for n in view.nodes], dtype=np.int64)
            if np.ptp(raw) > 0:
                rules.append(NodePreference("", tuple(classes), np.tile(raw, (len(classes), 1)), DEFAULT))
        for spread in self.live:
            carriers = tuple(c for c, ids in enumerate(carried) if spread in ids)
            if not carriers:
                continue
            domain, bound = counter.count(spread)
            counted = tuple(c for c, p in enumerate(pods) if spread in self.counting(p))
            points = points_per_pod(int(bound.sum()) + self.pending.get(spread, 0), len(bound))
            rules.append(DomainPreference(f"soft spread {spread.describe()}", "", carriers, counted, domain, bound,
                                          points))
        return rules

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        if self.weight <= 0 or not any(p.plugin == self.name for p in problem.preferences):
            return ()
        return (PreferenceTerm(self.name, self.weight),)


def build(args: PodTopologySpreadArgs, ctx: RunContext) -> tuple[PodTopologySpread, SpreadScore]:
    live = tuple(sorted({s for p in ctx.snapshot.pending for s in spread_ids(p)}, key=repr))
    keys = tuple(sorted({s.topology_key for s in live}))
    soft = tuple(sorted({s for p in ctx.snapshot.pending for s in soft_spread_ids(p)}, key=repr))
    running: dict[Hashable, tuple[Pod, list[str]]] = {}
    for pod in ctx.snapshot.bound if live or soft else ():  # (only a constraint counts them)
        key = (pod.namespace, frozenset(pod.labels.items()), pod.deleting)
        running.setdefault(key, (pod, []))[1].append(pod.node_name)
    runs = tuple((p, tuple(names)) for p, names in running.values())
    matcher = Matcher(ctx.snapshot.namespace_labels)
    score = SpreadScore(args.weight, soft, {}, runs, matcher)
    pending: dict[SpreadId, int] = {}
    for pod in ctx.snapshot.pending if soft else ():  # (no soft constraint: no pod to count)
        for spread in score.counting(pod):
            pending[spread] = pending.get(spread, 0) + 1
    return (PodTopologySpread(live, keys, runs, Matcher(ctx.snapshot.namespace_labels)),
            SpreadScore(args.weight, soft, pending, runs, matcher, score.counted_by))
