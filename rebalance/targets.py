"""Rebalance targets: where the replacement of an evicted pod should go, for a while.

``kubeplace rebalance --apply`` records, for pods kubeplace itself schedules, the target
node of each move in the ConfigMap ``kubeplace-rebalance-targets`` (with an expiry).
``kubeplace serve`` honours them until then: a pending pod with the same namespace and
controller (KIND/NAME) as an evicted one is steered to that move's target node, one pod
per move, by a required node affinity on ``metadata.name`` added to the pod as read.
Afterwards, or for pods of no recorded owner, placement is free again.
"""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TARGETS_CONFIGMAP = "kubeplace-rebalance-targets"

RawObject = dict[str, Any]


@dataclass(frozen=True)
class Target:
    namespace: str
    owner: str  # KIND/NAME of the evicted pod's controller
    node: str


def parse_targets(data: Mapping[str, str] | None, now: datetime.datetime) -> list[Target]:
    """The targets still in force; [] for no ConfigMap, an expired one or unreadable data."""
    if not data:
        return []
    try:
        expires = datetime.datetime.fromisoformat(str(data.get("expires", "")).replace("Z", "+00:00"))
        entries = json.loads(data.get("targets.json", "[]"))
    except ValueError:
        return []
    if expires <= now:
        return []
    return [Target(str(e.get("namespace", "")), str(e.get("owner", "")), str(e.get("to", "")))
            for e in entries if isinstance(e, dict) and e.get("owner") and e.get("to")]


def controller_of(obj: Mapping[str, Any]) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return f"{ref.get('kind', '')}/{ref.get('name', '')}"
    return ""


def _is_pending(obj: Mapping[str, Any], scheduler_name: str) -> bool:
    spec = obj.get("spec") or {}
    return (obj.get("kind") == "Pod" and not spec.get("nodeName")
            and (spec.get("schedulerName") or "default-scheduler") == scheduler_name
            and not (obj.get("metadata") or {}).get("deletionTimestamp"))


def steer(objects: Sequence[RawObject], targets: Sequence[Target], scheduler_name: str) -> list[RawObject]:
    """``objects`` with each target's pod (the oldest pending pod of that namespace and
    controller not steered yet) restricted to the target node."""
    if not targets:
        return list(objects)
    out = list(objects)
    candidates: dict[tuple[str, str], list[int]] = {}
    for i, obj in enumerate(out):
        if _is_pending(obj, scheduler_name) and (owner := controller_of(obj)):
            meta = obj.get("metadata") or {}
            candidates.setdefault((meta.get("namespace", "default"), owner), []).append(i)
    for indices in candidates.values():
        indices.sort(key=lambda i: (str((out[i].get("metadata") or {}).get("creationTimestamp", "")),
                                    str((out[i].get("metadata") or {}).get("name", ""))))
    for target in targets:
        queue = candidates.get((target.namespace, target.owner))
        if queue:
            i = queue.pop(0)
            out[i] = pinned_to(out[i], target.node)
    return out


def pinned_to(pod: RawObject, node: str) -> RawObject:
    """A copy of the pod whose required node affinity also demands ``metadata.name In [node]``
    (added to every existing term, which keeps the pod's own rules)."""
    pod = copy.deepcopy(pod)
    spec = pod.setdefault("spec", {})
    affinity = spec.setdefault("affinity", {}) or {}
    spec["affinity"] = affinity
    node_affinity = affinity.setdefault("nodeAffinity", {}) or {}
    affinity["nodeAffinity"] = node_affinity
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {}) or {}
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    pin = {"key": "metadata.name", "operator": "In", "values": [node]}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        required["nodeSelectorTerms"] = [{"matchFields": [pin]}]
        return pod
    # an empty term matches nothing and must stay so
    required["nodeSelectorTerms"] = [{**t, "matchFields": [*(t.get("matchFields") or []), pin]} if t else t
                                     for t in terms]
    return pod
