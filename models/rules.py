"""A rule in one folder: the descriptor each in-tree rule exports as ``RULE`` from
``models/plugins/<rule>/__init__.py``, and that the registry (``models.plugins.RULES``) lists.

A rule is what the kube-scheduler keeps in ``pkg/scheduler/framework/plugins/<name>/``: the plugin
(filter, score, constraint) and its typed args, plus what kubeplace needs beside the model:

- its **independent verifier check** (:class:`Verifier`), written in the rule's ``verify.py``
  against ``kubeplace.kube`` only, so that a bug in the vectorised plugin is caught by it: a
  check per (pod, node) pair, a stateful check per node (the pod against the pods already there,
  as NodePorts), a check in the plan's replay pod by pod (``kube.replay``: the rules that depend
  on where other pods run in their domains, PodTopologySpread and InterPodAffinity), or a check of
  the whole plan;
- its **per-pod check for the kube-scheduler emulation** when the rule is stateful (it depends
  on the pods already placed: ``solver.emulate`` calls them for each pod it schedules, in filter
  order, on ``models.emulated_pods``);
- its **place in the kube-scheduler's filter order** (``plan.explain`` counts a node under the
  first filter that rejects it, in that order). The explanation text is the plugin's ``reason``.

``plan.verify`` walks the plan, checks capacity and gangs, and runs every enabled rule's verifier;
a FILTER or CONSTRAINT rule without one is refused by tests/models/test_rules.py. Imports only
``kube``, the plugin framework and the emulation's pods: the plan layer and the emulation read
these descriptors, the model never does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.kube.plan_view import Finding, PlanView
from kubeplace.kube.replay import ReplayCheck
from kubeplace.models.emulated_pods import EmulatedPods
from kubeplace.models.framework import CONSTRAINT, FILTER, PluginFactory, RunContext
from kubeplace.models.problem import BoolArray

PairCheck = Callable[[Pod, Node, Snapshot, Any], Iterable[str]]
"""(pod, node, snapshot, the rule's args) -> why the rule refuses the pod on the node (one
detail per problem, nothing when it admits it). Args are the profile's for the rule, or the
rule's default args; None for a rule without args."""
NodeCheck = Callable[[Pod, int, Node, Sequence[Pod]], Iterable[str]]
"""(pod, copies of it placed at once, node, the pods already there: bound, placed before it in
the plan, and nominated to the node with its priority or more) -> why the node refuses it."""
PlanCheck = Callable[[PlanView, Any], Iterable[Finding]]
"""(the plan, the rule's args) -> (namespace, name, node, detail) per violation found over the
plan."""
EmulationCheck = Callable[[Pod, EmulatedPods], BoolArray]
"""(pod, the pods of each node as the kube-scheduler emulation sees them: bound and placed so
far, indexed by label class and term, and those nominated) -> the nodes the rule admits the pod
on."""


@dataclass(frozen=True)
class Verifier:
    """A rule's independent check, at the scope it needs (one or more of them)."""

    pair: PairCheck | None = None
    node: NodeCheck | None = None
    plan: PlanCheck | None = None
    replay: ReplayCheck | None = None
    """Checked in the plan's replay pod by pod, in the kube-scheduler's filter order (the
    registry's order)."""

    def __post_init__(self) -> None:
        if self.pair is None and self.node is None and self.plan is None and self.replay is None:
            raise ValueError("a Verifier needs a pair, node or plan check, or a replay check")


@dataclass(frozen=True)
class InTreeRule:
    """One in-tree rule: its plugin factory and everything beside the model that belongs to it."""

    factory: PluginFactory
    verify: Verifier | None = None
    emulate: EmulationCheck | None = None
    filter_order: int | None = None
    """Its position among the kube-scheduler's default filters (apis/config/v1
    default_plugins.go; ``plan.explain.SCHEDULER_FILTERS``); None for a kubeplace rule, which
    counts after them in the profile's order."""
    verified_always: bool = False
    """The verifier checks it even where the profile disables the plugin: the node-level rules a
    bound pod must keep whatever the profile (the kubelet's admission refuses a pod against its
    node affinity, host ports or NoExecute taints; a cordon is the cluster owner's)."""
    default: bool = True
    """Enabled in every profile (``DEFAULT_PLUGINS``); the objectives' scores are not."""

    @property
    def name(self) -> str:
        return self.factory.name

    @property
    def needs_verifier(self) -> bool:
        """A FILTER or CONSTRAINT rule refuses placements: the verifier must check it."""
        return any(point in (FILTER, CONSTRAINT) for point in self.factory.points)


def rule(name: str, points: str | tuple[str, ...], args: type[Any] | None,
         build: Callable[[Any, RunContext], Any], **fields: Any) -> InTreeRule:
    """``InTreeRule(PluginFactory(name, points, args, build), **fields)``."""
    return InTreeRule(PluginFactory(name, points, args, build), **fields)

