"""The in-tree rules and the registry that maps their names to factories.

A rule lives in its folder ``models/plugins/<rule>/`` (plugin, args, independent verifier check,
emulation check, filter order: ``models.rules``) and is one line of :data:`RULES`
(docs/development.md, Adding a rule). The rules whose verifier check is still in a plan module
(``plan/verify_volumes.py``, ``plan/verify_claims.py``) are described here, their verifier naming
that module, until they move into a folder of their own.
"""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, FILTER, Objective, Registry
from kubeplace.models.plugins import (
    balance,
    bin_pack,
    coscheduling,
    dynamic_resources,
    gang_topology_preference,
    gpu_fragmentation,
    gpu_model,
    inter_pod_affinity,
    load_aware,
    node_affinity,
    node_ports,
    node_unschedulable,
    node_volume_limits,
    overcommit,
    taint_toleration,
    tenant,
    topology_spread,
    volume_binding,
    volume_restrictions,
    volume_zone,
)
from kubeplace.models.rules import InTreeRule, Verifier, rule

_VOLUMES, _CLAIMS = (Verifier(in_plan=f"plan/{m}.py") for m in ("verify_volumes", "verify_claims"))

RULES: tuple[InTreeRule, ...] = (
    node_unschedulable.RULE,
    node_affinity.RULE,
    taint_toleration.RULE,
    node_ports.RULE,
    rule(volume_restrictions.NAME, FILTER, None, volume_restrictions.build, verify=_VOLUMES, filter_order=7),
    rule(node_volume_limits.NAME, (FILTER, CONSTRAINT), None, node_volume_limits.build, verify=_VOLUMES,
         filter_order=8),
    rule(volume_binding.NAME, (FILTER, CONSTRAINT), None, volume_binding.build, verify=_VOLUMES, filter_order=9),
    rule(volume_zone.NAME, FILTER, None, volume_zone.build, verify=_VOLUMES, filter_order=10),
    topology_spread.RULE,
    inter_pod_affinity.RULE,
    rule(dynamic_resources.NAME, (FILTER, CONSTRAINT), None, dynamic_resources.build, verify=_CLAIMS,
         filter_order=13),
    tenant.RULE,
    gpu_model.RULE,
    coscheduling.RULE,
    gang_topology_preference.RULE,
    load_aware.RULE,
    overcommit.RULE,
    balance.RULE,
    bin_pack.RULE,
    gpu_fragmentation.RULE,
)
"""Every in-tree rule, one line each, in the order the profile runs them."""


def in_tree_registry() -> Registry:
    """A fresh registry per run: no global mutable state."""
    return {r.name: r.factory for r in RULES}


DEFAULT_PLUGINS = tuple(r.name for r in RULES if r.default)
"""Enabled in every profile (``disabled: ["*"]`` removes them all)."""
OBJECTIVE_SCORES = {Objective.BALANCE: (balance.NAME,), Objective.BINPACK: (bin_pack.NAME,),
                    Objective.DEFRAG: (gpu_fragmentation.NAME,)}
"""The score plugin each objective enables."""
__all__ = ["CONSTRAINT", "DEFAULT_PLUGINS", "OBJECTIVE_SCORES", "RULES", "in_tree_registry"]
