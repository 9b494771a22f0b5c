"""The input's raw objects (camelCase dicts, as in YAML, JSON or the API) before they are typed.

Each is checked to be a Kubernetes object, lists are replaced by their items, and the objects are
sorted by the kinds a snapshot reads (:data:`READ_KINDS`), those of every other kind counted;
:func:`object_label` names an object in error messages. ``kube.parse`` builds the snapshot from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kubeplace.kube.capacity import DAEMON_SET
from kubeplace.kube.dra_parse import DRA_KINDS
from kubeplace.kube.errors import InputError, expect_list
from kubeplace.kube.followers import KINDS as FOLLOWER_KINDS
from kubeplace.kube.gangs import POD_GROUP_API_GROUPS
from kubeplace.kube.karpenter import KINDS as KARPENTER_KINDS
from kubeplace.kube.kueue import KIND as KUEUE_KIND
from kubeplace.kube.metrics import KINDS as METRICS_KINDS
from kubeplace.kube.runtime_classes import RUNTIME_CLASS
from kubeplace.kube.storage import STORAGE_KINDS
from kubeplace.kube.workloads import CONTROLLER_KINDS

RawObject = Mapping[str, Any]
Sourced = tuple[RawObject, str]
"""A raw object and where it was read from (a file path, or ``cluster`` for the API)."""

CORE = ""
"""The core API group (``apiVersion: v1``)."""
NODE, POD, NAMESPACE = (CORE, "Node"), (CORE, "Pod"), (CORE, "Namespace")
PRIORITY_CLASS = ("scheduling.k8s.io", "PriorityClass")
DISRUPTION_BUDGET = ("policy", "PodDisruptionBudget")
POD_GROUPS = tuple((group, "PodGroup") for group in POD_GROUP_API_GROUPS)
READ_KINDS = frozenset({NODE, POD, NAMESPACE, PRIORITY_CLASS, RUNTIME_CLASS, DISRUPTION_BUDGET, *POD_GROUPS,
                        *STORAGE_KINDS, *DRA_KINDS, *METRICS_KINDS, *FOLLOWER_KINDS, KUEUE_KIND,
                        *CONTROLLER_KINDS, *KARPENTER_KINDS, DAEMON_SET})
"""(API group, kind) of the objects a snapshot is built from; objects of every other kind are
skipped (and counted, see :attr:`Snapshot.skipped_kinds`): a real cluster's dump holds many
(VolumeAttachment, CRDs of Kueue, Volcano, Karpenter's NodeOverlays...) that placement does not read."""
CORE_KINDS = frozenset({
    "Pod", "PodTemplate", "ReplicationController", "Service", "Endpoints", "Node", "Binding", "Event",
    "LimitRange", "ResourceQuota", "Namespace", "Secret", "ServiceAccount", "PersistentVolume",
    "PersistentVolumeClaim", "ComponentStatus", "ConfigMap", "RangeAllocation", "Status",
})  # fmt: skip
"""Every object kind of core v1 (k8s.io/api/core/v1 register.go): the one group whose kinds are all
known, so a kind it lacks (``Pods``) is a typo to refuse rather than an object to skip."""


def object_label(obj: RawObject) -> str:
    """``Pod default/web-1``, ``Node n1``: how error messages name an object."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    name = metadata.get("name") or "?"
    kind = obj.get("kind") or "object"
    namespaced = kind in ("Pod", "PersistentVolumeClaim", "CSIStorageCapacity", "ResourceClaim",
                          "ResourceClaimTemplate")
    return f"{kind} {metadata.get('namespace') or 'default'}/{name}" if namespaced else f"{kind} {name}"


def api_group(obj: RawObject) -> str:
    """The API group of a checked object: ``apps`` for ``apps/v1``, "" (core) for ``v1``."""
    return str(obj["apiVersion"]).rpartition("/")[0]


def kind_of(obj: RawObject) -> tuple[str, str]:
    """(API group, kind) of a checked object: what decides whether a snapshot reads it."""
    return api_group(obj), str(obj["kind"])


def is_list(obj: RawObject) -> bool:
    """``kind: List`` (what ``kubectl get -o yaml`` prints), or the API's typed list of a kind
    the snapshot reads (``NodeList``, ``PodGroupList``...)."""
    group, kind = kind_of(obj)
    return (group == CORE and kind == "List") or (kind.endswith("List") and (group, kind[:-4]) in READ_KINDS)


def flatten(objects: Iterable[Sourced]) -> Iterator[Sourced]:
    """Objects with ``kind: List`` (as ``kubectl get -o yaml`` prints) replaced by their items,
    after checking that every object is a mapping with ``kind`` and ``apiVersion``."""
    for obj, source in objects:
        check_object(obj, source)
        if is_list(obj):
            yield from _list_items(obj, source)
        else:
            yield obj, source


def _list_items(container: RawObject, source: str) -> Iterator[Sourced]:
    """The checked items of a List; typed lists (NodeList...) give their items the kind that
    the API leaves out of each item."""
    typed_kind = container["kind"].removesuffix("List")
    try:
        items = expect_list(container.get("items"), "items")
    except InputError as error:
        raise error.located(file=source, obj=object_label(container)) from None
    for index, item in enumerate(items):
        if typed_kind and isinstance(item, Mapping):
            item = {"kind": typed_kind, "apiVersion": container["apiVersion"], **item}
        try:
            check_object(item, source)
        except InputError as error:
            raise error.located(field_prefix=f"items[{index}]") from None
        if is_list(item):
            yield from _list_items(item, source)
        else:
            yield item, source


def check_object(obj: object, source: str) -> None:
    """A Kubernetes object is a mapping with a string ``kind`` and ``apiVersion``."""
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise InputError(
            f"{type(obj).__name__} is not a Kubernetes object", file=source, expected="a mapping with kind"
        )
    for required in ("apiVersion", "kind"):
        if not isinstance(obj.get(required), str) or not obj[required]:
            raise InputError(f"missing {required}", file=source, obj=object_label(obj), field=required)


def by_kind(objects: Iterable[Sourced]) -> tuple[dict[tuple[str, str], list[Sourced]], dict[str, int]]:
    """The objects a snapshot reads, by (API group, kind), and how many of each other kind were
    skipped (``Kind.group``, ``Kind`` for core); a core v1 kind that does not exist is refused."""
    kinds: dict[tuple[str, str], list[Sourced]] = {}
    skipped: dict[str, int] = {}
    for obj, where in objects:
        group, kind = key = kind_of(obj)
        if key in READ_KINDS:
            kinds.setdefault(key, []).append((obj, where))
            continue
        if group == CORE and kind not in CORE_KINDS:
            raise InputError(f"unknown kind {kind!r} in the core API (apiVersion v1)", file=where,
                             obj=object_label(obj), field="kind", expected="Node, Pod, Namespace or another core kind")
        label = f"{kind}.{group}" if group else kind
        skipped[label] = skipped.get(label, 0) + 1
    return kinds, skipped


def skipped_summary(skipped: Mapping[str, int], most: int = 8) -> str:
    """One line saying which objects a snapshot skipped; "" when none."""
    if not skipped:
        return ""
    ranked = sorted(skipped.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{count} {kind}" for kind, count in ranked[:most])
    more = f" and {len(ranked) - most} more kinds" if len(ranked) > most else ""
    total = sum(skipped.values())
    return (f"skipped {total} object{'s' if total != 1 else ''} of kinds placement does not read: "
            f"{shown}{more}")
