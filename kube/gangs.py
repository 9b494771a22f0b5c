"""Gangs: PodGroup objects of the schedulers users run, and which pods belong to them.

Accepted, all at once:

- scheduler-plugins ``scheduling.x-k8s.io/v1alpha1`` PodGroup (pods join with the label
  ``scheduling.x-k8s.io/pod-group``) and its older ``scheduling.sigs.k8s.io`` copy (label
  ``pod-group.scheduling.sigs.k8s.io``);
- Volcano ``scheduling.volcano.sh/v1beta1`` PodGroup (pods join with the annotation
  ``scheduling.k8s.io/group-name``);
- no CRD at all: the pod label ``kubeplace.io/gang`` names the group and the pod
  annotation ``kubeplace.io/gang-min-member`` gives its min-member.

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

from kubeplace.kube.errors import INT32_MAX, InputError, expect_int, expect_mapping, expect_str
from kubeplace.kube.objects import CPU, DEFAULT_GANG_TIMEOUT_SECONDS, GangKey, Pod, PodGroup
from kubeplace.kube.quantity import QuantityError, milli_value, parse_decimal, whole_value

SCHEDULER_PLUGINS_GROUPS = ("scheduling.x-k8s.io", "scheduling.sigs.k8s.io")
VOLCANO_GROUP = "scheduling.volcano.sh"
MEMBER_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io")
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
PLAIN_LABEL = "kubeplace.io/gang"
PLAIN_MIN_MEMBER = "kubeplace.io/gang-min-member"
TOPOLOGY_KEY = "kubeplace.io/gang-topology-key"
PREFERRED_TOPOLOGY_KEY = "kubeplace.io/gang-topology-preferred-key"
POD_GROUP_API_GROUPS = (*SCHEDULER_PLUGINS_GROUPS, VOLCANO_GROUP)
REQUESTS_PREFIX = "requests."
IGNORED_MIN_RESOURCE_PREFIXES = ("limits.", "count/")
"""Quota names in ``minResources`` that are not requests for placement to meet."""
CRDS = (("scheduling.x-k8s.io", "v1alpha1", "podgroups"), ("scheduling.sigs.k8s.io", "v1alpha1", "podgroups"),
        ("scheduling.volcano.sh", "v1beta1", "podgroups"))


def parse_pod_group(obj: Mapping[str, Any], source: str) -> PodGroup:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    where = f"PodGroup {meta.get('namespace') or 'default'}/{meta.get('name', '?')}"
    try:
        spec = expect_mapping(obj.get("spec"), "spec")
        if not isinstance(meta.get("name"), str) or not meta["name"]:
            raise InputError("missing name", field="metadata.name")
        namespace = expect_str(meta.get("namespace"), "metadata.namespace") or "default"
        min_member = expect_int(spec.get("minMember", 1), "spec.minMember", 1, INT32_MAX)
        timeout = expect_int(spec.get("scheduleTimeoutSeconds", DEFAULT_GANG_TIMEOUT_SECONDS),
                             "spec.scheduleTimeoutSeconds", 0, INT32_MAX)
        resources = min_resources(expect_mapping(spec.get("minResources"), "spec.minResources"))
        annotations = expect_mapping(meta.get("annotations"), "metadata.annotations")
        return PodGroup(namespace, meta["name"], min_member, resources, timeout,
                        str(meta.get("creationTimestamp", "")), str(obj["apiVersion"]).split("/")[0],
                        _topology_key(annotations), _topology_key(annotations, preferred=True))
    except InputError as error:
        raise error.located(file=source, obj=where) from None


def min_resources(raw: Mapping[str, Any]) -> dict[str, int]:
    """A PodGroup's ``minResources`` as the requests its members must reach together.

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


def gang_of(pod: Pod) -> GangKey | None:
    """The pod's gang, or None when it belongs to none."""
    for label in MEMBER_LABELS:
        if pod.labels.get(label):
            return GangKey(pod.namespace, pod.labels[label])
    name = pod.annotations.get(VOLCANO_ANNOTATION) or pod.labels.get(PLAIN_LABEL, "")
    return GangKey(pod.namespace, name) if name else None


def without_gang(pod: Pod) -> Pod:
    """A copy of ``pod`` that belongs to no gang (the marks :func:`gang_of` reads removed)."""
    labels = {k: v for k, v in pod.labels.items() if k not in (*MEMBER_LABELS, PLAIN_LABEL)}
    annotations = {k: v for k, v in pod.annotations.items() if k != VOLCANO_ANNOTATION}
    return replace(pod, labels=labels, annotations=annotations)


def plain_groups(pods: list[Pod], known: set[GangKey]) -> list[PodGroup]:
    """Gangs declared on pods alone (no PodGroup object), min-member from the annotation."""
    found: dict[GangKey, PodGroup] = {}
    for pod in pods:
        name = pod.labels.get(PLAIN_LABEL, "")
        key = GangKey(pod.namespace, name)
        if not name or key in known or key in found:
            continue
        try:
            found[key] = PodGroup(pod.namespace, name, _plain_min_member(pod.annotations), origin="label",
                                  topology_key=_topology_key(pod.annotations),
                                  preferred_topology_key=_topology_key(pod.annotations, preferred=True))
        except InputError as error:
            raise error.located(file=pod.source, obj=f"Pod {pod.key}") from None
    return list(found.values())


def _plain_min_member(annotations: Mapping[str, str]) -> int:
    text = annotations.get(PLAIN_MIN_MEMBER, "")
    if not text:
        return 1
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 10 and 1 <= int(digits) <= INT32_MAX):
        raise InputError(f"got {text!r}", field=f"metadata.annotations.{PLAIN_MIN_MEMBER}",
                         expected=f"an integer from 1 to {INT32_MAX}")
    return int(digits)
