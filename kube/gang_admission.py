"""What a PodGroup's ``minResources`` means: its scheduler's admission check, never a placement sum.

Decided per source, in the source's own words: each source's ``admission`` in its module of
``kube.gang_sources`` (Volcano's enqueue with overcommit in ``volcano.py``, Coscheduling's
``CheckClusterResource`` in ``scheduler_plugins.py``). KubeRay writes a Volcano or a scheduler-plugins
PodGroup (``minResources``: head plus every worker's ``minReplicas``): read as the scheduler it names
reads it. KAI-Scheduler and the Workload API have no quota-like field: ``minMember`` /
``gang.minCount`` are all that holds a group back. Where kubeplace reads the names
(``gang_sources.source.min_resources``: ``requests.X`` as ``X``, ``limits.*`` and ``count/*``
ignored), both checks compare what it read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from kubeplace.kube.gang_sources import ADMISSIONS
from kubeplace.kube.gang_sources.source import Cluster, summed
from kubeplace.kube.objects import GangKey, Node, Pod, PodGroup


def admission_holds(groups: Sequence[PodGroup], waiting: Collection[GangKey], nodes: Sequence[Node],
                    bound: Iterable[Pod], member_of: Callable[[Pod], GangKey | None]) -> dict[GangKey, str]:
    """Per PodGroup of ``waiting`` (gangs with pending pods) its scheduler would not admit now, why
    (the gang's pods are then never placed): the ``admission`` of its source
    (``kube.gang_sources``). ``member_of`` is a pod's gang (``kube.gangs.gang_of``)."""
    checked = [g for g in groups if g.key in waiting and g.min_resources and not g.unreadable
               and g.origin in ADMISSIONS]
    if not checked:
        return {}  # (before the sums over the cluster: most cycles have no PodGroup to admit)
    names = {node.name for node in nodes}
    on_nodes = [pod for pod in bound if pod.node_name in names]
    own: dict[GangKey, list[Pod]] = {}
    for pod in on_nodes:
        key = member_of(pod)
        if key is not None:
            own.setdefault(key, []).append(pod)
    cluster = Cluster(summed(node.allocatable for node in nodes), summed(pod.requests for pod in on_nodes),
                      {key: summed(pod.requests for pod in pods) for key, pods in own.items()}, groups)
    holds: dict[GangKey, str] = {}
    for group in checked:
        why = ADMISSIONS[group.origin](group, cluster)
        if why:
            holds[group.key] = why
    return holds
