"""Gangs: PodGroup objects of the schedulers users run, and which pods belong to them.

Accepted, all at once, each a module of ``kube.gang_sources`` (its docstring says how its pods join
and what its PodGroup means) and a line of its ``SOURCES``, which this module asks: scheduler-plugins'
PodGroup (and its older ``scheduling.sigs.k8s.io`` copy), the Workload API's ``scheduling.k8s.io``
PodGroup, Volcano's, KAI-Scheduler's, CRD-free gangs (the pod label ``kubeplace.io/gang``), JobSet
and LeaderWorkerSet pods with exclusive topology (``kube.followers``) and Kueue Workloads, whose pods
weigh a tier above every other pod (:func:`is_admitted`).

A pod that names a PodGroup the snapshot lacks, or one of an API version kubeplace does not
read, is never placed (:func:`blocked_reason`): placed alone, it would break its gang's rule.

The annotation ``kubeplace.io/gang-topology-key`` (on the PodGroup object, or on the
member pods of a CRD-free gang) names a node label: all the gang's pods must then run on
nodes with one value of it (one zone, rack, NVLink or network block).
``kubeplace.io/gang-topology-preferred-key`` names a label whose domains the gang should
span as few of as it can (a soft preference, weighed against the profile's objective).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kubeplace.kube.errors import InputError, expect_mapping, expect_namespace, expect_str
from kubeplace.kube.gang_sources import (
    KINDS,
    READS,
    SOURCES,
    kai,
    kueue_workloads,
    plain,
    scheduler_plugins,
    volcano,
)
from kubeplace.kube.gang_sources.plain import plain_groups as plain_groups
from kubeplace.kube.gang_sources.source import PREFERRED_TOPOLOGY_KEY as PREFERRED_TOPOLOGY_KEY
from kubeplace.kube.gang_sources.source import TOPOLOGY_KEY as TOPOLOGY_KEY
from kubeplace.kube.gang_sources.source import crd_pod_group
from kubeplace.kube.gang_sources.source import min_resources as min_resources
from kubeplace.kube.kueue import KUEUE_WORKLOAD
from kubeplace.kube.memo import IdentityMemo
from kubeplace.kube.objects import DEFAULT_GANG_TIMEOUT_SECONDS, GangKey, Pod, PodGroup

MEMBER_LABELS = (scheduler_plugins.LABEL, scheduler_plugins.OLD_LABEL)
VOLCANO_ANNOTATION = volcano.ANNOTATION
KAI_ANNOTATION = kai.ANNOTATION
PLAIN_LABEL = plain.LABEL
PLAIN_MIN_MEMBER = plain.MIN_MEMBER
GANG_TIMEOUT_ANNOTATION = plain.TIMEOUT_ANNOTATION
READ_VERSIONS = {group: kind.versions for group, kind in KINDS.items()}
"""The PodGroup API versions kubeplace reads, per API group; a PodGroup of another version of
these groups is unreadable (its pods are never placed)."""
POD_GROUP_API_GROUPS = tuple(READ_VERSIONS)
GANG_APIS = READS
"""Every resource the gang rules read from a cluster (one not served lists as empty): the
PodGroups, the Jobs and LeaderWorkerSets whose followers are planned before they exist, and
Kueue's Workloads (the room promised to pods still gated). A
server serving the Workload API in both versions lists each PodGroup twice; the snapshot keeps one."""
_MARK_LABELS = tuple(label for source in SOURCES for label in source.labels)
_MARK_ANNOTATIONS = tuple(annotation for source in SOURCES for annotation in source.annotations)
_NAMED = tuple(source for source in SOURCES if source.kind is not None)
"""The sources whose gang is a PodGroup object the pod names."""


def parse_pod_group(obj: Mapping[str, Any], source: str) -> PodGroup:
    """Any PodGroup flavour (by its API group); one of a version kubeplace does not read is
    kept as unreadable, so that its pods wait rather than run alone."""
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    kind = KINDS.get(group)
    parse = crd_pod_group if kind is None else kind.parse
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


def named_pod_group(pod: Pod) -> tuple[str, str]:
    """(API group, name) of the PodGroup object the pod names, as its scheduler reads it (a
    scheduler-plugins member label, the Workload API's ``spec.schedulingGroup``, Volcano's or
    KAI's annotation: the sources of ``kube.gang_sources`` with a PodGroup kind); ("", "") when it
    names none. Its name is then :func:`gang_of`'s."""
    for source in _NAMED:
        key = source.member(pod)
        if key is not None:
            assert source.kind is not None
            return source.kind.group, key.name
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
    for source in SOURCES:
        key = source.member(pod)
        if key is not None:
            return key
    return None


_GANGS: IdentityMemo[Pod, GangKey | None] = IdentityMemo(_gang)


def is_admitted(pod: Pod) -> bool:
    """Admitted by Kueue: its capacity is promised, so it weighs more than any pod that is not."""
    return bool(pod.annotations.get(KUEUE_WORKLOAD))


def kueue_groups(pending: list[Pod], running: list[Pod], known: set[GangKey]) -> list[PodGroup]:
    """One gang per Kueue Workload with pending pods (stand-ins for its gated pods included): all
    of them placed together (its running pods count), since Kueue admitted them together."""
    counts: dict[GangKey, int] = {}
    for pod in itertools.chain(pending, running):
        if KUEUE_WORKLOAD not in pod.annotations:
            continue  # (most pods: no Workload names them)
        key = gang_of(pod)
        if key is not None and key not in known and pod.annotations.get(KUEUE_WORKLOAD) == key.name:
            counts[key] = counts.get(key, 0) + 1
    waiting = {gang_of(pod) for pod in pending}
    return [PodGroup(key.namespace, key.name, count, origin=kueue_workloads.GROUP) for key, count in counts.items()
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
    return KINDS[group].missing(pod.namespace, name)


def without_gang(pod: Pod) -> Pod:
    """A copy of ``pod`` that belongs to no gang (the marks :func:`gang_of` reads removed)."""
    labels = {k: v for k, v in pod.labels.items() if k not in _MARK_LABELS}
    annotations = {k: v for k, v in pod.annotations.items() if k not in _MARK_ANNOTATIONS}
    return replace(pod, labels=labels, annotations=annotations, scheduling_group="")


def gang_timeout(group: PodGroup | None) -> int:
    """Seconds a gang may wait for its members: its PodGroup's (for a CRD-free gang, its members'
    ``kubeplace.io/gang-timeout-seconds``, read by ``gang_sources.plain.plain_groups``), else the default."""
    return group.timeout_seconds if group is not None else DEFAULT_GANG_TIMEOUT_SECONDS

