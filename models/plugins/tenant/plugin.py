"""Tenant: a node labelled for a tenant takes only that tenant's pods.

The namespace is the boundary. A pod's tenant is its namespace's: the namespace label
``namespaceLabel``, else, with ``namespaceIsTenant``, the namespace name. A pod cannot pick a
tenant of its own, since anyone who may create a pod could then choose which tenant's nodes it
runs on. Only with ``trustPodTenant`` (off by default: for clusters where an admission policy
owns the pod label) does a pod's label ``podLabel`` (or the annotation of that name) count,
and then only in a namespace without a tenant: it never overrides a namespace's tenant.
Nodes without the node label ``nodeLabel`` are shared by everyone, or with
``untenantedNodes: closed`` reserved for pods without a tenant.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubeplace.kube.objects import Node, Pod
from kubeplace.models.framework import RunContext
from kubeplace.models.plugins.tenant.args import SHARED, TenantArgs
from kubeplace.models.problem import BoolArray

NAME = "Tenant"


def tenant_of(pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]], args: TenantArgs) -> str:
    """The pod's tenant ("" for none): its namespace's, else, when trusted, its own."""
    tenant = namespace_labels.get(pod.namespace, {}).get(args.namespaceLabel, "")
    if not tenant and args.namespaceIsTenant:
        tenant = pod.namespace
    if not tenant and args.trustPodTenant:
        tenant = pod.labels.get(args.podLabel) or pod.annotations.get(args.podLabel) or ""
    return tenant


@dataclass(frozen=True)
class Tenant:
    args: TenantArgs
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    name: str = NAME
    reason: str = "node(s) belong to another tenant"

    def pod_key(self, pod: Pod) -> Hashable:
        return tenant_of(pod, self.namespace_labels, self.args)

    def node_key(self, node: Node) -> Hashable:
        return node.labels.get(self.args.nodeLabel, "")

    def node_key_basis(self) -> object:
        return self.args.nodeLabel

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        tenant = tenant_of(pod, self.namespace_labels, self.args)
        node_tenants = [n.labels.get(self.args.nodeLabel, "") for n in nodes]
        open_untenanted = self.args.untenantedNodes == SHARED or not tenant
        return np.array([t == tenant or (not t and open_untenanted) for t in node_tenants], dtype=np.bool_)


def build(args: TenantArgs, ctx: RunContext) -> Tenant:
    return Tenant(args, ctx.snapshot.namespace_labels)
