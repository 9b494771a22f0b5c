"""The public plugin API: everything a user plugin needs, and the only module it should import.

A plugin's factory declares its extension point (``FILTER``, ``SCORE`` or ``CONSTRAINT``, or a
tuple of them); kubeplace builds the plugin when the configuration is loaded and refuses it,
naming the missing method, when it does not implement a point it declares. Score plugins get
the aggregated :class:`Problem` they score; any plugin may also define
``unmodelled(pod) -> tuple[str, ...]``, the rules of the pod it cannot model, which leaves the
pod to the default scheduler; a filter may define ``rejection(pod)`` (its PreFilter) and
``node_reasons(pod, nodes)`` (per-node reasons). See :mod:`kubeplace.models.framework` for the contracts. A plugin
never imports a solver library.
"""

from __future__ import annotations

from kubeplace.kube.objects import Node, NodeMetrics, Pod, PodMetrics, Snapshot, SpecRule
from kubeplace.models.framework import (
    CONSTRAINT,
    FILTER,
    SCORE,
    ClassView,
    ConstraintPlugin,
    FilterPlugin,
    FragmentationTerm,
    GangDomainsTerm,
    LoadBalanceTerm,
    NodeReasons,
    NodesUsedTerm,
    Objective,
    ObjectiveTerm,
    PluginError,
    PluginFactory,
    PreferenceTerm,
    Rejects,
    RunContext,
    ScorePlugin,
    Unmodelled,
    all_true,
)
from kubeplace.models.problem import BoolArray, DomainPreference, Gang, GroupCap, Headroom, NodePreference, Problem

__all__ = [
    "CONSTRAINT",
    "FILTER",
    "SCORE",
    "BoolArray",
    "ClassView",
    "ConstraintPlugin",
    "DomainPreference",
    "FilterPlugin",
    "FragmentationTerm",
    "Gang",
    "GangDomainsTerm",
    "GroupCap",
    "Headroom",
    "LoadBalanceTerm",
    "Node",
    "NodeMetrics",
    "NodePreference",
    "NodeReasons",
    "NodesUsedTerm",
    "Objective",
    "ObjectiveTerm",
    "PluginError",
    "PluginFactory",
    "Pod",
    "PodMetrics",
    "PreferenceTerm",
    "Problem",
    "Rejects",
    "RunContext",
    "ScorePlugin",
    "Snapshot",
    "SpecRule",
    "Unmodelled",
    "all_true",
]
