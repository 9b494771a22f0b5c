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
from dataclasses import dataclass, field
from typing import Any

from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import Pod
from kubeplace.kube.quantity import QuantityError, resource_amount

SCHEDULER_PLUGINS_GROUPS = ("scheduling.x-k8s.io", "scheduling.sigs.k8s.io")
VOLCANO_GROUP = "scheduling.volcano.sh"
MEMBER_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io")
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
PLAIN_LABEL = "kubeplace.io/gang"
PLAIN_MIN_MEMBER = "kubeplace.io/gang-min-member"
TOPOLOGY_KEY = "kubeplace.io/gang-topology-key"
PREFERRED_TOPOLOGY_KEY = "kubeplace.io/gang-topology-preferred-key"
DEFAULT_TIMEOUT_SECONDS = 60
CRDS = (("scheduling.x-k8s.io", "v1alpha1", "podgroups"), ("scheduling.sigs.k8s.io", "v1alpha1", "podgroups"),
        ("scheduling.volcano.sh", "v1beta1", "podgroups"))


@dataclass(frozen=True)
class PodGroup:
    namespace: str
    name: str
    min_member: int
    min_resources: Mapping[str, int] = field(default_factory=dict)
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    created: str = ""
    origin: str = ""  # the API group, or "label" for the CRD-free form
    topology_key: str = ""
    """A node label key: all members on nodes with one value of it ("" = anywhere)."""
    preferred_topology_key: str = ""
    """A node label key: members on as few of its values as they can ("" = no preference)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def is_pod_group(obj: Mapping[str, Any]) -> bool:
    group = str(obj.get("apiVersion", "")).split("/")[0]
    return obj.get("kind") == "PodGroup" and group in (*SCHEDULER_PLUGINS_GROUPS, VOLCANO_GROUP)


def parse_pod_group(obj: Mapping[str, Any], source: str) -> PodGroup:
    meta = obj.get("metadata") or {}
    where = f"PodGroup {meta.get('namespace', 'default')}/{meta.get('name', '?')}"
    spec = obj.get("spec") or {}
    if not isinstance(meta.get("name"), str):
        raise InputError("missing name", file=source, obj=where, field="metadata.name")
    min_member = spec.get("minMember", 1)
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 1:
        raise InputError(f"got {min_member!r}", file=source, obj=where, field="spec.minMember",
                         expected="an integer >= 1")
    timeout = spec.get("scheduleTimeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
    if not isinstance(timeout, int) or timeout < 0:
        raise InputError(f"got {timeout!r}", file=source, obj=where, field="spec.scheduleTimeoutSeconds",
                         expected="an integer >= 0")
    resources = {}
    for name, value in (spec.get("minResources") or {}).items():
        try:
            resources[str(name)] = resource_amount(str(name), value)
        except QuantityError as e:
            raise InputError(str(e), file=source, obj=where, field=f"spec.minResources.{name}") from None
    annotations = meta.get("annotations") or {}
    return PodGroup(str(meta.get("namespace") or "default"), meta["name"], min_member, resources, timeout,
                    str(meta.get("creationTimestamp", "")), str(obj["apiVersion"]).split("/")[0],
                    _topology_key(annotations, source, where), _topology_key(annotations, source, where, True))


def _topology_key(annotations: Mapping[str, Any], source: str, where: str, preferred: bool = False) -> str:
    """The gang topology annotation's label key; present but empty is an error (a typo
    must not silently drop the constraint)."""
    name = PREFERRED_TOPOLOGY_KEY if preferred else TOPOLOGY_KEY
    if name not in annotations:
        return ""
    value = annotations[name]
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"got {value!r}", file=source, obj=where, field=f"metadata.annotations.{name}",
                         expected="a node label key")
    return value.strip()


def group_of(pod: Pod) -> str:
    """The name of the pod's gang in its namespace, or "" when it has none."""
    for label in MEMBER_LABELS:
        if pod.labels.get(label):
            return pod.labels[label]
    return pod.annotations.get(VOLCANO_ANNOTATION) or pod.labels.get(PLAIN_LABEL, "")


def plain_groups(pods: list[Pod], known: set[str]) -> list[PodGroup]:
    """Gangs declared on pods alone (no PodGroup object), min-member from the annotation."""
    found: dict[str, PodGroup] = {}
    for pod in pods:
        name = pod.labels.get(PLAIN_LABEL, "")
        key = f"{pod.namespace}/{name}"
        if not name or key in known or key in found:
            continue
        text = pod.annotations.get(PLAIN_MIN_MEMBER, "")
        try:
            min_member = int(text) if text else 1
        except ValueError:
            raise InputError(f"got {text!r}", file=pod.source, obj=f"Pod {pod.key}",
                             field=f"metadata.annotations.{PLAIN_MIN_MEMBER}", expected="an integer >= 1") from None
        where = f"Pod {pod.key}"
        found[key] = PodGroup(pod.namespace, name, max(1, min_member), origin="label",
                              topology_key=_topology_key(pod.annotations, pod.source, where),
                              preferred_topology_key=_topology_key(pod.annotations, pod.source, where, True))
    return list(found.values())
