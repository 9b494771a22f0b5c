"""The inter-pod rules and the caps in an explanation: which nodes each rejects for a pod the
plan leaves out, on the cluster as the plan leaves it (the running pods and every placement),
in the kube-scheduler's words.

A pod left out would come after every placement of the plan, so the kube-scheduler's checks
see them all: PodTopologySpread's skew over the final counts (the floor being the smallest
count over the eligible domains, 0 with fewer than minDomains), InterPodAffinity's own affinity
(a pod matching all the terms in each term's domain, or nothing matching anywhere and the pod
matching itself), its own anti-affinity (a matched pod in the domain) and the placed pods'
anti-affinity (a carrier in the domain).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from kubeplace.models.plugins.inter_pod_affinity import (
    AFFINITY_MISMATCH,
    ANTI_AFFINITY_MISMATCH,
    EXISTING_ANTI_AFFINITY_MISMATCH,
)
from kubeplace.models.plugins.inter_pod_affinity import NAME as INTER_POD_AFFINITY
from kubeplace.models.plugins.topology_spread import NAME as POD_TOPOLOGY_SPREAD
from kubeplace.models.plugins.topology_spread import SPREAD_MISMATCH
from kubeplace.models.problem import Assignment, Attraction, BoolArray, GroupCap, IntArray, Problem

Failure = tuple[str, str, BoolArray]
"""(plugin name, reason, the nodes it rejects)"""


def cap_left(cap: GroupCap, a: Assignment, n_nodes: int) -> IntArray:
    """(N,) the room a cap leaves on each node's part (its node, or its domain) after ``a``."""
    member = np.isin(a.cls, np.asarray(cap.classes, dtype=np.int64))
    taken = np.bincount(a.node[member], weights=a.counts[member], minlength=n_nodes).astype(np.int64)
    if cap.domain is None:
        return cap.cap - taken
    inside = cap.domain >= 0
    per_domain = np.bincount(cap.domain[inside], weights=taken[inside], minlength=len(cap.cap)).astype(np.int64)
    left = cap.cap - per_domain
    return np.where(inside, left[np.maximum(cap.domain, 0)] if len(left) else 0, 1).astype(np.int64)


def batch_failures(p: Problem, c: int, a: Assignment, caps_left: Sequence[IntArray],
                   reasons: dict[str, str]) -> Iterator[Failure]:
    """The nodes each cap and inter-pod rule of class c rejects after ``a``; ``reasons`` gives a
    cap's reason by plugin (InterPodAffinity's caps are anti-affinity among one class's pods)."""
    for cap, left in zip(p.group_caps, caps_left, strict=True):
        if c in cap.classes:
            reason = ANTI_AFFINITY_MISMATCH if cap.plugin == INTER_POD_AFFINITY else reasons.get(
                cap.plugin, f"node(s) had no room under {cap.plugin}")
            yield cap.plugin, reason, left <= 0
    counts = _Counts(p, a)
    for sp in p.spreads:
        if c in sp.carriers:
            n = sp.bound + counts.per_domain(sp.counted, sp.domain, sp.n_domains)
            floor = int(n.min()) if sp.n_domains >= sp.min_domains and sp.n_domains else 0
            at = np.maximum(sp.domain, 0)
            skew = (n[at] if len(n) else 0) + int(c in sp.counted) - floor
            yield POD_TOPOLOGY_SPREAD, SPREAD_MISMATCH, (sp.domain >= 0) & (skew > sp.max_skew)
    for at_rule in p.attractions:
        if c in at_rule.carriers:  # InterPodAffinity's, or another plugin's (VolumeBinding's shared claims)
            if at_rule.plugin in ("", INTER_POD_AFFINITY):
                yield INTER_POD_AFFINITY, AFFINITY_MISMATCH, _unsupported(counts, at_rule, c)
            else:
                yield at_rule.plugin, reasons.get(at_rule.plugin, AFFINITY_MISMATCH), _unsupported(counts, at_rule, c)
    for ex in p.exclusions:
        size = int(ex.domain.max(initial=-1)) + 1
        at = np.maximum(ex.domain, 0)
        if c in ex.carriers:
            matched = counts.per_domain(ex.matched, ex.domain, size)
            yield INTER_POD_AFFINITY, ANTI_AFFINITY_MISMATCH, (ex.domain >= 0) & (matched[at] > 0 if size else False)
        if c in ex.matched:
            carriers = counts.per_domain(ex.carriers, ex.domain, size)
            yield (INTER_POD_AFFINITY, EXISTING_ANTI_AFFINITY_MISMATCH,
                   (ex.domain >= 0) & (carriers[at] > 0 if size else False))


class _Counts:
    """Placed pods per node of a set of classes."""

    def __init__(self, p: Problem, a: Assignment) -> None:
        self.p, self.a = p, a

    def per_node(self, classes: Sequence[int]) -> IntArray:
        member = np.isin(self.a.cls, np.asarray(classes, dtype=np.int64))
        return np.bincount(self.a.node[member], weights=self.a.counts[member],
                           minlength=self.p.n_nodes).astype(np.int64)

    def per_domain(self, classes: Sequence[int], domain: IntArray, size: int) -> IntArray:
        per_node = self.per_node(classes)
        inside = domain >= 0
        return np.bincount(domain[inside], weights=per_node[inside], minlength=size).astype(np.int64)


def _unsupported(counts: _Counts, at_rule: Attraction, c: int) -> BoolArray:
    """Nodes where some term's domain holds no pod matching all the terms (running, or placed
    of the classes that match them), or that lack a key; none when nothing matches anywhere
    and the pod may start its group."""
    matching = sorted({*at_rule.supporters, *at_rule.starters})
    placed = counts.per_node(matching)
    fails = np.zeros(counts.p.n_nodes, dtype=np.bool_)
    anywhere = False
    for dom, bound in zip(at_rule.domains, at_rule.bound_support, strict=True):
        inside = dom >= 0
        here = bound | (np.bincount(dom[inside], weights=placed[inside], minlength=len(bound)) > 0)
        anywhere |= bool(here.any())
        supported = here[np.maximum(dom, 0)] if len(here) else np.zeros(len(dom), dtype=np.bool_)
        fails |= ~inside | ~supported
    if not anywhere and c in at_rule.starters:  # the first pod of its group: only the keys count
        return np.asarray(at_rule.cell < 0, dtype=np.bool_)
    return fails
