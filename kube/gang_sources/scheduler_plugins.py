"""scheduler-plugins' Coscheduling PodGroup, ``scheduling.x-k8s.io/v1alpha1`` (pods join with the label
``scheduling.x-k8s.io/pod-group``), and its older ``scheduling.sigs.k8s.io`` copy (label
``pod-group.scheduling.sigs.k8s.io``).

Admission: Coscheduling's PreFilter checks ``minResources`` plus ``pods: minMember`` with
``CheckClusterResource`` against the free room summed over all nodes (allocatable less the requests of
the pods there, the group's own pods not counted), "not as a placement sum": "This resource check may
not always pre-catch unschedulable pod group". A shortfall rejects every member with "resource gap".
"""

from __future__ import annotations

from kubeplace.kube.gang_sources.source import Cluster, GangSource, PodGroupKind, crd_pod_group, label_member, render
from kubeplace.kube.objects import PODS, PodGroup

GROUP, OLD_GROUP = "scheduling.x-k8s.io", "scheduling.sigs.k8s.io"
LABEL, OLD_LABEL = "scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io"
VERSION = "v1alpha1"


def cluster_resource(group: PodGroup, cluster: Cluster) -> str:
    """scheduler-plugins' ``CheckClusterResource``: minResources and ``pods: minMember`` within the free
    room summed over the nodes, the group's own pods' requests counted as free."""
    needed = {**group.min_resources, PODS: group.min_member}
    own = cluster.own.get(group.key, {})
    gap = {name: amount - free for name, amount in needed.items()
           if amount > (free := cluster.total.get(name, 0) - cluster.used.get(name, 0) + own.get(name, 0))}
    if not gap:
        return ""
    return f"PodGroup {group.key} minResources do not fit in the cluster's free resources: resource gap: {render(gap)}"


def _source(group: str, label: str) -> GangSource:
    return GangSource(group, label_member(label), reads=((group, VERSION, "podgroups"),),
                      kind=PodGroupKind(group, (VERSION,), crd_pod_group, status_version=VERSION),
                      admission=cluster_resource, labels=(label,))


SOURCE = _source(GROUP, LABEL)
OLD_SOURCE = _source(OLD_GROUP, OLD_LABEL)
