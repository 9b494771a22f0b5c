"""The default profile's scores for the kube-scheduler emulation, on the feasible nodes.

Each plugin's raw score is normalised to 0..100 over the feasible nodes as the kube-scheduler
does and weighted as in the default profile (``apis/config/v1/default_plugins.go``):
TaintToleration 3, NodeAffinity 2, NodeResourcesFit (LeastAllocated, cpu and memory) 1,
PodTopologySpread 2, InterPodAffinity 2, NodeResourcesBalancedAllocation 1. ImageLocality is
left out (the snapshot holds no images).
"""

from __future__ import annotations

import numpy as np

from kubeplace.kube.objects import CPU, MEMORY, PREFER_NO_SCHEDULE, Pod
from kubeplace.kube.pod_affinity import merge_label_keys
from kubeplace.models.plugins import node_affinity, taint_toleration
from kubeplace.models.plugins.inter_pod_affinity.emulate import affinity_selects
from kubeplace.models.plugins.topology_spread.emulate import spread_counted, spread_eligible
from kubeplace.models.problem import FloatArray, IntArray
from kubeplace.solver.emulate.node_state import Cluster

MAX_NODE_SCORE = 100
HOSTNAME = "kubernetes.io/hostname"
TAINT_WEIGHT, NODE_AFFINITY_WEIGHT, FIT_WEIGHT = 3, 2, 1
SPREAD_WEIGHT, INTER_POD_WEIGHT, BALANCED_WEIGHT = 2, 2, 1

def choose(cluster: Cluster, pod: Pod, candidates: IntArray) -> int:
    """The feasible node with the highest weighted score; among equal scores, the one the
    kube-scheduler's heap puts on top (:func:`heap_top`)."""
    if len(candidates) == 1:
        return int(candidates[0])
    total = (TAINT_WEIGHT * taint_score(cluster, pod, candidates)
             + NODE_AFFINITY_WEIGHT * node_affinity_score(cluster, pod, candidates)
             + FIT_WEIGHT * least_allocated_score(cluster, pod, candidates)
             + SPREAD_WEIGHT * spread_score(cluster, pod, candidates)
             + INTER_POD_WEIGHT * inter_pod_affinity_score(cluster, pod, candidates)
             + BALANCED_WEIGHT * balanced_allocation_score(cluster, pod, candidates))
    return int(candidates[heap_top(total)])


