"""What a PodGroup's ``minResources`` means: its scheduler's admission check, never a placement sum.

Decided per source, in the source's own words (each source's ``admission``, in its module of
``kube.gang_sources``):

- **Volcano** (``scheduling.volcano.sh``): "minResources defines the minimal resource of members/tasks
  to run the pod group; if there's not enough resources to start all tasks, the scheduler will not
  start anyone" is read by the *enqueue* action only: a PodGroup still ``Pending`` moves to
  ``Inqueue`` when every ``JobEnqueueableFn`` permits it. The overcommit plugin (in Volcano's default
  configuration) permits it when ``inqueue + minResources`` fits, "only compar[ing] the requested
  resource", in the cluster's idle room, ``total * overCommitFactor - used`` (factor 1.2). Placement
  (the gang plugin's ``JobReady``/``JobPipelined``) counts ``minMember`` tasks (and ``minTaskMember``)
  and never looks at ``minResources`` again. Operators fill it for the whole application (spark-operator:
  the driver plus every executor the driver creates later), so a placement sum would never place a Spark
  driver, nor the pending executors of a running application whose ``minMember`` is met. A group
  past ``Pending`` (``Inqueue``, ``Running``...) is admitted: no check. Queues (capability, deserved
  share) are not modelled.
- **scheduler-plugins Coscheduling** (``scheduling.x-k8s.io``, ``scheduling.sigs.k8s.io``): PreFilter
  checks ``minResources`` plus ``pods: minMember`` with ``CheckClusterResource`` against the free room
  summed over all nodes (allocatable less the requests of the pods there, the group's own pods not
  counted), "not as a placement sum": "This resource check may not always pre-catch unschedulable pod
  group". A shortfall rejects every member with "resource gap".
- **KubeRay** writes a Volcano or a scheduler-plugins PodGroup (``minResources``: head plus every
  worker's ``minReplicas``): read as the scheduler it names reads it.
- **KAI-Scheduler** (``scheduling.run.ai/v2alpha2``) and the **Workload API** (``scheduling.k8s.io``
  PodGroup) have no quota-like field: ``minMember`` / ``gang.minCount`` are all that holds a group back.

Where kubeplace reads the names (``kube.gangs.min_resources``: ``requests.X`` as ``X``, ``limits.*`` and
``count/*`` ignored), both checks compare what it read.
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
