"""What a gang source is (:class:`GangSource`), and the PodGroup fields several sources share.

A gang source is one way users say "these pods run together or not at all": a PodGroup CRD of a
scheduler, a pod label, the Jobs of a JobSet, a Kueue Workload. Each is one module of this
package and one line of ``kube.gang_sources.SOURCES``; ``kube.gangs`` (which pods belong to
which gang), ``kube.gang_admission``, the snapshot's readers, ``serve``'s status writes and the
chart's RBAC (``tests/install/test_chart_gang_rbac.py``) all derive from that registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from kubeplace.kube.errors import INT32_MAX, InputError, expect_int, expect_mapping
from kubeplace.kube.objects import CPU, DEFAULT_GANG_TIMEOUT_SECONDS, GangKey, Pod, PodGroup
from kubeplace.kube.quantity import QuantityError, milli_value, parse_decimal, whole_value

Api = tuple[str, str, str]
"""(API group, version, plural) of a resource read from or written to a cluster."""
TOPOLOGY_KEY = "kubeplace.io/gang-topology-key"
PREFERRED_TOPOLOGY_KEY = "kubeplace.io/gang-topology-preferred-key"
REQUESTS_PREFIX = "requests."
IGNORED_MIN_RESOURCE_PREFIXES = ("limits.", "count/")
"""Quota names in ``minResources`` that are not requests for placement to meet."""
T = TypeVar("T")


@dataclass(frozen=True)
class Cluster:
    """What a scheduler's admission check of a PodGroup weighs (``kube.gang_admission``): the room
    of the whole cluster, and every PodGroup of the snapshot."""

    total: Mapping[str, int]
    """Allocatable summed over the nodes."""
    used: Mapping[str, int]
    """Requests summed over the pods bound to those nodes."""
    own: Mapping[GangKey, Mapping[str, int]]
    """Requests summed over each gang's own bound pods."""
    groups: Sequence[PodGroup]
    memo: dict[str, Any] = field(default_factory=dict, compare=False)
    """What a source's admission computes once per check over every group (``once``)."""

    def once(self, name: str, compute: Callable[[], T]) -> T:
        """``compute()``, computed the first time ``name`` is asked for only."""
        if name not in self.memo:
            self.memo[name] = compute()
        return cast(T, self.memo[name])


ParseSpec = Callable[[str, Mapping[str, Any], Mapping[str, Any], str], PodGroup]
"""(namespace, metadata, spec, API group) -> the PodGroup its object says."""


@dataclass(frozen=True)
class PodGroupKind:
    """A PodGroup object kind of a source: the versions kubeplace reads, how their spec reads, and
    whether (and at which version) ``serve`` writes its status."""

    group: str
    versions: tuple[str, ...]
    parse: ParseSpec
    status_version: str = ""
    """The version whose ``status`` subresource (phase, scheduled count) ``serve`` patches; "" never."""

    def missing(self, namespace: str, name: str) -> str:
        """Why a pod naming a PodGroup the snapshot lacks waits."""
        return f"waiting for its PodGroup {namespace}/{name} ({self.group}), which is not in the snapshot"


@dataclass(frozen=True)
class GangSource:
    """One gang source: its name, how a pod says its gang, what it reads from a cluster, and its
    scheduler's admission check. Sources are asked in registry order; the first that names a gang
    for a pod decides it."""

    name: str
    member: Callable[[Pod], GangKey | None]
    """The gang the pod's marks say, None for none."""
    reads: tuple[Api, ...] = ()
    """Every resource this source lists from a cluster (one not served lists as empty): the snapshot
    readers, ``serve``'s informer and the chart's ClusterRole (get, list, watch) take them from here."""
    kind: PodGroupKind | None = None
    """The PodGroup object the pod's gang is, when it is one (a pod naming one the snapshot lacks
    never runs)."""
    admission: Callable[[PodGroup, Cluster], str] | None = None
    """Why its scheduler would not admit this PodGroup now ("": admitted)."""
    labels: tuple[str, ...] = ()
    """The pod labels that make a pod a member (``kube.gangs.without_gang`` removes them)."""
    annotations: tuple[str, ...] = ()
    """The pod annotations that make a pod a member (``kube.gangs.without_gang`` removes them)."""


def label_member(label: str) -> Callable[[Pod], GangKey | None]:
    """A pod's gang named by its label ``label``."""
    def member(pod: Pod) -> GangKey | None:
        name = pod.labels.get(label, "")
        return GangKey(pod.namespace, name) if name else None
    return member


def annotation_member(annotation: str) -> Callable[[Pod], GangKey | None]:
    """A pod's gang named by its annotation ``annotation``."""
    def member(pod: Pod) -> GangKey | None:
        name = pod.annotations.get(annotation, "")
        return GangKey(pod.namespace, name) if name else None
    return member


def crd_pod_group(namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any], group: str) -> PodGroup:
    """A scheduler-plugins or Volcano PodGroup; its ``minResources`` is what its scheduler admits it by
    (``kube.gang_admission``), not a sum its placed members must reach."""
    min_member = expect_int(spec.get("minMember", 1), "spec.minMember", 1, INT32_MAX)
    timeout = expect_int(spec.get("scheduleTimeoutSeconds", DEFAULT_GANG_TIMEOUT_SECONDS),
                         "spec.scheduleTimeoutSeconds", 0, INT32_MAX)
    resources = min_resources(expect_mapping(spec.get("minResources"), "spec.minResources"))
    annotations = expect_mapping(meta.get("annotations"), "metadata.annotations")
    return PodGroup(namespace, meta["name"], min_member, resources, timeout, str(meta.get("creationTimestamp", "")),
                    group, topology_key(annotations), topology_key(annotations, preferred=True))


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


def topology_key(annotations: Mapping[str, Any], preferred: bool = False) -> str:
    """The gang topology annotation's label key; present but empty is an error (a typo
    must not silently drop the constraint)."""
    name = PREFERRED_TOPOLOGY_KEY if preferred else TOPOLOGY_KEY
    if name not in annotations:
        return ""
    value = annotations[name]
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"got {value!r}", field=f"metadata.annotations.{name}", expected="a node label key")
    return value.strip()


def summed(amounts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for one in amounts:
        for name, amount in one.items():
            total[name] = total.get(name, 0) + amount
    return total


def render(amounts: Mapping[str, int]) -> str:
    return ", ".join(f"{name}={amount}m" if name == CPU else f"{name}={amount}"
                     for name, amount in sorted(amounts.items()))
