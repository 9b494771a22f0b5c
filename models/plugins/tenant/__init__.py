"""Tenant: a node labelled for a tenant takes only that tenant's pods: the filter (``plugin``),
its args (``args``), the verifier check (``verify``)."""

from __future__ import annotations

from kubeplace.models.framework import FILTER
from kubeplace.models.plugins.tenant import verify
from kubeplace.models.plugins.tenant.args import CLOSED, SHARED, TenantArgs
from kubeplace.models.plugins.tenant.plugin import NAME, Tenant, build, tenant_of
from kubeplace.models.rules import Verifier, rule

RULE = rule(NAME, FILTER, TenantArgs, build, verify=Verifier(pair=verify.check_pair))

__all__ = ["CLOSED", "NAME", "RULE", "SHARED", "Tenant", "TenantArgs", "build", "tenant_of"]
