"""models/plugins/node_affinity/: the filter and the independent verifier check agree on
nodeSelector and required node affinity terms (every operator, matchFields), and a plan against
them is refused."""

from __future__ import annotations

import pytest

from kubeplace.kube.objects import Node, Pod, Requirement, SelectorTerm, Snapshot
from kubeplace.models.framework import RunContext
from kubeplace.models.plugins import node_affinity
from kubeplace.models.plugins.node_affinity import verify
from kubeplace.plan.verify import verify as verify_plan

NODES = [Node("a", labels={"zone": "z1", "gen": "3"}), Node("b", labels={"zone": "z2", "gen": "10"}),
         Node("c", labels={"zone": "z1"}), Node("d")]
CASES: list[tuple[dict[str, str], tuple[SelectorTerm, ...] | None]] = [
    ({}, None), ({"zone": "z1"}, None), ({"zone": "z9"}, None),
    ({}, (SelectorTerm((Requirement("zone", "In", ("z1", "z2")),)),)),
    ({}, (SelectorTerm((Requirement("zone", "NotIn", ("z1",)),)),)),
    ({}, (SelectorTerm((Requirement("gen", "Exists"),)), SelectorTerm((Requirement("zone", "DoesNotExist"),)))),
    ({}, (SelectorTerm((Requirement("gen", "Gt", ("5",)),)),)),
    ({}, (SelectorTerm((Requirement("gen", "Lt", ("5",)),)),)),
    ({}, (SelectorTerm((), (Requirement("metadata.name", "In", ("b", "d")),)),)),
    ({"zone": "z1"}, (SelectorTerm((Requirement("gen", "Exists"),)),)),
    ({}, (SelectorTerm(),)), ({}, ()),
]


@pytest.mark.parametrize(("selector", "terms"), CASES)
def test_the_filter_and_the_verifier_check_agree(selector: dict[str, str],
                                                 terms: tuple[SelectorTerm, ...] | None) -> None:
    pod = Pod("default", "p", node_selector=selector, required_terms=terms)
    plugin = node_affinity.build(None, RunContext(Snapshot(tuple(NODES), (pod,), ())))
    admitted = plugin.filter(pod, NODES).tolist()
    assert admitted == [not list(verify.check_pair(pod, n, Snapshot((), (), ()), None)) for n in NODES]


def test_a_plan_against_the_node_selector_is_refused_by_the_rules_check() -> None:
    node = Node("n1", labels={"zone": "z2"}, allocatable={"cpu": 1000, "pods": 10})
    snapshot = Snapshot(nodes=(node,), pending=(Pod("default", "p", node_selector={"zone": "z1"}),), bound=())
    [violation] = verify_plan(snapshot, [("default", "p", "n1")])
    assert (violation.rule, violation.detail) == ("NodeAffinity", "nodeSelector zone=z1: node has zone=z2")
