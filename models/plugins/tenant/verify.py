"""Tenant's independent verifier check. The namespace is the tenant boundary: its label, else
(namespaceIsTenant) its name; the pod's own label or annotation only where the namespace names no
tenant and the configuration trusts it. Imports only ``kubeplace.kube``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from kubeplace.kube.objects import Node, Pod, Snapshot


class TenantSettings(Protocol):
    """What the check reads of the rule's args (``TenantArgs``)."""

    @property
    def nodeLabel(self) -> str: ...

    @property
    def podLabel(self) -> str: ...

    @property
    def namespaceLabel(self) -> str: ...

    @property
    def namespaceIsTenant(self) -> bool: ...

    @property
    def trustPodTenant(self) -> bool: ...

    @property
    def untenantedNodes(self) -> str: ...


def check_pair(pod: Pod, node: Node, snapshot: Snapshot, args: TenantSettings) -> Iterator[str]:
    namespace_tenant = snapshot.namespace_labels.get(pod.namespace, {}).get(args.namespaceLabel)
    if namespace_tenant:
        pod_tenant = namespace_tenant
    elif args.namespaceIsTenant:
        pod_tenant = pod.namespace
    elif args.trustPodTenant:
        pod_tenant = pod.labels.get(args.podLabel) or pod.annotations.get(args.podLabel) or ""
    else:
        pod_tenant = ""
    node_tenant = node.labels.get(args.nodeLabel, "")
    if node_tenant and node_tenant != pod_tenant:
        yield f"node belongs to tenant {node_tenant!r}, pod to {pod_tenant or 'no tenant'!r}"
    elif not node_tenant and pod_tenant and args.untenantedNodes != "shared":
        yield f"untenanted node is closed to tenant {pod_tenant!r}"
