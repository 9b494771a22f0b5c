"""InterPodAffinity's score part (``interpodaffinity/scoring.go``): towards running pods, per
node, the pod's preferred affinity (+weight) and anti-affinity (-weight) terms times the matching
pods in the node's domain, and the running pods' required affinity (``hardPodAffinityWeight``)
and preferred terms that match the pod; among the pods of the batch, a preferred anti-affinity
term that the carriers match themselves (replicas keeping apart) is a DomainPreference.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.objects import Node, Pod
from kubeplace.models.domains import Matcher, TermId, label_domains, n_domains
from kubeplace.models.framework import ClassView, ObjectiveTerm
from kubeplace.models.plugins.inter_pod_affinity.args import InterPodAffinityArgs
from kubeplace.models.plugins.score_parts import class_groups, node_preference, preference_terms
from kubeplace.models.preferences import MINMAX, points_per_pod
from kubeplace.models.problem import DomainPreference, IntArray, Problem, Rule

Weighted = tuple[TermId, int]
"""A term as a score reads it: its identity and its signed weight."""


def own_weighted(pod: Pod) -> tuple[Weighted, ...]:
    """The pod's preferred affinity (+weight) and anti-affinity (-weight) terms."""
    return tuple(sorted({*((TermId.of(t, pod.namespace), t.weight) for t in pod.preferred_affinity),
                         *((TermId.of(t, pod.namespace), -t.weight) for t in pod.preferred_anti_affinity)},
                        key=repr))


@dataclass(frozen=True)
class DomainCounts:
    """Pods per value of one topology key (only nodes with the key count)."""

    per_value: dict[str, int] = field(default_factory=dict)

    def add(self, node: Node, key: str, amount: int = 1) -> None:
        if key in node.labels:
            self.per_value[node.labels[key]] = self.per_value.get(node.labels[key], 0) + amount

    def on(self, key: str, nodes: Sequence[Node]) -> IntArray:
        return np.array([self.per_value.get(n.labels.get(key, ""), 0) if key in n.labels else 0 for n in nodes],
                        dtype=np.int64)


@dataclass(frozen=True)
class InterPodAffinityScore:
    """``existing``: the running pods' scoring terms (required affinity at hardPodAffinityWeight,
    preferred terms at their signed weight) with their carriers per domain; ``running``: a
    running pod per label class with the nodes of its pods; ``live_anti``: the pending pods'
    preferred anti-affinity terms."""

    weight: int
    matcher: Matcher
    existing: Mapping[Weighted, DomainCounts]
    running: tuple[tuple[Pod, tuple[Node, ...]], ...]
    live_anti: tuple[TermId, ...]
    pending: dict[TermId, int] = field(default_factory=dict)
    """Per live preferred anti-affinity term: the pending pods it matches (the even count it aims at)."""
    name: str = "InterPodAffinity"
    selected: dict[int, tuple[tuple[Weighted, ...], tuple[TermId, ...]]] = field(default_factory=dict)

    def selecting(self, pod: Pod) -> tuple[tuple[Weighted, ...], tuple[TermId, ...]]:
        cls = self.matcher.label_class(pod)
        found = self.selected.get(cls)
        if found is None:
            found = self.selected[cls] = (tuple(w for w in self.existing if self.matcher.matches(w[0], pod)),
                                          tuple(t for t in self.live_anti if self.matcher.matches(t, pod)))
        return found

    def pod_key(self, pod: Pod) -> Hashable:
        return own_weighted(pod), self.selecting(pod)

    def raw(self, pod: Pod, nodes: Sequence[Node]) -> IntArray:
        """The score towards running pods per node (``interpodaffinity/scoring.go``)."""
        raw = np.zeros(len(nodes), dtype=np.int64)
        for term, weight in own_weighted(pod):
            counts = DomainCounts()
            for other, on in self.running:
                if self.matcher.matches(term, other):
                    for node in on:
                        counts.add(node, term.topology_key)
            raw += weight * counts.on(term.topology_key, nodes)
        for term, weight in self.selecting(pod)[0]:
            raw += weight * self.existing[(term, weight)].on(term.topology_key, nodes)
        return raw

    def constraints(self, view: ClassView) -> Sequence[Rule]:
        pods = view.class_pods
        groups = class_groups([self.pod_key(p) for p in pods])
        raw = {key: self.raw(pods[members[0]], view.nodes) for key, members in groups.items()}
        rules = node_preference(raw, groups, MINMAX)
        for term in self.live_anti:
            carriers = tuple(c for c, p in enumerate(pods) if any(t == term and w < 0 for t, w in own_weighted(p)))
            counted = tuple(c for c, p in enumerate(pods) if term in self.selecting(p)[1])
            if not carriers or set(carriers) != set(counted):
                continue  # towards running pods only: the node part above
            domain = label_domains(term.topology_key, view.nodes)
            size = n_domains(domain)
            rules.append(DomainPreference(f"preferred anti-affinity {term.describe()}", "", carriers, counted, domain,
                                          np.zeros(size, dtype=np.int64), points_per_pod(self.pending.get(term, 0),
                                                                                         size)))
        return rules

    def terms(self, problem: Problem) -> Sequence[ObjectiveTerm]:
        return preference_terms(self.name, self.weight, problem)


def scoringpreference_terms(pod: Pod, hard_weight: int, with_preferred: bool) -> list[tuple[TermId, int]]:
    """A running pod's terms that score incoming pods, with their signed weights."""
    found = [(TermId.of(t, pod.namespace), hard_weight) for t in pod.affinity if hard_weight]
    if with_preferred:
        found += [(TermId.of(t, pod.namespace), t.weight) for t in pod.preferred_affinity]
        found += [(TermId.of(t, pod.namespace), -t.weight) for t in pod.preferred_anti_affinity]
    return found


def inter_pod_score(args: InterPodAffinityArgs, node_of: Mapping[str, Node], bound: Sequence[Pod],
                    pending: Sequence[Pod], namespace_labels: Mapping[str, Mapping[str, str]]) -> InterPodAffinityScore:
    """``node_of``: the snapshot's nodes by name."""
    matcher = Matcher(namespace_labels)
    existing: dict[Weighted, DomainCounts] = {}
    by_class: dict[int, tuple[Pod, list[Node]]] = {}
    own = any(p.preferred_affinity or p.preferred_anti_affinity for p in pending)  # else ``running`` is not read
    for pod in bound:
        scoring = pod.affinity or pod.preferred_affinity or pod.preferred_anti_affinity
        if not (scoring or own):  # (most running pods: no term, and no pending term reads them)
            continue
        node = node_of.get(pod.node_name)
        if node is None:
            continue
        if scoring:
            for weighted in scoringpreference_terms(pod, args.hardPodAffinityWeight,
                                          not args.ignorePreferredTermsOfExistingPods):
                existing.setdefault(weighted, DomainCounts()).add(node, weighted[0].topology_key)
        if own:
            by_class.setdefault(matcher.label_class(pod), (pod, []))[1].append(node)
    live = tuple(sorted({TermId.of(t, p.namespace) for p in pending for t in p.preferred_anti_affinity}, key=repr))
    score = InterPodAffinityScore(args.weight, matcher, existing, tuple((p, tuple(on)) for p, on in by_class.values()),
                                  live)
    for pod in pending if live else ():  # (no live term: no pod to count)
        for term in score.selecting(pod)[1]:
            score.pending[term] = score.pending.get(term, 0) + 1
    return score