def heap_top(scores: IntArray) -> int:
    """The index of the node ``selectHost`` pops first: ``heap.Init`` (Go's container/heap) over
    the scores in the feasible nodes' order, a node above another when it scores more (their
    ``Randomizer`` is 0 without extenders), then the root. Among equal scores that is not a draw
    but a position the heap's sift-downs decide: the first node when all tie, another when some
    score less. The feasible nodes come in the search's order (``findNodesThatPassFilters``'
    workers finish in about that order)."""
    best = np.flatnonzero(scores == scores.max())
    if len(best) == 1:
        return int(best[0])
    heap = [int(s) for s in scores]
    order = list(range(len(heap)))
    n = len(heap)
    for i in range(n // 2 - 1, -1, -1):
        _sift_down(heap, order, i, n)
    return order[0]


def _sift_down(heap: list[int], order: list[int], i: int, n: int) -> None:
    """container/heap's ``down`` with ``Less(a, b) = heap[a] > heap[b]``."""
    while True:
        j = 2 * i + 1
        if j >= n:
            return
        if j + 1 < n and heap[j + 1] > heap[j]:
            j += 1
        if not heap[j] > heap[i]:
            return
        heap[i], heap[j] = heap[j], heap[i]
        order[i], order[j] = order[j], order[i]
        i = j


def default_normalize(raw: IntArray, reverse: bool) -> IntArray:
    """``helper.DefaultNormalizeScore``: raw * 100 / max (reversed: 100 minus that)."""
    top = int(raw.max()) if len(raw) else 0
    if top == 0:
        return np.full(len(raw), MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    scaled = raw * MAX_NODE_SCORE // top
    return MAX_NODE_SCORE - scaled if reverse else scaled


def taint_score(cluster: Cluster, pod: Pod, candidates: IntArray) -> IntArray:
    """Untolerated PreferNoSchedule taints (only tolerations with effect "" or
    PreferNoSchedule count), fewer is better."""
    tolerations = tuple(t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE))

    def untolerated() -> IntArray:
        return np.array([sum(1 for taint in node.taints if taint.effect == PREFER_NO_SCHEDULE
                             and not any(taint_toleration.tolerates(t, taint) for t in tolerations))
                         for node in cluster.nodes], dtype=np.int64)
    raw = cluster.node_score(("PreferNoSchedule", tolerations), untolerated)
    return default_normalize(raw[candidates], reverse=True)


def node_affinity_score(cluster: Cluster, pod: Pod, candidates: IntArray) -> IntArray:
    """The weights of the preferred node affinity terms a node matches."""
    if not pod.preferred_node_terms:
        return np.zeros(len(candidates), dtype=np.int64)
    def matched_weights() -> IntArray:
        raw = np.zeros(cluster.n, dtype=np.int64)
        for preferred in pod.preferred_node_terms:
            raw += preferred.weight * node_affinity.term_mask(preferred.term, cluster.nodes)
        return raw
    raw = cluster.node_score(("preferred", pod.preferred_node_terms), matched_weights)
    return default_normalize(raw[candidates], reverse=False)


def least_allocated_score(cluster: Cluster, pod: Pod, candidates: IntArray) -> IntArray:
    """(allocatable - requested) * 100 / allocatable for cpu and memory, averaged, with the
    scheduler's non-zero requests."""
    requested = cluster.non_zero_used[candidates] + cluster.non_zero_requests(pod)
    total = np.zeros(len(candidates), dtype=np.int64)
    counted = np.zeros(len(candidates), dtype=np.int64)
    for j, r in enumerate(cluster.cpu_memory):
        if r < 0:
            continue
        allocatable = cluster.allocatable[candidates, r]
        has = allocatable > 0
        score = np.where(requested[:, j] > allocatable, 0,
                         (allocatable - requested[:, j]) * MAX_NODE_SCORE // np.maximum(allocatable, 1))
        total += np.where(has, score, 0)
        counted += has
    return np.where(counted > 0, total // np.maximum(counted, 1), 0)


def balanced_allocation_score(cluster: Cluster, pod: Pod, candidates: IntArray) -> IntArray:
    """50 + (50 + balance with the pod - balance without) / 2, balance = (1 - std) * 100 of the
    cpu and memory fractions (real requests, capped at 1); 0 for a best-effort pod."""
    columns = [r for r in cluster.cpu_memory if r >= 0]
    request = np.array([pod.requests.get(name, 0) for name in (CPU, MEMORY)], dtype=np.int64)
    if not request.any() or not columns:
        return np.zeros(len(candidates), dtype=np.int64)
    allocatable = cluster.allocatable[np.ix_(candidates, columns)]
    used = cluster.used[np.ix_(candidates, columns)]
    with_pod = _balance(used + request[: len(columns)], allocatable)
    without = _balance(used, allocatable)
    return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - without) // 2


def _balance(requested: IntArray, allocatable: IntArray) -> IntArray:
    has = allocatable > 0
    fractions = np.minimum(requested / np.maximum(allocatable, 1), 1.0)
    both = has.all(axis=1)
    std = np.where(both, np.abs(fractions[:, 0] - fractions[:, -1]) / 2, 0.0)
    balance: IntArray = np.floor((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    return balance


def spread_score(cluster: Cluster, pod: Pod, candidates: IntArray) -> IntArray:
    """ScheduleAnyway constraints: sum of matching pods in the node's domain times log(domains
    + 2) plus maxSkew - 1, fewer is better; nodes lacking a key score 0 (but for the system
    defaults, where a missing key only adds nothing)."""
    soft = [s for s in pod.spread if not s.hard]
    if not soft:
        return np.zeros(len(candidates), dtype=np.int64)
    has_keys = np.ones(cluster.n, dtype=np.bool_)
    for s in soft:
        if not s.system_default:  # requireAllTopologies, except for the system defaults
            has_keys &= cluster.domain(s.topology_key)[0] >= 0
    scored = has_keys[candidates]
    raw: FloatArray = np.zeros(len(candidates), dtype=np.float64)
    for s in soft:
        selector = merge_label_keys(s.selector, s.match_label_keys, "In", pod.labels)
        counts = cluster.counter(("spread", pod.namespace, selector), spread_counted(pod.namespace, selector)).counts
        dom = cluster.domain(s.topology_key)[0]
        if s.topology_key == HOSTNAME:
            count = counts[candidates]
            size = int(scored.sum())
        else:
            eligible = has_keys & spread_eligible(cluster, pod, s)
            count = cluster.in_domain(s.topology_key, counts, eligible)[candidates]
            size = len(np.unique(dom[candidates][scored & (dom[candidates] >= 0)]))
        raw += np.where(dom[candidates] >= 0, count * np.log(size + 2) + (s.max_skew - 1), 0.0)  # a key missing: 0
    rounded = np.floor(raw + 0.5).astype(np.int64)
    if not scored.any():
        return np.zeros(len(candidates), dtype=np.int64)
    top, bottom = int(rounded[scored].max()), int(rounded[scored].min())
    if top == 0:
        return np.where(scored, MAX_NODE_SCORE, 0)
    return np.where(scored, MAX_NODE_SCORE * (top + bottom - rounded) // top, 0)


def inter_pod_affinity_score(cluster: Cluster, pod: Pod, candidates: IntArray) -> IntArray:
    """The pod's preferred (anti-)affinity against running pods, and running pods' required
    (weight 1) and preferred terms against the pod, summed over the node's domains; scaled
    from the lowest to the highest to 0..100."""
    raw = np.zeros(len(candidates), dtype=np.int64)
    weighted = [(t, t.weight) for t in pod.preferred_affinity] + [(t, -t.weight) for t in pod.preferred_anti_affinity]
    for term, weight in weighted:
        counter = cluster.counter(("anti-affinity", pod.namespace, term),
                                  affinity_selects(pod, cluster.namespace_labels, (term,)))
        raw += weight * cluster.in_domain(term.topology_key, counter.counts)[candidates]
    cls = cluster.class_of(pod)
    for carriers in cluster.scored_terms.values():
        if carriers.reaches(cls, cluster):
            raw += carriers.weight * cluster.in_domain(carriers.term.topology_key, carriers.per_node)[candidates]
    low, high = int(raw.min()), int(raw.max())
    if high == low:
        return np.zeros(len(candidates), dtype=np.int64)
    return (MAX_NODE_SCORE * ((raw - low) / (high - low))).astype(np.int64)
