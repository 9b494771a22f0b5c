"""The in-tree plugins and the registry that maps their names to factories."""

from __future__ import annotations

from kubeplace.models.framework import CONSTRAINT, FILTER, SCORE, Objective, PluginFactory, Registry
from kubeplace.models.plugins import (
    dynamic_resources,
    gang,
    gpu_model,
    inter_pod_affinity,
    load_aware,
    node_affinity,
    node_ports,
    node_unschedulable,
    node_volume_limits,
    objectives,
    overcommit,
    preferences,
    taint_toleration,
    topology_spread,
    volume_binding,
    volume_restrictions,
    volume_zone,
)
from kubeplace.models.plugins import tenant as tenant_plugin


def in_tree_registry() -> Registry:
    """A fresh registry per run: no global mutable state."""
    factories = [
        PluginFactory(node_unschedulable.NAME, FILTER, None, node_unschedulable.build),
        PluginFactory(node_affinity.NAME, (FILTER, CONSTRAINT, SCORE), preferences.NodeAffinityArgs,
                      preferences.build_node_affinity),
        PluginFactory(taint_toleration.NAME, (FILTER, CONSTRAINT, SCORE), preferences.TaintTolerationArgs,
                      preferences.build_taint_toleration),
        PluginFactory(node_ports.NAME, (FILTER, CONSTRAINT), None, node_ports.build),
        PluginFactory(volume_restrictions.NAME, FILTER, None, volume_restrictions.build),
        PluginFactory(node_volume_limits.NAME, (FILTER, CONSTRAINT), None, node_volume_limits.build),
        PluginFactory(volume_binding.NAME, (FILTER, CONSTRAINT), None, volume_binding.build),
        PluginFactory(volume_zone.NAME, FILTER, None, volume_zone.build),
        PluginFactory(topology_spread.NAME, (FILTER, CONSTRAINT, SCORE), topology_spread.PodTopologySpreadArgs,
                      topology_spread.build),
        PluginFactory(inter_pod_affinity.NAME, (FILTER, CONSTRAINT, SCORE), preferences.InterPodAffinityArgs,
                      inter_pod_affinity.build),
        PluginFactory(dynamic_resources.NAME, (FILTER, CONSTRAINT), None, dynamic_resources.build),
        PluginFactory(tenant_plugin.NAME, FILTER, tenant_plugin.TenantArgs, tenant_plugin.build),
        PluginFactory(gpu_model.NAME, FILTER, gpu_model.GPUModelArgs, gpu_model.build),
        PluginFactory(gang.NAME, CONSTRAINT, None, gang.build),
        PluginFactory(gang.PREFERENCE_NAME, SCORE, None, gang.build_preference),
        PluginFactory(load_aware.NAME, (FILTER, SCORE), load_aware.LoadAwareArgs, load_aware.build),
        PluginFactory(overcommit.NAME, CONSTRAINT, overcommit.OvercommitArgs, overcommit.build),
        PluginFactory("Balance", SCORE, objectives.BalanceArgs, objectives.build_balance),
        PluginFactory("BinPack", SCORE, objectives.BinPackArgs, objectives.build_binpack),
        PluginFactory("GPUFragmentation", SCORE, objectives.GPUFragmentationArgs, objectives.build_fragmentation),
    ]
    return {f.name: f for f in factories}


DEFAULT_PLUGINS = (node_unschedulable.NAME, node_affinity.NAME, taint_toleration.NAME, node_ports.NAME,
                   volume_restrictions.NAME, node_volume_limits.NAME, volume_binding.NAME, volume_zone.NAME,
                   topology_spread.NAME, inter_pod_affinity.NAME, dynamic_resources.NAME, tenant_plugin.NAME,
                   gpu_model.NAME, gang.NAME, gang.PREFERENCE_NAME, load_aware.NAME, overcommit.NAME)
"""Enabled in every profile (``disabled: ["*"]`` removes them all)."""
OBJECTIVE_SCORES = {Objective.BALANCE: ("Balance",), Objective.BINPACK: ("BinPack",),
                    Objective.DEFRAG: ("GPUFragmentation",)}
"""The score plugin each objective enables."""
__all__ = ["CONSTRAINT", "DEFAULT_PLUGINS", "OBJECTIVE_SCORES", "in_tree_registry"]
