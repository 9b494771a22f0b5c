"""Volcano's PodGroup, ``scheduling.volcano.sh/v1beta1`` (pods join with the annotation
``scheduling.k8s.io/group-name``).

Admission: "minResources defines the minimal resource of members/tasks to run the pod group; if there's
not enough resources to start all tasks, the scheduler will not start anyone" is read by the *enqueue*
action only: a PodGroup still ``Pending`` moves to ``Inqueue`` when every ``JobEnqueueableFn`` permits
it. The overcommit plugin (in Volcano's default configuration) permits it when ``inqueue +
minResources`` fits, "only compar[ing] the requested resource", in the cluster's idle room, ``total *
overCommitFactor - used`` (factor 1.2). Placement (the gang plugin's ``JobReady``/``JobPipelined``)
counts ``minMember`` tasks (and ``minTaskMember``) and never looks at ``minResources`` again. Operators
fill it for the whole application (spark-operator: the driver plus every executor the driver creates
later), so a placement sum would never place a Spark driver, nor the pending executors of a running
application whose ``minMember`` is met. A group past ``Pending`` (``Inqueue``, ``Running``...) is
admitted: no check. Queues (capability, deserved share) are not modelled.
"""

from __future__ import annotations

from fractions import Fraction

from kubeplace.kube.gang_sources.source import (
    Cluster,
    GangSource,
    PodGroupKind,
    annotation_member,
    crd_pod_group,
    render,
    summed,
)
from kubeplace.kube.objects import CPU, MEMORY, PodGroup

GROUP = "scheduling.volcano.sh"
VERSION = "v1beta1"
ANNOTATION = "scheduling.k8s.io/group-name"
OVERCOMMIT_FACTOR = Fraction(6, 5)
"""The overcommit plugin's default ``overcommit-factor`` (1.2)."""
PENDING = ("", "Pending")
"""Phases of a Volcano PodGroup not yet admitted (enqueued)."""
INQUEUE = "Inqueue"


def enqueue(group: PodGroup, cluster: Cluster) -> str:
    """Volcano's overcommit ``JobEnqueueableFn`` for a group still pending: ``inqueue + minResources <=
    total * 1.2 - used``, on the dimensions minResources asks for (cpu, memory, scalar resources;
    ``pods`` is not compared)."""
    if group.phase not in PENDING:
        return ""
    inqueue = cluster.once(GROUP, lambda: summed(g.min_resources for g in cluster.groups
                                                 if g.origin == GROUP and g.phase == INQUEUE))
    short = {}
    for name, amount in group.min_resources.items():
        if not _compares(name) or amount <= 0:
            continue
        idle = cluster.total.get(name, 0) * OVERCOMMIT_FACTOR - cluster.used.get(name, 0)
        if inqueue.get(name, 0) + amount > idle:
            short[name] = amount
    if not short:
        return ""
    return (f"PodGroup {group.key} is not enqueued: resource in cluster is overused "
            f"(minResources {render(short)} over the idle room of the cluster)")


def _compares(name: str) -> bool:
    """A name Volcano's ``api.NewResource`` keeps as a dimension: cpu, memory, a scalar resource."""
    return name in (CPU, MEMORY) or "/" in name or name.startswith("hugepages-")


SOURCE = GangSource(GROUP, annotation_member(ANNOTATION), reads=((GROUP, VERSION, "podgroups"),),
                    kind=PodGroupKind(GROUP, (VERSION,), crd_pod_group, status_version=VERSION),
                    admission=enqueue, annotations=(ANNOTATION,))
