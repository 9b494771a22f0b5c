"""NodeAffinity's independent verifier check: the pod's nodeSelector and required node affinity
terms against the node (``nodeaffinity`` Filter, component-helpers ``GetRequiredNodeAffinity``),
and the requirement and node selector term matching the other checks share (volumes' node
affinity, DRA's device node selectors, spread eligibility) and the label selectors of pods,
volumes and namespaces. Imports only ``kubeplace.kube``."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

from kubeplace.kube.objects import Node, Pod, Requirement, Snapshot

_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.ParseInt accepts in base 10


def requirement_holds(requirement: Requirement, value: str | None) -> bool:
    """One requirement against one label value (None: the label is missing)."""
    operator, values = requirement.operator, requirement.values
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        if not _INTEGER.fullmatch(value) or not _INTEGER.fullmatch(values[0]):
            return False
        return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
    return False  # unknown operator: never matches


def selector_matches(selector: Sequence[Requirement] | None, labels: Mapping[str, str]) -> bool:
    """A label selector (of pods, volumes, namespaces): None (null) matches nothing, an empty one
    everything; its requirements hold as node selector requirements do."""
    return selector is not None and all(requirement_holds(r, labels.get(r.key)) for r in selector)


def node_term_matches(expressions: Sequence[Requirement], fields: Sequence[Requirement], node: Node) -> bool:
    """A node selector term; an empty one matches nothing."""
    if not expressions and not fields:
        return False
    for requirement in expressions:
        if not requirement_holds(requirement, node.labels.get(requirement.key)):
            return False
    for requirement in fields:
        if requirement.key != "metadata.name" or requirement.operator not in ("In", "NotIn"):
            return False
        if not requirement_holds(requirement, node.name):
            return False
    return True


def node_affinity_matches(pod: Pod, node: Node) -> bool:
    """``GetRequiredNodeAffinity(pod).Match(node)``: nodeSelector and required terms."""
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    return pod.required_terms is None or any(
        node_term_matches(term.match_expressions, term.match_fields, node) for term in pod.required_terms
    )




def check_pair(pod: Pod, node: Node, _snapshot: Snapshot, _args: object) -> Iterator[str]:
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            yield f"nodeSelector {key}={value}: node has {key}={node.labels.get(key)}"
    if pod.required_terms is not None and not any(
        node_term_matches(term.match_expressions, term.match_fields, node) for term in pod.required_terms
    ):
        yield "no required node affinity term matches the node"
