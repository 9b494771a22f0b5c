"""What preemption reads: preemption policies (pod, PriorityClass), nominatedNodeName, and
PodDisruptionBudgets read like every other object, by API group and kind."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.disruption import protects, selects
from kubeplace.kube.errors import InputError
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.parse import build_snapshot, parse_pod
from tests.builders import node, pod, snapshot_of


def budget(name: str = "web", allowed: Any = 1, selector: Any = None, **status: Any) -> dict[str, Any]:
    spec = {"selector": {"matchLabels": {"app": "web"}} if selector is None else selector}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec,
            "status": {"disruptionsAllowed": allowed, **status}}


def test_preemption_policy_from_the_pod_then_its_priority_class() -> None:
    klass = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch"},
             "value": 7, "preemptionPolicy": "Never"}
    stored = pod("b").spec("priorityClassName", "batch").spec("preemptionPolicy", "PreemptLowerPriority").manifest()
    stored["metadata"]["resourceVersion"] = "3"  # as stored: the pod's own, whatever the class says now
    snapshot = snapshot_of(node("n1").cpu(1), klass, pod("a").spec("priorityClassName", "batch"), stored, pod("c"))
    policies = {p.name: (p.priority, p.preemption_policy) for p in snapshot.pending}
    assert policies == {"a": (7, "Never"), "b": (7, "PreemptLowerPriority"), "c": (0, "PreemptLowerPriority")}


@pytest.mark.parametrize("where", ["pod", "class"])
def test_an_unknown_preemption_policy_is_refused(where: str) -> None:
    klass = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch"}, "value": 7,
             **({"preemptionPolicy": "Sometimes"} if where == "class" else {})}
    b = pod("a").spec("priorityClassName", "batch")
    if where == "pod":
        b = b.spec("preemptionPolicy", "Sometimes")
    with pytest.raises(InputError, match=r"unknown preemption policy 'Sometimes'.*PreemptLowerPriority or Never"):
        snapshot_of(node("n1").cpu(1), klass, b)


def test_nominated_node_name() -> None:
    manifest = pod("a").manifest()
    manifest["status"]["nominatedNodeName"] = "n7"
    assert parse_pod(manifest).nominated_node == "n7"


def test_disruption_budgets_are_read_by_group_and_kind() -> None:
    other = {**budget("fake"), "apiVersion": "example.com/v1"}
    snapshot = snapshot_of(node("n1").cpu(1), budget(disruptedPods={"w-1": "2024-01-01T00:00:00Z"}), other)
    (read,) = snapshot.disruption_budgets
    assert (read.key, read.allowed, read.disrupted) == ("default/web", 1, frozenset({"w-1"}))
    assert snapshot.skipped_kinds == {"PodDisruptionBudget.example.com": 1}
    web = pod("w-2").label("app", "web").build()
    assert protects(read, web) and selects(read, pod("w-1").label("app", "web").build())
    assert not protects(read, pod("w-1").label("app", "web").build())  # already counted as disrupted
    assert not selects(read, pod("x").label("app", "db").build())


def test_a_present_empty_selector_selects_every_pod_of_the_namespace_a_missing_one_none() -> None:
    everyone = build_snapshot([(budget(selector={}), "f")]).disruption_budgets[0]
    nobody = {**budget(), "spec": {}}
    assert selects(everyone, pod("x").build())
    assert not selects(build_snapshot([(nobody, "f")]).disruption_budgets[0], pod("x").build())


@pytest.mark.parametrize("allowed", [-1, "1", True])
def test_a_bad_disruptions_allowed_names_the_file_and_field(allowed: Any) -> None:
    with pytest.raises(InputError) as caught:
        build_snapshot([(budget(allowed=allowed), "cluster.yaml")])
    assert "cluster.yaml" in str(caught.value) and "PodDisruptionBudget web" in str(caught.value)
    assert "status.disruptionsAllowed" in str(caught.value)


def test_a_budget_with_both_min_available_and_max_unavailable_is_refused() -> None:
    """The API server's ValidatePodDisruptionBudgetSpec refuses it; it was read, the budget's
    status used as if one of them held."""
    both = budget()
    both["spec"] |= {"minAvailable": 1, "maxUnavailable": "50%"}
    with pytest.raises(InputError) as caught:
        build_snapshot([(both, "cluster.yaml")])
    assert str(caught.value) == ("cluster.yaml: PodDisruptionBudget web: spec: minAvailable and maxUnavailable cannot "
                                 "be both set (expected at most one of them, as the API server validates it)")
    assert build_snapshot([({**both, "spec": {**both["spec"], "maxUnavailable": None}}, "f")]).disruption_budgets


@pytest.mark.parametrize(("expression", "field", "words"), [
    ({"key": "app", "operator": "In", "values": []}, "values", "In without values"),
    ({"key": "app", "operator": "Exists", "values": ["web"]}, "values", "Exists with values"),
    ({"key": "", "operator": "Exists"}, "key", "missing key"),
    ({"key": "app", "operator": "Gt", "values": ["1"]}, "operator", "unknown operator 'Gt'"),
])
def test_a_budget_selector_is_validated_as_the_api_server_does(expression: dict[str, Any], field: str,
                                                                words: str) -> None:
    """One label selector parser for budgets and every other selector (kube.selectors)."""
    with pytest.raises(InputError, match=words) as caught:
        build_snapshot([(budget(selector={"matchExpressions": [expression]}), "cluster.yaml")])
    assert f"spec.selector.matchExpressions[0].{field}" in str(caught.value)


class Reader:
    description = "fake"

    def list_nodes(self) -> list[dict[str, Any]]:
        return [node("n1").cpu(1).manifest()]

    def list_pods(self, namespace: str | None = None, label_selector: str | None = None,
                  field_selector: str | None = None) -> list[dict[str, Any]]:
        return []

    def list_namespaces(self) -> list[dict[str, Any]]:
        return []

    def list_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        return []

    def list_persistent_volume_claims(self) -> list[dict[str, Any]]:
        return []

    def list_persistent_volumes(self) -> list[dict[str, Any]]:
        return []

    def list_metrics(self, plural: str) -> list[dict[str, Any]]:
        return []

    def list_pod_disruption_budgets(self) -> list[dict[str, Any]]:
        return [budget()]

    def list_controllers(self) -> list[dict[str, Any]]:
        return []


def test_live_snapshots_list_budgets_only_when_asked() -> None:
    assert load_live_snapshot(Reader()).disruption_budgets == ()
    assert [b.name for b in load_live_snapshot(Reader(), disruption_budgets=True).disruption_budgets] == ["web"]
