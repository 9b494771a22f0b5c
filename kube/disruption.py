"""PodDisruptionBudgets (``policy/v1``): which pods they protect and how many more disruptions
they allow now.

Read from files and from the cluster like every other object (``kube.parse`` dispatches on the
API group ``policy`` and the kind). Preemption counts the victims that would take a budget below
zero (the kube-scheduler's ``filterPodsWithPDBViolation``); the rebalancer keeps its moves within
them. A pod listed in ``status.disruptedPods`` is already counted and does not count again. A
selector that is present but empty selects every pod of the namespace, as in ``policy/v1``
(the kube-scheduler skips such budgets, the Eviction API does not: kubeplace is the stricter).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeplace.kube.errors import InputError, expect_list, expect_mapping, expect_str
from kubeplace.kube.objects import DisruptionBudget, Pod, Requirement
from kubeplace.kube.selectors import matches

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def parse_disruption_budget(obj: Mapping[str, Any]) -> DisruptionBudget:
    """One PodDisruptionBudget; InputError naming the field (the caller adds file and object)."""
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    spec = expect_mapping(obj.get("spec"), "spec")
    status = expect_mapping(obj.get("status"), "status")
    allowed = status.get("disruptionsAllowed", 0)
    if isinstance(allowed, bool) or not isinstance(allowed, int) or allowed < 0:
        raise InputError(f"{allowed!r} is not a count", field="status.disruptionsAllowed",
                         expected="a non-negative integer")
    raw_selector = spec.get("selector")
    selector = None if raw_selector is None else _label_selector(expect_mapping(raw_selector, "spec.selector"))
    disrupted = frozenset(str(k) for k in expect_mapping(status.get("disruptedPods"), "status.disruptedPods"))
    return DisruptionBudget(expect_str(metadata.get("namespace"), "metadata.namespace") or "default",
                            expect_str(metadata.get("name"), "metadata.name"), selector, allowed, disrupted)


def selects(budget: DisruptionBudget, pod: Pod) -> bool:
    """The budget's selector matches the pod in its namespace."""
    return budget.selector is not None and pod.namespace == budget.namespace and matches(budget.selector, pod.labels)


def protects(budget: DisruptionBudget, pod: Pod) -> bool:
    """Disrupting ``pod`` would use one of the budget's allowed disruptions."""
    return selects(budget, pod) and pod.name not in budget.disrupted


def _label_selector(raw: Mapping[str, Any]) -> tuple[Requirement, ...]:
    out = [Requirement(str(k), "In", (expect_str(v, f"spec.selector.matchLabels.{k}"),))
           for k, v in expect_mapping(raw.get("matchLabels"), "spec.selector.matchLabels").items()]
    for index, item in enumerate(expect_list(raw.get("matchExpressions"), "spec.selector.matchExpressions")):
        where = f"spec.selector.matchExpressions[{index}]"
        expression = expect_mapping(item, where)
        operator = expect_str(expression.get("operator"), f"{where}.operator")
        if operator not in SELECTOR_OPERATORS:
            raise InputError(f"unknown operator {operator!r}", field=f"{where}.operator",
                             expected="In, NotIn, Exists or DoesNotExist")
        values = tuple(expect_str(v, f"{where}.values") for v in expect_list(expression.get("values"), where))
        out.append(Requirement(expect_str(expression.get("key"), f"{where}.key"), operator, values))
    return tuple(out)
