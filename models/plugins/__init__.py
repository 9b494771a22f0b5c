"""The in-tree rules and the registry that maps their names to factories.

A rule lives in its folder ``models/plugins/<rule>/`` (plugin, args, independent verifier check,
emulation check, filter order: ``models.rules``) and is one line of :data:`RULES`
(docs/development.md, Adding a rule).
"""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, Objective, Registry
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
from kubeplace.models.rules import InTreeRule

RULES: tuple[InTreeRule, ...] = (
    node_unschedulable.RULE,
    node_affinity.RULE,
    taint_toleration.RULE,
    node_ports.RULE,
    volume_restrictions.RULE,
    node_volume_limits.RULE,
    volume_binding.RULE,
    volume_zone.RULE,
    topology_spread.RULE,
    inter_pod_affinity.RULE,
    dynamic_resources.RULE,
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
