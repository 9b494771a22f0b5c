"""InterPodAffinity in the kube-scheduler emulation (``solver.emulate``): the filter on the pods
placed so far (``interpodaffinity/filtering.go``): the pod's own affinity (first-pod rule
included), its own anti-affinity, and the running pods' anti-affinity; and which pods a term
selects, which the emulation's score reads too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from kubeplace.kube.objects import Pod, PodAffinityTerm
from kubeplace.kube.pod_affinity import in_scope, selects
from kubeplace.models.emulated_pods import ClassPredicate, EmulatedPods, LabelClass, label_class
from kubeplace.models.problem import BoolArray


def affinity_selects(pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]],
                     terms: Sequence[PodAffinityTerm] | None = None) -> ClassPredicate:
    """``AffinityTerm.Matches`` for every one of the pod's terms (default: its required
    affinity); namespaceSelectors against the namespaces' labels."""
    chosen = pod.affinity if terms is None else terms

    def matched(cls: LabelClass) -> bool:
        return all(in_scope(t, pod.namespace, cls[0], namespace_labels) and selects(t.selector, cls[1])
                   for t in chosen)
    return matched


def admits(pod: Pod, c: EmulatedPods) -> BoolArray:
    """InterPodAffinity's filter: own affinity (first-pod rule included), own anti-affinity,
    and the running pods' anti-affinity."""
    ok = np.ones(c.n, dtype=np.bool_)
    if pod.affinity:
        selects_all = affinity_selects(pod, c.namespace_labels)
        counter = c.counter(("affinity", pod.namespace, pod.affinity), selects_all)
        has_keys, any_key, supported = ok.copy(), np.zeros(c.n, dtype=np.bool_), ok.copy()
        for t in pod.affinity:
            dom = c.domain(t.topology_key)[0]
            has_keys &= dom >= 0
            any_key |= dom >= 0
            supported &= c.in_domain(t.topology_key, counter.counts) > 0
        first_pod = not counter.counts[any_key].any() and selects_all(label_class(pod))
        ok &= has_keys & (supported | first_pod)
    for t in pod.anti_affinity:
        counter = c.counter(("anti-affinity", pod.namespace, t), affinity_selects(pod, c.namespace_labels, (t,)))
        ok &= c.in_domain(t.topology_key, counter.counts) == 0
    cls = c.class_of(pod)
    for carriers in c.anti_affinity.values():
        if carriers.reaches(cls, c):
            ok &= c.in_domain(carriers.term.topology_key, carriers.per_node) == 0
    return ok
