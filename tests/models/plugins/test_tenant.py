"""models/plugins/tenant/: the namespace is the boundary; a pod's own tenant label counts only where
trusted. The filter and the independent verifier check agree."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.models.config import ConfigError, Configuration, SolverSettings
from kubeplace.models.config_load import parse_configuration
from kubeplace.models.framework import RunContext
from kubeplace.models.plugins import tenant
from kubeplace.models.plugins.tenant import TenantArgs, verify
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Plan
from tests.builders import namespace, node, pod, snapshot_of


def config(**args: Any) -> Configuration:
    return parse_configuration({
        "apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementConfiguration",
        "profiles": [{"schedulerName": "kubeplace", "pluginConfig": [{"name": "Tenant", "args": args}]}],
    })  # fmt: skip


def plan_of(*objects: Any, **args: Any) -> Plan:
    snap = snapshot_of(*objects)
    conf = config(**args)
    plan = make_plan(snap, conf, conf.profiles[0], SolverSettings(backend="cpsat", time_limit=5, workers=1)).plan
    assert verify_plan(snap, plan.placements, conf, conf.profiles[0]) == []
    return plan


def where(plan: Plan) -> dict[str, str]:
    return {p.name: p.node for p in plan.placements}


@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize("claim", ["label", "annotation"])
def test_a_pod_in_a_tenants_namespace_cannot_claim_another_tenant(trusted: bool, claim: str) -> None:
    claimer = pod("claimer", ns="team-a").cpu("1")
    claimer = claimer.label("tenant", "b") if claim == "label" else claimer.annotation("tenant", "b")
    plan = plan_of(namespace("team-a").label("tenant", "a"),
                   node("a-node").cpu("2").memory("4Gi").label("tenant", "a"),
                   node("b-node").cpu("64").memory("256Gi").label("tenant", "b"),
                   claimer, **({"trustPodTenant": True} if trusted else {}))
    assert where(plan) == {"claimer": "a-node"}  # never b's (emptier) node


def test_an_untenanted_namespace_gives_a_labelled_pod_no_tenant() -> None:
    plan = plan_of(node("a-node").cpu("4").memory("4Gi").label("tenant", "a"),
                   pod("claimer").cpu("1").label("tenant", "a"))
    assert where(plan) == {}
    assert plan.unplaced[0].reasons and "another tenant" in plan.unplaced[0].reasons[0]


def test_a_trusted_pod_label_names_the_tenant_in_an_untenanted_namespace() -> None:
    plan = plan_of(node("a-node").cpu("4").memory("4Gi").label("tenant", "a"),
                   pod("claimer").cpu("1").label("tenant", "a"), trustPodTenant=True)
    assert where(plan) == {"claimer": "a-node"}


def test_trusting_pod_tenants_beside_namespace_is_tenant_is_refused() -> None:
    with pytest.raises(ConfigError, match="trustPodTenant: has no effect with namespaceIsTenant"):
        config(trustPodTenant=True, namespaceIsTenant=True)


TENANT_NODES = [Node("shared"), Node("a", labels={"tenant": "a"}), Node("b", labels={"tenant": "b"})]
TENANT_PODS = [Pod("plain", "p"), Pod("team-a", "p"), Pod("plain", "p", labels={"tenant": "a"}),
               Pod("team-a", "p", annotations={"tenant": "b"}), Pod("a", "p")]


@pytest.mark.parametrize("args", [TenantArgs(), TenantArgs(trustPodTenant=True), TenantArgs(namespaceIsTenant=True),
                                  TenantArgs(untenantedNodes="closed", trustPodTenant=True)])
@pytest.mark.parametrize("one", TENANT_PODS, ids=lambda p: f"{p.namespace}-{dict(p.labels)}-{dict(p.annotations)}")
def test_the_filter_and_the_verifier_check_agree(args: TenantArgs, one: Pod) -> None:
    snapshot = Snapshot(tuple(TENANT_NODES), (one,), (), namespace_labels={"team-a": {"tenant": "a"}})
    admitted = tenant.build(args, RunContext(snapshot)).filter(one, TENANT_NODES).tolist()
    assert admitted == [not list(verify.check_pair(one, n, snapshot, args)) for n in TENANT_NODES]
