"""Stand-ins for pods that do not exist yet: the followers of a leader with exclusive topology.

JobSet's exclusive placement (annotation ``alpha.jobset.sigs.k8s.io/exclusive-topology`` on the
pods, jobset ``pkg/webhooks/pod_mutating_webhook.go``) gives each Job's leader (completion index
0) required affinity to its own job key and anti-affinity to every other on that topology key;
the followers' creation is refused until the leader is scheduled, and then they are pinned to
its domain by a nodeSelector. LeaderWorkerSet's exclusive topology
(``leaderworkerset.sigs.k8s.io/exclusive-topology``, lws ``pkg/controllers/pod_controller.go``)
creates a group's workers only once its leader (worker index 0) is scheduled, pinned the same
way. Placed one at a time, a leader may take a domain its followers do not fit in.

So, for a pending leader whose Job (``batch/v1``, pod label ``batch.kubernetes.io/job-name``) or
LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``, label ``leaderworkerset.sigs.k8s.io/name``) is in
the snapshot, kubeplace plans the followers too, as one stand-in object (``Pod.reserved_for``)
that counts them (``Pod.copies``): the Job's parallelism (at most its completions) less one, or the
group's size less one, shaped by the Job's pod template or the LeaderWorkerSet's worker template,
with the leader's labels (so other leaders' anti-affinity sees them). One object, not one per
follower: the model counts it in its class, the plan reserves it as counts per node, so memory
and time grow with the leaders, never with their jobs' sizes. The leader and its followers form
one gang in one domain of the exclusive key (:class:`PodGroup` origin ``batch`` /
``leaderworkerset.x-k8s.io``): the leader goes only where its whole job fits. Stand-ins are never
bound; the plan lists them as reservations, one per node with how many followers it holds there.
A leader whose Job or LeaderWorkerSet is not in the snapshot is planned alone.

A size is checked before any stand-in is made: a job or group with more pods than the largest
domain of its exclusive key has pod slots (``allocatable.pods`` summed over its nodes) could never
run there, so its leader is never placed and says why (a ``parallelism: 2147483647`` or a size of
2^31-1 must not be planned at all). Counts are thus bounded by what the snapshot's nodes can hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kubeplace.kube.errors import (
    INT32_MAX,
    InputError,
    expect_int,
    expect_mapping,
    expect_name,
    expect_namespace,
)
from kubeplace.kube.objects import PODS, GangKey, Node, Pod, PodGroup, SpecRule
from kubeplace.kube.requests import pod_requests

JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
"""With it, nodes are labelled beforehand and JobSet injects no affinity: no leader to plan for."""
JOB_NAME = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
JOB_KIND = ("batch", "Job")
LWS_KIND = ("leaderworkerset.x-k8s.io", "LeaderWorkerSet")
KINDS = (JOB_KIND, LWS_KIND)
APIS = (("batch", "v1", "jobs"), ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"))
ORIGINS = {JOB_KIND: "batch", LWS_KIND: "leaderworkerset.x-k8s.io"}
_AFFINITY_RULES = frozenset({SpecRule.REQUIRED_POD_AFFINITY, SpecRule.REQUIRED_POD_ANTI_AFFINITY})


@dataclass(frozen=True)
class Owner:
    """What a leader's followers are made from: how many pods the job or group has in all, and
    the requests of one follower (its pod template's)."""

    size: int
    requests: Mapping[str, int]


def leader_gang(pod: Pod) -> GangKey | None:
    """The gang of a JobSet or LeaderWorkerSet pod with exclusive topology: its Job, or its
    LeaderWorkerSet group (``name-groupindex``); None for any other pod."""
    if pod.annotations.get(JOBSET_EXCLUSIVE) and JOBSET_NODE_SELECTOR_STRATEGY not in pod.annotations:
        job = pod.labels.get(JOB_NAME, "")
        return GangKey(pod.namespace, job) if job else None
    if pod.annotations.get(LWS_EXCLUSIVE) and pod.labels.get(LWS_NAME) and LWS_GROUP_INDEX in pod.labels:
        return GangKey(pod.namespace, f"{pod.labels[LWS_NAME]}-{pod.labels[LWS_GROUP_INDEX]}")
    return None


def _is_leader(pod: Pod) -> bool:
    if pod.annotations.get(JOBSET_EXCLUSIVE):
        return pod.annotations.get(COMPLETION_INDEX, pod.labels.get(COMPLETION_INDEX)) == "0"
    return pod.labels.get(LWS_WORKER_INDEX) == "0"


def parse_owners(kinds: Mapping[tuple[str, str], list[tuple[Mapping[str, Any], str]]],
                 label: Any) -> dict[tuple[tuple[str, str], str, str], Owner]:
    """Jobs and LeaderWorkerSets by (kind, namespace, name): their size and follower requests."""
    owners: dict[tuple[tuple[str, str], str, str], Owner] = {}
    for kind in KINDS:
        for obj, where in kinds.get(kind, []):
            try:
                meta = expect_mapping(obj.get("metadata"), "metadata")
                namespace = expect_namespace(meta)
                spec = expect_mapping(obj.get("spec"), "spec")
                owner = _job(spec) if kind == JOB_KIND else _leader_worker_set(spec)
                owners[(kind, namespace, expect_name(meta))] = owner
            except InputError as error:
                raise error.located(file=where, obj=label(obj)) from None
    return owners


def _job(spec: Mapping[str, Any]) -> Owner:
    """A Job's pods at once: ``parallelism`` (default 1), at most ``completions`` when set."""
    parallelism = expect_int(spec.get("parallelism", 1), "spec.parallelism", 0, INT32_MAX)
    completions = spec.get("completions")
    if completions is not None:
        parallelism = min(parallelism, expect_int(completions, "spec.completions", 0, INT32_MAX))
    return Owner(parallelism, _template_requests(spec.get("template"), "spec.template"))


def _leader_worker_set(spec: Mapping[str, Any]) -> Owner:
    """A LeaderWorkerSet's group: ``leaderWorkerTemplate.size`` pods (default 1), the workers
    shaped by ``workerTemplate``."""
    template = expect_mapping(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
    size = expect_int(template.get("size", 1), "spec.leaderWorkerTemplate.size", 1, INT32_MAX)
    return Owner(size, _template_requests(template.get("workerTemplate"), "spec.leaderWorkerTemplate.workerTemplate"))


def _template_requests(raw: object, field: str) -> Mapping[str, int]:
    template = expect_mapping(raw, field)
    try:
        return pod_requests({"spec": expect_mapping(template.get("spec"), f"{field}.spec")})
    except InputError as error:
        raise error.located(field_prefix=field) from None


def stand_ins(pending: Iterable[Pod], existing: Iterable[Pod], owners: Mapping[tuple[tuple[str, str], str, str], Owner],
              nodes: Sequence[Node]) -> tuple[list[Pod], list[PodGroup]]:
    """The stand-in for the followers of every pending leader whose owner is known (one object
    each, counting them), and one gang per such leader (the leader and its followers, all in one
    domain of the exclusive key); a leader whose job no domain could ever hold gets a gang that
    says so, and no stand-in."""
    members: dict[GangKey, int] = {}
    for pod in existing:
        key = leader_gang(pod)
        if key is not None:
            members[key] = members.get(key, 0) + 1
    followers: list[Pod] = []
    groups: list[PodGroup] = []
    slots: dict[str, int] = {}
    for leader in pending:
        key = leader_gang(leader)
        if key is None or not _is_leader(leader):
            continue
        kind = JOB_KIND if leader.annotations.get(JOBSET_EXCLUSIVE) else LWS_KIND
        owner = owners.get((kind, leader.namespace, leader.labels[JOB_NAME if kind == JOB_KIND else LWS_NAME]))
        missing = owner.size - members.get(key, 0) if owner is not None else 0
        if owner is None or missing <= 0:
            continue
        topology = leader.annotations[JOBSET_EXCLUSIVE if kind == JOB_KIND else LWS_EXCLUSIVE]
        if topology not in slots:
            slots[topology] = largest_domain_slots(nodes, topology)
        refused = _too_large(kind, key, owner.size, missing + 1, topology, slots[topology])
        if not refused:
            followers.append(_stand_in(leader, kind, missing, owner))
        groups.append(PodGroup(key.namespace, key.name, missing + 1, created=leader.creation, origin=ORIGINS[kind],
                               topology_key=topology, unreadable=refused))
    return followers, groups


def largest_domain_slots(nodes: Sequence[Node], key: str) -> int:
    """The most pods one domain of the node label ``key`` can ever run (its nodes' ``pods``
    allocatable summed); 0 when no node has the label."""
    per_domain: dict[str, int] = {}
    for node in nodes:
        if key in node.labels:
            per_domain[node.labels[key]] = per_domain.get(node.labels[key], 0) + node.allocatable.get(PODS, 0)
    return max(per_domain.values(), default=0)


def _too_large(kind: tuple[str, str], key: GangKey, size: int, needed: int, topology: str, slots: int) -> str:
    """Why the leader's job or group can never run in one domain of ``topology``; "" when it may."""
    if needed <= slots:
        return ""
    what = f"Job {key}: parallelism" if kind == JOB_KIND else f"LeaderWorkerSet group {key}: size"
    return (f"{what} {size}: {needed} pods to place in one {topology} domain, more than the largest one "
            f"can ever hold ({slots} pods)")


def stand_in_name(leader: str) -> str:
    """The name of the stand-in for the followers of the leader pod named ``leader``."""
    return f"{leader}.followers"


def _stand_in(leader: Pod, kind: tuple[str, str], copies: int, owner: Owner) -> Pod:
    """The ``copies`` followers as their controller would create them, before they exist, as one
    object: the leader's labels (the first follower's index), the template's requests, no
    inter-pod affinity (JobSet injects that on leaders only; a worker's is the leader's, in the
    leader's domain)."""
    marks = {COMPLETION_INDEX: "1"} if kind == JOB_KIND else {LWS_WORKER_INDEX: "1"}
    labels = {**leader.labels, **{k: v for k, v in marks.items() if k in leader.labels or kind == LWS_KIND}}
    annotations = {**leader.annotations, **{k: v for k, v in marks.items() if k in leader.annotations}}
    return replace(leader, name=stand_in_name(leader.name), uid="", labels=labels, annotations=annotations,
                   requests=dict(owner.requests), affinity=(), anti_affinity=(), host_ports=leader.host_ports,
                   spec_rules=leader.spec_rules - _AFFINITY_RULES, volumes=(), reserved_for=leader.key,
                   copies=copies)
