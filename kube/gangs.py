"""Gangs: PodGroup objects of the schedulers users run, and which pods belong to them.

Accepted, all at once:

- scheduler-plugins ``scheduling.x-k8s.io/v1alpha1`` PodGroup (pods join with the label
  ``scheduling.x-k8s.io/pod-group``) and its older ``scheduling.sigs.k8s.io`` copy (label
  ``pod-group.scheduling.sigs.k8s.io``);
- Volcano ``scheduling.volcano.sh/v1beta1`` PodGroup (pods join with the annotation
  ``scheduling.k8s.io/group-name``);
- the upstream Workload API's ``scheduling.k8s.io`` PodGroup, v1alpha2 (Kubernetes 1.36) and
  v1beta1 (1.37), of the same shape (pods join with ``spec.schedulingGroup.podGroupName``):
  ``spec.schedulingPolicy.gang.minCount`` is its min-member (``basic``: 1, no all-or-nothing)
  and ``spec.schedulingConstraints.topology[0].key`` its topology key;
- KAI-Scheduler's ``scheduling.run.ai/v2alpha2`` PodGroup (pods join with the annotation
  ``pod-group-name``): ``spec.minMember``, and ``spec.topologyConstraint``'s
  ``requiredTopologyLevel`` / ``preferredTopologyLevel`` as the (preferred) topology key;
- no CRD at all: the pod label ``kubeplace.io/gang`` names the group and the pod
  annotation ``kubeplace.io/gang-min-member`` gives its min-member;
- Kueue: pods sharing the annotation ``kueue.x-k8s.io/workload`` (the admitted Workload's name,
  set on the pod template when Kueue starts the job) were admitted together, their capacity
  promised: one gang of all its pending pods (:func:`kueue_groups`), whose pods weigh a tier
  above every other pod (:func:`is_admitted`). With topology-aware scheduling Kueue pins each
  pod to its node(s) by a nodeSelector once it lifts the ``kueue.x-k8s.io/topology`` gate;
  gated pods are not pending and wait;
- JobSet and LeaderWorkerSet pods with exclusive topology: their Job's or group's gang
  (``kube.followers``).

A pod that names a PodGroup the snapshot lacks, or one of an API version kubeplace does not
read, is never placed (:func:`blocked_reason`): placed alone, it would break its gang's rule.

The annotation ``kubeplace.io/gang-topology-key`` (on the PodGroup object, or on the
member pods of a CRD-free gang) names a node label: all the gang's pods must then run on
nodes with one value of it (one zone, rack, NVLink or network block).
``kubeplace.io/gang-topology-preferred-key`` names a label whose domains the gang should
span as few of as it can (a soft preference, weighed against the profile's objective).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kubeplace.kube.errors import (
    INT32_MAX,
    InputError,
    expect_int,
    expect_list,
    expect_mapping,
    expect_namespace,
    expect_str,
)
from kubeplace.kube.followers import APIS as FOLLOWER_APIS
from kubeplace.kube.followers import leader_gang
from kubeplace.kube.kueue import API as KUEUE_API
from kubeplace.kube.kueue import KUEUE_WORKLOAD
from kubeplace.kube.memo import IdentityMemo
from kubeplace.kube.objects import CPU, DEFAULT_GANG_TIMEOUT_SECONDS, GangKey, Pod, PodGroup
from kubeplace.kube.quantity import QuantityError, milli_value, parse_decimal, whole_value

SCHEDULER_PLUGINS_GROUPS = ("scheduling.x-k8s.io", "scheduling.sigs.k8s.io")
VOLCANO_GROUP = "scheduling.volcano.sh"
WORKLOAD_API_GROUP = "scheduling.k8s.io"
KAI_GROUP = "scheduling.run.ai"
MEMBER_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io")
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
KAI_ANNOTATION = "pod-group-name"
KUEUE_GROUP = "kueue.x-k8s.io"
PLAIN_LABEL = "kubeplace.io/gang"
PLAIN_MIN_MEMBER = "kubeplace.io/gang-min-member"
GANG_TIMEOUT_ANNOTATION = "kubeplace.io/gang-timeout-seconds"
TOPOLOGY_KEY = "kubeplace.io/gang-topology-key"
PREFERRED_TOPOLOGY_KEY = "kubeplace.io/gang-topology-preferred-key"
READ_VERSIONS = {**{group: ("v1alpha1",) for group in SCHEDULER_PLUGINS_GROUPS}, VOLCANO_GROUP: ("v1beta1",),
                 WORKLOAD_API_GROUP: ("v1alpha2", "v1beta1"), KAI_GROUP: ("v2alpha2",)}
"""The PodGroup API versions kubeplace reads, per API group; a PodGroup of another version of
these groups is unreadable (its pods are never placed)."""
POD_GROUP_API_GROUPS = tuple(READ_VERSIONS)
REQUESTS_PREFIX = "requests."
IGNORED_MIN_RESOURCE_PREFIXES = ("limits.", "count/")
"""Quota names in ``minResources`` that are not requests for placement to meet."""
CRDS = (("scheduling.x-k8s.io", "v1alpha1", "podgroups"), ("scheduling.sigs.k8s.io", "v1alpha1", "podgroups"),
        ("scheduling.volcano.sh", "v1beta1", "podgroups"))
"""The PodGroup resources whose ``status`` (phase, scheduled count) kubeplace writes."""
GANG_APIS = (*CRDS, (WORKLOAD_API_GROUP, "v1beta1", "podgroups"), (WORKLOAD_API_GROUP, "v1alpha2", "podgroups"),
             (KAI_GROUP, "v2alpha2", "podgroups"), *FOLLOWER_APIS, KUEUE_API)
"""Every resource the gang rules read from a cluster (one not served lists as empty): the
PodGroups, the Jobs and LeaderWorkerSets whose followers are planned before they exist, and
Kueue's Workloads (the room promised to pods still gated). A
server serving the Workload API in both versions lists each PodGroup twice; the snapshot keeps one."""


def parse_pod_group(obj: Mapping[str, Any], source: str) -> PodGroup:
    """Any PodGroup flavour (by its API group); one of a version kubeplace does not read is
    kept as unreadable, so that its pods wait rather than run alone."""
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    parse = {WORKLOAD_API_GROUP: _workload_api_group, KAI_GROUP: _kai_group}.get(group, _pod_group)
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    where = f"PodGroup {meta.get('namespace') or 'default'}/{meta.get('name', '?')}"
    try:
        if not isinstance(meta.get("name"), str) or not meta["name"]:
            raise InputError("missing name", field="metadata.name")
        namespace = expect_namespace(meta)
        if version not in READ_VERSIONS.get(group, ()):
            known = ", ".join(f"{group}/{v}" for v in READ_VERSIONS.get(group, ()))
            why = f"PodGroup {namespace}/{meta['name']} is {obj['apiVersion']}"
            return PodGroup(namespace, meta["name"], 1, origin=group,
                            unreadable=f"{why}, a version kubeplace does not read ({known})")
        found = parse(namespace, meta, expect_mapping(obj.get("spec"), "spec"), group)
        status = expect_mapping(obj.get("status"), "status")
        return replace(found, phase=expect_str(status.get("phase"), "status.phase"))
    except InputError as error:
        raise error.located(file=source, obj=where) from None


def _pod_group(namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any], group: str) -> PodGroup:
    """A scheduler-plugins or Volcano PodGroup; its ``minResources`` is what its scheduler admits it by
    (``kube.gang_admission``), not a sum its placed members must reach."""
    min_member = expect_int(spec.get("minMember", 1), "spec.minMember", 1, INT32_MAX)
    timeout = expect_int(spec.get("scheduleTimeoutSeconds", DEFAULT_GANG_TIMEOUT_SECONDS),
                         "spec.scheduleTimeoutSeconds", 0, INT32_MAX)
    resources = min_resources(expect_mapping(spec.get("minResources"), "spec.minResources"))
    annotations = expect_mapping(meta.get("annotations"), "metadata.annotations")
    return PodGroup(namespace, meta["name"], min_member, resources, timeout, str(meta.get("creationTimestamp", "")),
                    group, _topology_key(annotations), _topology_key(annotations, preferred=True))


def _workload_api_group(namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any], group: str) -> PodGroup:
    """A Workload API PodGroup (k8s.io/api scheduling v1alpha2 and v1beta1 ``PodGroupSpec``): exactly one
    of ``schedulingPolicy.basic`` (no all-or-nothing) and ``schedulingPolicy.gang``; at most one
    topology constraint (``maxItems=1``), whose key keeps the whole group in one domain."""
    policy = expect_mapping(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
    gang, basic = policy.get("gang"), policy.get("basic")
    if (gang is None) == (basic is None):
        raise InputError("exactly one of basic and gang must be set", field="spec.schedulingPolicy",
                         expected="basic: {} or gang: {minCount: N}")
    min_member = 1
    if gang is not None:
        field = "spec.schedulingPolicy.gang.minCount"
        min_member = expect_int(expect_mapping(gang, "spec.schedulingPolicy.gang").get("minCount"), field, 1, INT32_MAX)
    constraints = expect_mapping(spec.get("schedulingConstraints"), "spec.schedulingConstraints")
    topology = expect_list(constraints.get("topology"), "spec.schedulingConstraints.topology")
    if len(topology) > 1:
        raise InputError(f"{len(topology)} topology constraints", field="spec.schedulingConstraints.topology",
                         expected="at most one")
    key = ""
    if topology:
        field = "spec.schedulingConstraints.topology[0].key"
        key = expect_str(expect_mapping(topology[0], "spec.schedulingConstraints.topology[0]").get("key"), field)
        if not key.strip():
            raise InputError("empty key", field=field, expected="a node label key")
    return PodGroup(namespace, meta["name"], min_member, created=str(meta.get("creationTimestamp", "")),
                    origin=group, topology_key=key.strip())


def _kai_group(namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any], group: str) -> PodGroup:
    """A KAI-Scheduler PodGroup (``scheduling.run.ai/v2alpha2``): ``minMember`` (an int32 of at least 1,
    its CRD's ``Minimum=1``; 1 when left out or null), and the required and preferred topology levels
    (node label keys) of ``topologyConstraint``. ``subGroups`` are not read. It has no quota-like
    field: ``minMember`` alone holds the group back."""
    raw = spec.get("minMember")
    min_member = 1 if raw is None else expect_int(raw, "spec.minMember", 1, INT32_MAX)
    topology = expect_mapping(spec.get("topologyConstraint"), "spec.topologyConstraint")
    keys = [expect_str(topology.get(name), f"spec.topologyConstraint.{name}").strip()
            for name in ("requiredTopologyLevel", "preferredTopologyLevel")]
    return PodGroup(namespace, meta["name"], min_member, created=str(meta.get("creationTimestamp", "")),
                    origin=group, topology_key=keys[0], preferred_topology_key=keys[1])


def min_resources(raw: Mapping[str, Any]) -> dict[str, int]:
    """A PodGroup's ``minResources`` per resource, as its scheduler admits the group by them
    (``kube.gang_admission``; never a sum its placed members must reach).

    Volcano's job controller (``calcPGMinResources``) fills ``minResources`` with the summed
    ResourceQuota usage of the first minMember pods (``GetPodQuotaUsage``, i.e. Kubernetes'
    ``PodUsageFunc`` plus plain copies of extended resources): beside the plain names (``cpu``,
    ``memory``, ``pods``, ``nvidia.com/gpu``...) come ``requests.*`` copies of the same
    requests, ``limits.*`` and ``count/pods``. Volcano's scheduler (``api.NewResource``) keeps the
    plain names: ``requests.cpu`` and ``limits.cpu`` are not resource names it knows, and it skips
    ``count/*``.
    kubeplace reads them the same way, and also takes ``requests.X`` for ``X`` (the same
    request, so a PodGroup written with quota names alone still works; where both are given,
    the larger amount). ``limits.*`` and ``count/*`` are ignored: a limit is not what the
    kube-scheduler fits, and an object count is not a request; they are only checked to be
    quantities. A minimum is rounded up to the unit kubeplace counts in (milli-CPU, bytes,
    whole devices): requests are whole units, so ``nvidia.com/gpu: 1500m`` asks for 2.
    """
    amounts: dict[str, int] = {}
    for key, value in raw.items():
        name = str(key)
        try:
            if name.startswith(IGNORED_MIN_RESOURCE_PREFIXES):
                parse_decimal(value)
                continue
            resource = name.removeprefix(REQUESTS_PREFIX)
            amount = milli_value(value) if resource == CPU else whole_value(value)
        except QuantityError as error:
            raise InputError(error.problem, field=f"spec.minResources.{name}", expected=error.expected) from None
        amounts[resource] = max(amounts.get(resource, 0), amount)
    return amounts


def _topology_key(annotations: Mapping[str, Any], preferred: bool = False) -> str:
    """The gang topology annotation's label key; present but empty is an error (a typo
    must not silently drop the constraint)."""
    name = PREFERRED_TOPOLOGY_KEY if preferred else TOPOLOGY_KEY
    if name not in annotations:
        return ""
    value = annotations[name]
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"got {value!r}", field=f"metadata.annotations.{name}", expected="a node label key")
    return value.strip()


def named_pod_group(pod: Pod) -> tuple[str, str]:
    """(API group, name) of the PodGroup object the pod names, as its scheduler reads it (a
    scheduler-plugins member label, the Workload API's ``spec.schedulingGroup``, Volcano's or
    KAI's annotation); ("", "") when it names none. Its name is then :func:`gang_of`'s."""
    for label, group in zip(MEMBER_LABELS, SCHEDULER_PLUGINS_GROUPS, strict=True):
        if pod.labels.get(label):
            return group, pod.labels[label]
    if pod.scheduling_group:
        return WORKLOAD_API_GROUP, pod.scheduling_group
    for annotation, group in ((VOLCANO_ANNOTATION, VOLCANO_GROUP), (KAI_ANNOTATION, KAI_GROUP)):
        if pod.annotations.get(annotation):
            return group, pod.annotations[annotation]
    return "", ""


def gang_of(pod: Pod) -> GangKey | None:
    """The pod's gang, or None when it belongs to none: the PodGroup it names
    (:func:`named_pod_group`), else its CRD-free group, else its Job's or group's when it is a
    JobSet or LeaderWorkerSet pod with exclusive topology (``kube.followers``), else its Kueue
    Workload's. The one answer to "which gang?" for the model, the solver, ``serve``, the
    rebalancer and the independent verifiers alike (a pod's marks alone decide it: a gang whose
    PodGroup is missing is still its gang, and :func:`blocked_reason` says why it waits).
    Once per pod object (every cycle asks it of every pod)."""
    return _GANGS(pod)


def _gang(pod: Pod) -> GangKey | None:
    name = named_pod_group(pod)[1] or pod.labels.get(PLAIN_LABEL, "")
    if name:
        return GangKey(pod.namespace, name)
    leader = leader_gang(pod)
    if leader is not None:
        return leader
    workload = pod.annotations.get(KUEUE_WORKLOAD, "")
    return GangKey(pod.namespace, workload) if workload else None


_GANGS: IdentityMemo[Pod, GangKey | None] = IdentityMemo(_gang)


def is_admitted(pod: Pod) -> bool:
    """Admitted by Kueue: its capacity is promised, so it weighs more than any pod that is not."""
    return bool(pod.annotations.get(KUEUE_WORKLOAD))


def kueue_groups(pending: list[Pod], running: list[Pod], known: set[GangKey]) -> list[PodGroup]:
    """One gang per Kueue Workload with pending pods (stand-ins for its gated pods included): all
    of them placed together (its running pods count), since Kueue admitted them together."""
    counts: dict[GangKey, int] = {}
    for pod in (*pending, *running):
        if KUEUE_WORKLOAD not in pod.annotations:
            continue  # (most pods: no Workload names them)
        key = gang_of(pod)
        if key is not None and key not in known and pod.annotations.get(KUEUE_WORKLOAD) == key.name:
            counts[key] = counts.get(key, 0) + 1
    waiting = {gang_of(pod) for pod in pending}
    return [PodGroup(key.namespace, key.name, count, origin=KUEUE_GROUP) for key, count in counts.items()
            if key in waiting]


def blocked_reason(pod: Pod, groups: Mapping[GangKey, PodGroup]) -> str:
    """Why the pod's gang cannot be placed at all: the PodGroup it names is not in the snapshot,
    or kubeplace cannot read it; "" when it can be planned. A missing Workload API PodGroup is
    reported in the kube-scheduler's words (GangScheduling's PreEnqueue)."""
    group, name = named_pod_group(pod)
    if not group:
        return ""
    found = groups.get(GangKey(pod.namespace, name))
    if found is not None:
        return found.unreadable
    if group == WORKLOAD_API_GROUP:
        return f'waiting for pods\'s pod group "{name}" to appear in scheduling queue'
    return f"waiting for its PodGroup {pod.namespace}/{name} ({group}), which is not in the snapshot"


def without_gang(pod: Pod) -> Pod:
    """A copy of ``pod`` that belongs to no gang (the marks :func:`gang_of` reads removed)."""
    labels = {k: v for k, v in pod.labels.items() if k not in (*MEMBER_LABELS, PLAIN_LABEL)}
    annotations = {k: v for k, v in pod.annotations.items() if k not in (VOLCANO_ANNOTATION, KAI_ANNOTATION)}
    return replace(pod, labels=labels, annotations=annotations, scheduling_group="")


def plain_groups(pods: list[Pod], known: set[GangKey]) -> list[PodGroup]:
    """Gangs declared on pods alone (no PodGroup object): min-member from the first member's
    annotation, the wait from the first member that gives ``kubeplace.io/gang-timeout-seconds``.
    Every member's annotations are checked: a bad one is an error of that pod (in ``serve`` its
    reason, the rest still scheduled), never a failure later in the cycle."""
    found: dict[GangKey, PodGroup] = {}
    timeouts: dict[GangKey, int] = {}
    for pod in pods:
        name = pod.labels.get(PLAIN_LABEL, "")
        key = GangKey(pod.namespace, name)
        if not name or key in known:
            continue
        try:
            min_member = _annotation_int(pod.annotations, PLAIN_MIN_MEMBER, 1, 1)
            timeout = _annotation_int(pod.annotations, GANG_TIMEOUT_ANNOTATION, 0, -1)
            if key not in found:
                found[key] = PodGroup(pod.namespace, name, min_member, origin="label",
                                      topology_key=_topology_key(pod.annotations),
                                      preferred_topology_key=_topology_key(pod.annotations, preferred=True))
        except InputError as error:
            raise error.located(file=pod.source, obj=f"Pod {pod.key}") from None
        if timeout >= 0:
            timeouts.setdefault(key, timeout)
    return [replace(group, timeout_seconds=timeouts.get(key, group.timeout_seconds)) for key, group in found.items()]


def _annotation_int(annotations: Mapping[str, str], name: str, low: int, default: int) -> int:
    """An int32 annotation from ``low``, in plain ASCII digits (``"²"`` and ``"٣"`` are digits to
    ``str.isdigit`` but no number); ``default`` when absent or empty."""
    text = annotations.get(name, "")
    if not text:
        return default
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 10 and low <= int(digits) <= INT32_MAX):
        raise InputError(f"got {text!r}", field=f"metadata.annotations.{name}",
                         expected=f"an integer from {low} to {INT32_MAX}")
    return int(digits)


def gang_timeout(group: PodGroup | None) -> int:
    """Seconds a gang may wait for its members: its PodGroup's (for a CRD-free gang, its members'
    ``kubeplace.io/gang-timeout-seconds``, read by :func:`plain_groups`), else the default."""
    return group.timeout_seconds if group is not None else DEFAULT_GANG_TIMEOUT_SECONDS
