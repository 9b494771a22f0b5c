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

from kubeplace.kube.errors import InputError, expect_mapping, expect_namespace, expect_str
from kubeplace.kube.objects import DisruptionBudget, Pod
from kubeplace.kube.selectors import label_selector, matches


def parse_disruption_budget(obj: Mapping[str, Any]) -> DisruptionBudget:
    """One PodDisruptionBudget; InputError naming the field (the caller adds file and object)."""
    metadata = expect_mapping(obj.get("metadata"), "metadata")
    spec = expect_mapping(obj.get("spec"), "spec")
    status = expect_mapping(obj.get("status"), "status")
    allowed = status.get("disruptionsAllowed", 0)
    if isinstance(allowed, bool) or not isinstance(allowed, int) or allowed < 0:
        raise InputError(f"{allowed!r} is not a count", field="status.disruptionsAllowed",
                         expected="a non-negative integer")
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        raise InputError("minAvailable and maxUnavailable cannot be both set", field="spec",
                         expected="at most one of them, as the API server validates it")
    selector = label_selector(spec.get("selector"), "spec.selector")
    disrupted = frozenset(str(k) for k in expect_mapping(status.get("disruptedPods"), "status.disruptedPods"))
    return DisruptionBudget(expect_namespace(metadata),
                            expect_str(metadata.get("name"), "metadata.name"), selector, allowed, disrupted)


def selects(budget: DisruptionBudget, pod: Pod) -> bool:
    """The budget's selector matches the pod in its namespace."""
    return budget.selector is not None and pod.namespace == budget.namespace and matches(budget.selector, pod.labels)


def protects(budget: DisruptionBudget, pod: Pod) -> bool:
    """Disrupting ``pod`` would use one of the budget's allowed disruptions."""
    return selects(budget, pod) and pod.name not in budget.disrupted
