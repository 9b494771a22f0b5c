"""InterPodAffinity: running pods' required anti-affinity, and the rules between pending pods."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.framework import RunContext
from kubeplace.models.plugins import inter_pod_affinity
from kubeplace.models.plugins.inter_pod_affinity import InterPodAffinityArgs
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.verify import verify
from tests.builders import namespace, node, pod, snapshot_of


def anti(selector: dict[str, str], key: str = "kubernetes.io/hostname", **extra: Any) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": selector}, "topologyKey": key, **extra}]}}


def cluster(*extra: Any) -> Any:
    return snapshot_of(
        node("a1").cpu("8").memory("8Gi").label("zone", "a"), node("a2").cpu("8").memory("8Gi").label("zone", "a"),
        node("b1").cpu("1").memory("8Gi").label("zone", "b"),
        pod("db-0", "data").scheduler("x").cpu("1").label("app", "db").spec("affinity", anti({"app": "web"}, "zone"))
        .on("a1"),
        *extra)


@pytest.mark.parametrize("backend", ["cpsat", "cbc"])
def test_running_pods_anti_affinity_forbids_its_zone(backend: str) -> None:
    # web pods in namespace data must stay out of zone a; zone b has room for one
    snap = cluster(pod("w0", "data").cpu("1").label("app", "web"), pod("w1", "data").cpu("1").label("app", "web"),
                   pod("other", "data").cpu("1").label("app", "cache"))
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(backend=backend, time_limit=5, workers=1)).plan
    where = {p.name: p.node for p in plan.placements}
    assert where["other"] in {"a1", "a2", "b1"}
    web = {n: where[n] for n in ("w0", "w1") if n in where}
    assert list(web.values()) == ["b1"]  # one fits in zone b, the other waits
    reasons = next(u.reasons[0] for u in plan.unplaced)
    assert "node(s) didn't satisfy existing pods anti-affinity rules" in reasons
    assert verify(snap, [(p.namespace, p.name, p.node) for p in plan.placements]) == []


def test_namespace_scope_of_the_term() -> None:
    snap = cluster(pod("w", "elsewhere").cpu("1").label("app", "web"))  # term scoped to namespace data
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1)).plan
    assert plan.placements[0].node in {"a1", "a2"} or plan.placements[0].node == "b1"
    assert verify(snap, [("elsewhere", "w", "a2")]) == []


def test_verifier_catches_a_placement_in_the_forbidden_domain() -> None:
    snap = cluster(pod("w", "data").cpu("1").label("app", "web"))
    (violation,) = verify(snap, [("data", "w", "a2")])
    assert violation.rule == "InterPodAffinity" and "data/db-0" in violation.detail
    assert violation.detail.startswith("node(s) didn't satisfy existing pods anti-affinity rules")


def test_namespace_selector_is_evaluated_against_the_namespace_labels() -> None:
    # db-0's term reaches web pods in namespaces labelled team=a only (not every namespace)
    term = anti({"app": "web"}, "zone", namespaceSelector={"matchLabels": {"team": "a"}})
    snap = snapshot_of(
        namespace("ours").label("team", "a"), namespace("theirs").label("team", "b"),
        node("a1").cpu("8").memory("8Gi").label("zone", "a"), node("b1").cpu("8").memory("8Gi").label("zone", "b"),
        pod("db-0", "data").scheduler("x").label("app", "db").spec("affinity", term).on("a1"),
        pod("w", "ours").label("app", "web"), pod("v", "theirs").label("app", "web"),
    )
    _, _, filter_plugin, _, _ = inter_pod_affinity.build(InterPodAffinityArgs(), RunContext(snap))
    allowed = {p.name: filter_plugin.filter(p, snap.nodes).tolist() for p in snap.pending}
    assert allowed == {"w": [False, True], "v": [True, True]}
    assert verify(snap, [("theirs", "v", "a1")]) == []
    (violation,) = verify(snap, [("ours", "w", "a1")])
    assert "data/db-0" in violation.detail
