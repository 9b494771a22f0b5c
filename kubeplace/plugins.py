"""The public plugin API: everything a user plugin needs, and the only module it should import.

A plugin implements one extension point (filter, score or constraint; see
:mod:`kubeplace.models.framework` for the contracts) and never imports a solver library.
"""

from __future__ import annotations

from kubeplace.kube.objects import Node, Pod, Snapshot
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
    NodesUsedTerm,
    ObjectiveTerm,
    PluginFactory,
    RunContext,
    ScorePlugin,
    all_true,
)
from kubeplace.models.problem import BoolArray, Gang, GroupCap

__all__ = [
    "CONSTRAINT",
    "FILTER",
    "SCORE",
    "BoolArray",
    "ClassView",
    "ConstraintPlugin",
    "FilterPlugin",
    "FragmentationTerm",
    "Gang",
    "GangDomainsTerm",
    "GroupCap",
    "LoadBalanceTerm",
    "Node",
    "NodesUsedTerm",
    "ObjectiveTerm",
    "PluginFactory",
    "Pod",
    "RunContext",
    "ScorePlugin",
    "Snapshot",
    "all_true",
]
