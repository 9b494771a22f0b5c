"""Services, ReplicationControllers, ReplicaSets and StatefulSets: what the kube-scheduler's default
topology spread constraints select pods by (``helper/spread.go DefaultSelector``).

A pod without ``topologySpreadConstraints`` gets the profile's default constraints (PodTopologySpread's
``defaultConstraints``; the system defaults unless configured), with one selector for all of them:
the union of the selectors of the Services of its namespace that select it (a Service without a
selector selects nothing), ANDed with the selector of its controlling ReplicationController,
ReplicaSet or StatefulSet. An empty selector means no default constraints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubeplace.kube.errors import InputError, expect_mapping, expect_name, expect_namespace, expect_str
from kubeplace.kube.objects import Controller, Pod, Requirement
from kubeplace.kube.selectors import label_selector, matches

SERVICE, REPLICATION_CONTROLLER, REPLICA_SET, STATEFUL_SET = "Service", "ReplicationController", "ReplicaSet", \
    "StatefulSet"
CONTROLLER_KINDS = (("", SERVICE), ("", REPLICATION_CONTROLLER), ("apps", REPLICA_SET), ("apps", STATEFUL_SET))
"""(API group, kind) of the objects read for the default spread selector."""
OWNER_API_VERSIONS = {REPLICATION_CONTROLLER: "v1", REPLICA_SET: "apps/v1", STATEFUL_SET: "apps/v1"}
"""The controller reference's apiVersion the kube-scheduler recognises for each kind."""


def parse_controller(obj: Mapping[str, Any]) -> Controller:
    """One Service, ReplicationController, ReplicaSet or StatefulSet; InputError naming the field."""
    kind = expect_str(obj.get("kind"), "kind")
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    spec = expect_mapping(obj.get("spec"), "spec")
    namespace = expect_namespace(metadata)
    name = expect_name(metadata)
    if kind in (SERVICE, REPLICATION_CONTROLLER):
        raw = spec.get("selector")
        if raw is None:
            return Controller(kind, namespace, name, None)
        labels = {str(k): expect_str(v, f"spec.selector.{k}") for k, v in expect_mapping(raw, "spec.selector").items()}
        return Controller(kind, namespace, name, tuple(Requirement(k, "In", (v,)) for k, v in sorted(labels.items())))
    if kind in (REPLICA_SET, STATEFUL_SET):
        return Controller(kind, namespace, name, label_selector(spec.get("selector"), "spec.selector"))
    raise InputError(f"kind {kind!r} is not a controller", field="kind",
                     expected=", ".join(k for _, k in CONTROLLER_KINDS))


def default_selector(pod: Pod, controllers: Sequence[Controller]) -> tuple[Requirement, ...]:
    """``DefaultSelector``: the Services' selectors that select the pod, and its controller's."""
    found: dict[Requirement, None] = {}
    for c in controllers:
        if c.kind == SERVICE and c.namespace == pod.namespace and c.selector is not None \
                and matches(c.selector, pod.labels):
            found.update(dict.fromkeys(c.selector))
    if pod.owner_api_version != OWNER_API_VERSIONS.get(pod.owner_kind):
        return tuple(found)
    for c in controllers:
        if (c.kind, c.namespace, c.name) == (pod.owner_kind, pod.namespace, pod.owner_name) and c.selector:
            found.update(dict.fromkeys(c.selector))
    return tuple(found)
