"""Required pod anti-affinity terms of a pod, as typed objects.

A running pod's terms forbid its topology domain to every pod they match (placement
rules (a)); kubeplace honours that for the pods it places. A term with a namespace
selector that is not empty is read as matching every namespace: stricter, never looser.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeplace.kube.errors import InputError, expect_list, expect_mapping, expect_str
from kubeplace.kube.objects import PodAffinityTerm, Requirement

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def anti_affinity_terms(spec: Mapping[str, Any]) -> tuple[PodAffinityTerm, ...]:
    affinity = expect_mapping(spec.get("affinity"), "spec.affinity")
    rules = expect_mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    field = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    terms = []
    for i, raw in enumerate(expect_list(rules.get("requiredDuringSchedulingIgnoredDuringExecution"), field)):
        term = expect_mapping(raw, f"{field}[{i}]")
        selector = term.get("labelSelector")
        if selector is None:
            continue  # a null selector matches no pod
        namespace_selector = term.get("namespaceSelector")
        terms.append(PodAffinityTerm(
            selector=_requirements(expect_mapping(selector, f"{field}[{i}].labelSelector"), f"{field}[{i}]"),
            namespaces=tuple(str(n) for n in expect_list(term.get("namespaces"), f"{field}[{i}].namespaces")),
            all_namespaces=namespace_selector is not None,
            topology_key=expect_str(term.get("topologyKey"), f"{field}[{i}].topologyKey"),
        ))
    return tuple(terms)


def _requirements(selector: Mapping[str, Any], field: str) -> tuple[Requirement, ...]:
    out = [Requirement(str(k), "In", (str(v),)) for k, v in
           expect_mapping(selector.get("matchLabels"), f"{field}.labelSelector.matchLabels").items()]
    for j, raw in enumerate(expect_list(selector.get("matchExpressions"), f"{field}.labelSelector.matchExpressions")):
        expr = expect_mapping(raw, f"{field}.labelSelector.matchExpressions[{j}]")
        operator = str(expr.get("operator", ""))
        if operator not in SELECTOR_OPERATORS:
            raise InputError(f"unknown operator {operator!r}", field=f"{field}.labelSelector.matchExpressions[{j}]",
                             expected=", ".join(SELECTOR_OPERATORS))
        out.append(Requirement(str(expr.get("key", "")), operator, tuple(str(v) for v in expr.get("values") or ())))
    return tuple(out)
