"""Tenant: a node labelled for a tenant takes only that tenant's pods.

The pod's tenant is its label ``podLabel`` (or the annotation of that name), else the
label ``namespaceLabel`` of its namespace, else, with ``namespaceIsTenant``, the
namespace name. Nodes without the label are shared by everyone, or with
``untenantedNodes: closed`` reserved for pods without a tenant.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.objects import Node, Pod
from kubeplace.models.framework import RunContext
from kubeplace.models.problem import BoolArray

NAME = "Tenant"
SHARED = "shared"
CLOSED = "closed"


@dataclass(frozen=True)
class TenantArgs:
    nodeLabel: str = "tenant"
    podLabel: str = "tenant"
    namespaceLabel: str = "tenant"
    namespaceIsTenant: bool = False
    untenantedNodes: str = SHARED

    def validate(self) -> list[str]:
        if self.untenantedNodes not in (SHARED, CLOSED):
            return [f"untenantedNodes: expected '{SHARED}' or '{CLOSED}', got '{self.untenantedNodes}'"]
        return []


@dataclass(frozen=True)
class Tenant:
    args: TenantArgs
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    name: str = NAME
    reason: str = "node(s) belong to another tenant"

    def tenant_of(self, pod: Pod) -> str:
        a = self.args
        found = pod.labels.get(a.podLabel) or pod.annotations.get(a.podLabel)
        found = found or self.namespace_labels.get(pod.namespace, {}).get(a.namespaceLabel)
        if not found and a.namespaceIsTenant:
            found = pod.namespace
        return found or ""

    def pod_key(self, pod: Pod) -> Hashable:
        return self.tenant_of(pod)

    def node_key(self, node: Node) -> Hashable:
        return node.labels.get(self.args.nodeLabel, "")

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        tenant = self.tenant_of(pod)
        node_tenants = [n.labels.get(self.args.nodeLabel, "") for n in nodes]
        open_untenanted = self.args.untenantedNodes == SHARED or not tenant
        return np.array([t == tenant or (not t and open_untenanted) for t in node_tenants], dtype=np.bool_)


def build(args: TenantArgs, ctx: RunContext) -> Tenant:
    return Tenant(args, ctx.snapshot.namespace_labels)
