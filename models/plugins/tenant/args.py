"""Tenant's args: where a node's, a namespace's and (when trusted) a pod's tenant is read, and
whether untenanted nodes are shared or closed (``plugin`` says what each means)."""

from __future__ import annotations

from dataclasses import dataclass

SHARED = "shared"
CLOSED = "closed"


@dataclass(frozen=True)
class TenantArgs:
    nodeLabel: str = "tenant"
    podLabel: str = "tenant"
    namespaceLabel: str = "tenant"
    namespaceIsTenant: bool = False
    trustPodTenant: bool = False
    untenantedNodes: str = SHARED

    def validate(self) -> list[str]:
        problems = []
        if self.untenantedNodes not in (SHARED, CLOSED):
            problems.append(f"untenantedNodes: expected '{SHARED}' or '{CLOSED}', got '{self.untenantedNodes}'")
        if self.trustPodTenant and self.namespaceIsTenant:
            problems.append("trustPodTenant: has no effect with namespaceIsTenant (every namespace is a tenant, "
                            "and a pod's tenant never overrides its namespace's); set one of them")
        return problems
