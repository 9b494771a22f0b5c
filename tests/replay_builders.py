"""Builders for the tests of the rules checked in the plan's replay (``kube.replay``):
PodTopologySpread and InterPodAffinity, their cases from the kube-scheduler's filtering_test.go."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubeplace.kube.objects import Pod, Snapshot
from kubeplace.models.emulated_pods import EmulatedPods
from kubeplace.models.problem import BoolArray
from kubeplace.plan.verify import replay_plan
from kubeplace.solver.emulate.node_state import Cluster
from tests.builders import NodeBuilder, PodBuilder, node

OK = None
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def outcomes(snapshot: Snapshot, name: str = "p") -> dict[str, str | None]:
    """The incoming pod placed alone on each node in turn: None, or the kube-scheduler's reason."""
    (incoming,) = [p for p in snapshot.pending if p.name == name]
    out: dict[str, str | None] = {}
    for n in snapshot.nodes:
        result = replay_plan(snapshot, [(incoming.namespace, name, n.name)])
        out[n.name] = result.violations[0].reason if result.violations else None
    return out


def n(name: str, **labels: str) -> NodeBuilder:
    built = node(name).cpu("8").memory("8Gi")
    for key, value in labels.items():
        built = built.label(key, value)
    return built


def labelled(builder: PodBuilder, **labels: str) -> PodBuilder:
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder


def term(key: str, topology: str, operator: str = "In", *values: str, **extra: Any) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"labelSelector": {"matchExpressions": [expression]}, "topologyKey": topology, **extra}


def affinity(builder: PodBuilder, *terms: dict[str, Any], anti: tuple[dict[str, Any], ...] = ()) -> PodBuilder:
    rules: dict[str, Any] = {}
    if terms:
        rules["podAffinity"] = {REQ: list(terms)}
    if anti:
        rules["podAntiAffinity"] = {REQ: list(anti)}
    return builder.spec("affinity", rules)


def anti(builder: PodBuilder, *terms: dict[str, Any]) -> PodBuilder:
    return affinity(builder, anti=terms)


def names(order: tuple[tuple[str, str, str], ...]) -> list[str]:
    return [name for _, name, _ in order]


def emulated(snapshot: Snapshot, admits: Callable[[Pod, EmulatedPods], BoolArray], name: str = "p") -> dict[str, bool]:
    """Per node, whether a rule's emulation check admits the incoming pod on the bound pods."""
    (incoming,) = [p for p in snapshot.pending if p.name == name]
    return dict(zip([n.name for n in snapshot.nodes], admits(incoming, Cluster(snapshot, (incoming,))).tolist(),
                    strict=True))
