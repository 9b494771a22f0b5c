"""What a PodGroup's ``minResources`` means: its scheduler's admission check, never a placement sum.

Decided per source, in the source's own words:

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

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from fractions import Fraction

from kubeplace.kube.gangs import SCHEDULER_PLUGINS_GROUPS, VOLCANO_GROUP
from kubeplace.kube.objects import CPU, MEMORY, PODS, GangKey, Node, Pod, PodGroup

VOLCANO_OVERCOMMIT_FACTOR = Fraction(6, 5)
"""The overcommit plugin's default ``overcommit-factor`` (1.2)."""
VOLCANO_PENDING = ("", "Pending")
"""Phases of a Volcano PodGroup not yet admitted (enqueued)."""
VOLCANO_INQUEUE = "Inqueue"


def admission_holds(groups: Sequence[PodGroup], waiting: Collection[GangKey], nodes: Sequence[Node],
                    bound: Iterable[Pod], member_of: Callable[[Pod], GangKey | None]) -> dict[GangKey, str]:
    """Per PodGroup of ``waiting`` (gangs with pending pods) its scheduler would not admit now, why
    (the gang's pods are then never placed). ``member_of`` is a pod's gang (``kube.gangs.gang_of``)."""
    checked = [g for g in groups if g.key in waiting and g.min_resources and not g.unreadable]
    if not checked:
        return {}  # (before the sums over the cluster: most cycles have no PodGroup to admit)
    names = {node.name for node in nodes}
    on_nodes = [pod for pod in bound if pod.node_name in names]
    total = _sum(node.allocatable for node in nodes)
    used = _sum(pod.requests for pod in on_nodes)
    inqueue = _sum(g.min_resources for g in groups if g.origin == VOLCANO_GROUP and g.phase == VOLCANO_INQUEUE)
    own: dict[GangKey, list[Pod]] = {}
    for pod in on_nodes:
        key = member_of(pod)
        if key is not None:
            own.setdefault(key, []).append(pod)
    holds: dict[GangKey, str] = {}
    for group in checked:
        if group.origin == VOLCANO_GROUP and group.phase in VOLCANO_PENDING:
            why = _volcano_enqueue(group, total, used, inqueue)
        elif group.origin in SCHEDULER_PLUGINS_GROUPS:
            why = _cluster_resource(group, total, used, _sum(pod.requests for pod in own.get(group.key, ())))
        else:
            continue
        if why:
            holds[group.key] = why
    return holds


def _volcano_enqueue(group: PodGroup, total: Mapping[str, int], used: Mapping[str, int],
                     inqueue: Mapping[str, int]) -> str:
    """Volcano's overcommit ``JobEnqueueableFn``: ``inqueue + minResources <= total * 1.2 - used``, on the
    dimensions minResources asks for (cpu, memory, scalar resources; ``pods`` is not compared)."""
    short = {}
    for name, amount in group.min_resources.items():
        if not _volcano_compares(name) or amount <= 0:
            continue
        idle = total.get(name, 0) * VOLCANO_OVERCOMMIT_FACTOR - used.get(name, 0)
        if inqueue.get(name, 0) + amount > idle:
            short[name] = amount
    if not short:
        return ""
    return (f"PodGroup {group.key} is not enqueued: resource in cluster is overused "
            f"(minResources {_render(short)} over the idle room of the cluster)")


def _volcano_compares(name: str) -> bool:
    """A name Volcano's ``api.NewResource`` keeps as a dimension: cpu, memory, a scalar resource."""
    return name in (CPU, MEMORY) or "/" in name or name.startswith("hugepages-")


def _cluster_resource(group: PodGroup, total: Mapping[str, int], used: Mapping[str, int],
                      own: Mapping[str, int]) -> str:
    """scheduler-plugins' ``CheckClusterResource``: minResources and ``pods: minMember`` within the free
    room summed over the nodes, the group's own pods' requests counted as free."""
    needed = {**group.min_resources, PODS: group.min_member}
    gap = {name: amount - free for name, amount in needed.items()
           if amount > (free := total.get(name, 0) - used.get(name, 0) + own.get(name, 0))}
    if not gap:
        return ""
    return f"PodGroup {group.key} minResources do not fit in the cluster's free resources: resource gap: {_render(gap)}"


def _sum(amounts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for one in amounts:
        for name, amount in one.items():
            total[name] = total.get(name, 0) + amount
    return total


def _render(amounts: Mapping[str, int]) -> str:
    return ", ".join(f"{name}={amount}m" if name == CPU else f"{name}={amount}"
                     for name, amount in sorted(amounts.items()))
