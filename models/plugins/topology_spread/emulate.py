"""PodTopologySpread in the kube-scheduler emulation (``solver.emulate``): the filter for the
pod's DoNotSchedule constraints on the pods placed so far (``podtopologyspread/filtering.go``),
and what the emulation's score reads too: which pods a constraint counts, and the nodes its
inclusion policies keep."""

from __future__ import annotations

import numpy as np

from kubeplace.kube.objects import HONOR, Pod, Requirement, SpreadConstraint
from kubeplace.kube.pod_affinity import merge_label_keys, selects
from kubeplace.models.emulated_pods import ClassPredicate, EmulatedPods, LabelClass
from kubeplace.models.plugins import node_affinity, taint_toleration
from kubeplace.models.problem import BoolArray


def spread_counted(namespace: str, selector: tuple[Requirement, ...] | None) -> ClassPredicate:
    """countPodsMatchSelector: same namespace, not terminating, a selector that is not empty."""
    def counted(cls: LabelClass) -> bool:
        return cls[0] == namespace and not cls[2] and bool(selector) and selects(selector, cls[1])
    return counted


def spread_eligible(pods: EmulatedPods, pod: Pod, constraint: SpreadConstraint) -> BoolArray:
    """The nodes a constraint's inclusion policies keep: the pod's nodeSelector and required
    node affinity (nodeAffinityPolicy Honor), its tolerations of NoSchedule/NoExecute taints
    (nodeTaintsPolicy Honor). The topology keys are checked apart."""
    mask = np.ones(pods.n, dtype=np.bool_)
    if constraint.node_affinity_policy == HONOR:
        affinity = node_affinity.NodeAffinity((), True)
        mask &= pods.node_mask(("NodeAffinity", affinity.pod_key(pod)), lambda: affinity.filter(pod, pods.nodes))
    if constraint.node_taints_policy == HONOR:
        taints = taint_toleration.TaintToleration()
        mask &= pods.node_mask(("TaintToleration", taints.pod_key(pod)), lambda: taints.filter(pod, pods.nodes))
    return mask


def admits(pod: Pod, c: EmulatedPods) -> BoolArray:
    """PodTopologySpread's filter for the pod's DoNotSchedule constraints."""
    ok = np.ones(c.n, dtype=np.bool_)
    hard = [s for s in pod.spread if s.hard]
    if not hard:
        return ok
    has_keys = np.ones(c.n, dtype=np.bool_)
    for s in hard:
        has_keys &= c.domain(s.topology_key)[0] >= 0
    for s in hard:
        selector = merge_label_keys(s.selector, s.match_label_keys, "In", pod.labels)
        eligible = has_keys & spread_eligible(c, pod, s)
        counter = c.counter(("spread", pod.namespace, selector), spread_counted(pod.namespace, selector))
        dom, size = c.domain(s.topology_key)
        present = np.zeros(size, dtype=np.bool_)
        present[dom[eligible]] = True
        per_domain = c.per_domain(s.topology_key, counter.counts, eligible)
        floor = int(per_domain[present].min()) if 0 < s.min_domains <= int(present.sum()) else 0
        skew = c.in_domain(s.topology_key, counter.counts, eligible) + int(selects(selector, pod.labels)) - floor
        ok &= (dom >= 0) & (skew <= s.max_skew)
    return ok
