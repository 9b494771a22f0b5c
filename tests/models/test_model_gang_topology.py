"""Gang topology: all of a gang's pods in one domain (value of a node label)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.gangs import PREFERRED_TOPOLOGY_KEY, TOPOLOGY_KEY, parse_pod_group
from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.evaluate import gang_domains, mean_utilisation
from kubeplace.models.formulation.placement import Neighbourhood, objective_model
from kubeplace.models.framework import GangDomainsTerm
from kubeplace.models.problem import Assignment
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Plan
from kubeplace.plan.verify import verify
from kubeplace.solver.backends import get_backend
from kubeplace.solver.budget import Budget
from kubeplace.solver.greedy import BEST_FIT, FRAG_GREEDY, SPREAD, greedy
from kubeplace.solver.split import subproblem
from tests.builders import NodeBuilder, PodBuilder, node, pod, snapshot_of

ZONE = "topology.kubernetes.io/zone"


def group(name: str, min_member: int, key: str | None = ZONE) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if key is not None:
        meta["annotations"] = {TOPOLOGY_KEY: key}
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta,
            "spec": {"minMember": min_member}}


def member(name: str, gang: str = "job", cpu: str = "2") -> PodBuilder:
    return pod(name).cpu(cpu).label("scheduling.x-k8s.io/pod-group", gang)


def zoned(name: str, zone: str | None, cpu: str) -> NodeBuilder:
    b = node(name).cpu(cpu).memory("8Gi")
    return b.label(ZONE, zone) if zone is not None else b


def plan_of(*objects: Any, backend: str = "cpsat", full_model_pairs: int | None = None) -> Plan:
    snap = snapshot_of(*objects)
    options = SolverSettings(backend=backend, time_limit=5, workers=1)
    if full_model_pairs is not None:
        options = SolverSettings(backend=backend, time_limit=5, workers=1, full_model_pairs=full_model_pairs)
    plan = make_plan(snap, Configuration(), Profile(), options).plan
    assert verify(snap, [(p.namespace, p.name, p.node) for p in plan.placements]) == []
    return plan


def zones_of(plan: Plan, snap_nodes: dict[str, str]) -> set[str]:
    return {snap_nodes[p.node] for p in plan.placements if p.name.startswith("w")}


NODES = {"a1": "a", "b1": "b"}
TWO_ZONES = (zoned("a1", "a", "4"), zoned("b1", "b", "6"))  # room for 2 and for 3 members of 2 cpu


@pytest.mark.parametrize(("backend", "pairs"), [("cpsat", None), ("cbc", None), ("cpsat", 0)])
def test_gang_goes_whole_to_the_zone_that_holds_it(backend: str, pairs: int | None) -> None:
    plan = plan_of(*TWO_ZONES, group("job", 3), *[member(f"w{i}") for i in range(3)],
                   backend=backend, full_model_pairs=pairs)
    assert len(plan.placements) == 3 and plan.gangs[0].placed
    assert zones_of(plan, NODES) == {"b"}


def test_without_the_key_the_balanced_plan_splits_the_gang() -> None:
    plan = plan_of(*TWO_ZONES, group("job", 3, key=None), *[member(f"w{i}") for i in range(3)])
    assert len(plan.placements) == 3 and zones_of(plan, NODES) == {"a", "b"}


def test_gang_that_fits_only_across_zones_is_not_placed() -> None:
    nodes = (zoned("a1", "a", "4"), zoned("b1", "b", "4"))
    members = [member(f"w{i}") for i in range(3)]
    assert len(plan_of(*nodes, group("job", 3, key=None), *members).placements) == 3  # the key is what stops it
    plan = plan_of(*nodes, group("job", 3), *members, pod("solo").cpu("1"))
    assert {p.name for p in plan.placements} == {"solo"}
    (gang,) = plan.gangs
    assert not gang.placed and f"within one {ZONE} domain" in gang.reason


def test_nodes_without_the_label_are_not_eligible() -> None:
    plan = plan_of(zoned("big", None, "64"), zoned("a1", "a", "4"), group("job", 3),
                   *[member(f"w{i}") for i in range(3)])
    assert plan.placements == () and not plan.gangs[0].placed  # the 64-cpu node has no zone
    plan = plan_of(zoned("big", None, "64"), zoned("a1", "a", "6"), group("job", 3),
                   *[member(f"w{i}") for i in range(3)])
    assert {p.node for p in plan.placements} == {"a1"}


def test_running_members_choose_the_zone() -> None:
    nodes = (zoned("a1", "a", "6"), zoned("b1", "b", "16"))
    plan = plan_of(*nodes, group("job", 3), member("r0").on("a1"), member("w1"), member("w2"))
    assert {p.node for p in plan.placements} == {"a1"} and plan.gangs[0].placed
    plan = plan_of(*nodes, group("job", 4), member("r0").on("a1"), *[member(f"w{i}") for i in range(1, 4)])
    assert plan.placements == () and not plan.gangs[0].placed  # zone a has room for 2 more only


def test_plain_gang_with_the_annotation_on_its_pods() -> None:
    def plain(name: str) -> PodBuilder:
        return (pod(name).cpu("2").label("kubeplace.io/gang", "g").annotation("kubeplace.io/gang-min-member", "3")
                .annotation(TOPOLOGY_KEY, ZONE))
    snap = snapshot_of(*TWO_ZONES, *[plain(f"w{i}") for i in range(3)])
    assert snap.pod_groups[0].topology_key == ZONE
    plan = plan_of(*TWO_ZONES, *[plain(f"w{i}") for i in range(3)])
    assert zones_of(plan, NODES) == {"b"}


@pytest.mark.parametrize("policy", [BEST_FIT, SPREAD, FRAG_GREEDY])
def test_greedy_tries_each_domain(policy: str) -> None:
    snap = snapshot_of(*TWO_ZONES, group("job", 3), *[member(f"w{i}") for i in range(3)])
    problem = aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem
    a = greedy(problem, policy)
    assert int(a.counts.sum()) == 3 and {problem.node_names[i] for i in a.node} == {"b1"}


def test_subproblem_keeps_the_domains() -> None:
    snap = snapshot_of(*TWO_ZONES, zoned("c1", "c", "2"), group("job", 3), *[member(f"w{i}") for i in range(3)])
    problem = aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem
    sub = subproblem(problem, np.arange(problem.n_classes), np.array([1, 2]))
    (gang,) = sub.gangs
    assert gang.topology_key == ZONE and gang.domain is not None and gang.domain.tolist() == [1, 2]


def test_annotation_on_a_podgroup_is_parsed() -> None:
    assert parse_pod_group(group("job", 2, key="rack"), "f.yaml").topology_key == "rack"
    assert parse_pod_group(group("job", 2, key=None), "f.yaml").topology_key == ""


def test_empty_annotation_is_a_clear_error() -> None:
    with pytest.raises(InputError, match=rf"metadata.annotations.{TOPOLOGY_KEY}: got ' '"):
        parse_pod_group(group("job", 2, key=" "), "f.yaml")
    bad = pod("w").label("kubeplace.io/gang", "g").annotation(TOPOLOGY_KEY, "")
    with pytest.raises(InputError, match=TOPOLOGY_KEY):
        snapshot_of(node("n").cpu("1"), bad)


def test_running_members_in_two_zones_block_the_gang() -> None:
    nodes = (zoned("a1", "a", "8"), zoned("b1", "b", "8"))
    plan = plan_of(*nodes, group("job", 3), member("r0").on("a1"), member("r1").on("b1"), member("w2"))
    assert plan.placements == () and not plan.gangs[0].placed


def preferring(name: str, min_member: int) -> dict[str, Any]:
    manifest = group(name, min_member, key=None)
    manifest["metadata"]["annotations"] = {PREFERRED_TOPOLOGY_KEY: ZONE}
    return manifest


@pytest.mark.parametrize(("backend", "pairs"), [("cpsat", None), ("cbc", None), ("cpsat", 0)])
def test_preferred_key_keeps_the_gang_in_one_zone_when_it_can(backend: str, pairs: int | None) -> None:
    # the balanced plan splits this gang (test above); the preference keeps it in zone b
    plan = plan_of(*TWO_ZONES, preferring("job", 3), *[member(f"w{i}") for i in range(3)],
                   backend=backend, full_model_pairs=pairs)
    assert len(plan.placements) == 3 and zones_of(plan, NODES) == {"b"}


def test_preferred_key_still_places_a_gang_that_needs_two_zones() -> None:
    plan = plan_of(zoned("a1", "a", "4"), zoned("b1", "b", "4"), preferring("job", 3),
                   *[member(f"w{i}") for i in range(3)])
    assert len(plan.placements) == 3 and plan.gangs[0].placed


def test_preferred_annotation_is_parsed_and_checked() -> None:
    assert parse_pod_group(preferring("job", 2), "f.yaml").preferred_topology_key == ZONE
    bad = preferring("job", 2)
    bad["metadata"]["annotations"][PREFERRED_TOPOLOGY_KEY] = ""
    with pytest.raises(InputError, match=PREFERRED_TOPOLOGY_KEY):
        parse_pod_group(bad, "f.yaml")


def test_gang_domains_are_counted_per_gang() -> None:
    snap = snapshot_of(*TWO_ZONES, zoned("x1", None, "8"), preferring("job", 3), *[member(f"w{i}") for i in range(3)])
    problem = aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem
    (gang,) = problem.gangs
    assert gang.preferred is not None and gang.preferred.tolist() == [0, 1, 2]  # the unlabelled node: a domain
    split = Assignment(np.zeros(3, np.int64), np.array([0, 1, 2]), np.ones(3, np.int64))
    assert gang_domains(problem, split) == 3
    assert gang_domains(problem, Assignment(np.zeros(1, np.int64), np.array([1]), np.array([3]))) == 1


def test_objective_model_prices_each_domain() -> None:
    snap = snapshot_of(*TWO_ZONES, preferring("job", 3), *[member(f"w{i}") for i in range(3)])
    plugins = instantiate(Configuration(), Profile(), snap)
    problem = aggregate(snap, plugins).problem
    terms = plugins.terms(problem)  # GangTopologyPreference gives the gang-domain term
    assert any(isinstance(t, GangDomainsTerm) for t in terms)
    whole = Assignment(np.zeros(1, np.int64), np.array([1]), np.array([3]))  # all in zone b
    mu = mean_utilisation(problem, whole)  # the same for every placement of the three
    for with_domains, zones in ((True, {"b1"}), (False, {"a1", "b1"})):
        used = terms if with_domains else tuple(t for t in terms if not isinstance(t, GangDomainsTerm))
        form = objective_model(problem, Neighbourhood.whole(problem), used, (int(problem.weight[0]) * 3,), mu)
        result = get_backend("cpsat").solve(form.model, SolverSettings(time_limit=5, workers=1), Budget.of(5))
        assert result.values is not None
        a = form.assignment(result.values)
        assert {problem.node_names[i] for i in a.node} == zones
