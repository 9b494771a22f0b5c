"""solver.emulate: the kube-scheduler one pod at a time, its queue, node search, filters and
scores; every placement it makes replays through the independent verifier."""

from __future__ import annotations

from itertools import permutations
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, Profile, instantiate
from kubeplace.plan.verify import replay_plan, verify
from kubeplace.solver.budget import Budget
from kubeplace.solver.emulate.scheduler import emulate, feasible_nodes_to_find, node_tree_order
from kubeplace.solver.emulate.scores import heap_top
from tests.builders import NodeBuilder, PodBuilder, namespace, node, pod, snapshot_of

ZONE = "topology.kubernetes.io/zone"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def n(name: str, cpu: str = "4", **labels: str) -> NodeBuilder:
    built = node(name).cpu(cpu).memory("16Gi")
    for key, value in labels.items():
        built = built.label(key.replace("_", "."), value)
    return built


def where(snapshot: Snapshot, **kw: Any) -> dict[str, str]:
    result = emulate(snapshot, **kw)
    assert replay_plan(snapshot, list(result.placements)).violations == ()
    assert [v for v in verify(snapshot, list(result.placements)) if v.rule != "Unmodelled"] == []
    return {name: node_name for _, name, node_name in result.placements}


def test_node_tree_order_takes_one_node_per_zone_in_turn() -> None:
    snap = snapshot_of(n("a1").label(ZONE, "a"), n("a2").label(ZONE, "a"), n("a3").label(ZONE, "a"),
                       n("b1").label(ZONE, "b"), n("c1").label(ZONE, "c"))
    assert [snap.nodes[i].name for i in node_tree_order(snap.nodes)] == ["a1", "b1", "c1", "a2", "a3"]


@pytest.mark.parametrize(("nodes", "expected"), [(50, 50), (100, 100), (1000, 420), (5000, 500), (20000, 1000)])
def test_feasible_nodes_to_find(nodes: int, expected: int) -> None:
    assert feasible_nodes_to_find(nodes) == expected


def test_queue_order_and_least_allocated_strand_a_big_pod() -> None:
    # the kube-scheduler spreads the two small pods (LeastAllocated), so the big one fits nowhere
    snap = snapshot_of(n("n1"), n("n2"), pod("a-small").cpu("1").created("2024-01-01T00:00:00Z"),
                       pod("b-small").cpu("1").created("2024-01-01T00:00:01Z"),
                       pod("c-big").cpu("4").created("2024-01-01T00:00:02Z"))
    result = emulate(snap)
    assert sorted(node_name for _, _, node_name in result.placements) == ["n1", "n2"]
    assert result.unplaced == ("default/c-big",) and result.passes == 2
    # a higher priority goes first, whatever its age: then the small ones share the other node
    snap = snapshot_of(n("n1"), n("n2"), pod("a-small").cpu("1"), pod("b-small").cpu("1"),
                       pod("c-big").cpu("4").priority(10))
    placed = where(snap)
    assert placed["a-small"] == placed["b-small"] != placed["c-big"]


def zones_and_web() -> tuple[list[NodeBuilder], list[PodBuilder]]:
    """Two zones (also racks) of three nodes; seven web replicas with a zone spread (maxSkew 1)
    and hostname anti-affinity."""
    nodes = [n(f"{z}{i}").label("zone", z).label("rack", z) for z in "ab" for i in range(3)]
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    anti = {"podAntiAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "web"}},
                                       "topologyKey": "kubernetes.io/hostname"}]}}
    return nodes, [pod(f"web-{i}").cpu("100m").label("app", "web").spec("topologySpreadConstraints", spread)
                   .spec("affinity", anti) for i in range(7)]


def test_hard_zone_spread_and_hostname_anti_affinity() -> None:
    nodes, web = zones_and_web()
    result = emulate(snapshot_of(*nodes, *web))
    placed = [node_name for _, _, node_name in result.placements]
    assert len(set(placed)) == 6 and sorted(p[0] for p in placed).count("a") == 3
    assert result.unplaced == ("default/web-6",)  # every host has a web pod


def group(name: str, size: int) -> list[PodBuilder]:
    key = "leaderworkerset.sigs.k8s.io/group-key"
    own = {"labelSelector": {"matchLabels": {key: name}}, "topologyKey": "rack"}
    other = {"labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"},
                                                    {"key": key, "operator": "NotIn", "values": [name]}]},
             "topologyKey": "rack"}
    return [pod(f"{name}-{i}").cpu("1").label(key, name)
            .spec("affinity", {"podAffinity": {REQ: [own]}, "podAntiAffinity": {REQ: [other]}}) for i in range(size)]


def test_self_affine_groups_each_take_one_rack() -> None:
    racks = [n(f"r{r}n{i}").label("rack", f"r{r}") for r in range(3) for i in range(2)]
    snap = snapshot_of(*racks, *group("g1", 4), *group("g2", 3))
    placed = where(snap)
    racks_of = {g: {placed[f"{g}-{i}"][:2] for i in range(size)} for g, size in (("g1", 4), ("g2", 3))}
    assert all(len(r) == 1 for r in racks_of.values()) and racks_of["g1"] != racks_of["g2"]


def test_a_pod_waiting_for_its_supporter_is_placed_in_a_later_pass() -> None:
    zones = [n("a1").label("zone", "a"), n("b1").label("zone", "b")]
    web = pod("a-web").cpu("1").spec("affinity", {"podAffinity": {REQ: [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}})
    db = pod("b-db").cpu("1").label("app", "db").selector("zone", "b")
    result = emulate(snapshot_of(*zones, web, db))
    assert [(name, node_name) for _, name, node_name in result.placements] == [("b-db", "b1"), ("a-web", "b1")]
    assert result.passes == 2


def test_preferences_steer_the_choice() -> None:
    nodes = [n("n1"), n("n2").label("disk", "ssd"), n("n3").taint("spot", effect="PreferNoSchedule")]
    preferred = {"nodeAffinity": {PREF: [{"weight": 50, "preference": {
        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
    # in every node order, so that no tie-break decides it
    assert all(where(snapshot_of(*order, pod("p").cpu("1").spec("affinity", preferred)))["p"] == "n2"
               for order in permutations(nodes))
    # PreferNoSchedule: n3 loses to the two untainted nodes
    assert all(where(snapshot_of(*order, pod("q").cpu("1")))["q"] != "n3" for order in permutations(nodes))
    # preferred anti-affinity away from a running pod's host
    away = {"podAntiAffinity": {PREF: [{"weight": 100, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}}]}}
    running = pod("db").cpu("100m").label("app", "db").on("n1")
    two = [n("n1", cpu="64"), n("n2")]  # n1 is the emptier node
    assert where(snapshot_of(*two, running, pod("r").cpu("1").spec("affinity", away)))["r"] == "n2"


def test_soft_spread_prefers_the_emptier_zone() -> None:
    nodes = [n("a1", cpu="64").label("zone", "a"), n("b1").label("zone", "b")]  # a1 is the emptier node
    soft = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": {"app": "web"}}}]
    running = [pod(f"old{i}").cpu("100m").label("app", "web").on("a1") for i in range(2)]
    incoming = pod("new").cpu("100m").label("app", "web").spec("topologySpreadConstraints", soft)
    assert where(snapshot_of(*nodes, *running, incoming))["new"] == "b1"


@pytest.mark.parametrize(("scores", "top"), [
    ([0, 1, 1, 1], 1), ([0, 0, 1, 1, 1, 1, 1, 1], 3), ([1, 0, 1, 1, 1, 1, 1, 1], 0),
    ([0, 0, 0, 0, 1, 1, 1, 1], 7), ([1, 0, 2, 2], 3), ([0, 0, 0, 1, 2, 0, 1, 2], 7),
    ([1, 1, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1], 3), ([0, 2, 2, 0, 0, 2, 1, 2, 2, 2, 0, 1], 1), ([2, 2, 2, 0, 2, 1], 0)])
def test_equal_scores_go_to_the_node_gos_heap_puts_on_top(scores: list[int], top: int) -> None:
    # the expected indices are what Go's container/heap gives (heap.Init, then heap.Pop, with
    # Less = the higher score), as the kube-scheduler's selectHost uses it without extenders
    assert heap_top(np.array(scores, dtype=np.int64)) == top


def test_identical_pods_on_identical_nodes_follow_the_heap_not_the_node_order() -> None:
    # after n0 and n1 took one pod each, six nodes tie: the heap picks n3, not n2
    snap = snapshot_of(*[n(f"n{i}", cpu="16") for i in range(8)],
                       *[pod(f"p{i}").cpu("1").created(f"2024-01-01T00:00:0{i}Z") for i in range(3)])
    assert where(snap) == {"p0": "n0", "p1": "n1", "p2": "n3"}
    assert where(snap) == where(snap)


def test_the_search_stops_after_enough_feasible_nodes_and_moves_on() -> None:
    # 200 nodes: 100 feasible nodes are enough; the next pod starts where the search stopped
    snap = snapshot_of(*[n(f"n{i:03d}") for i in range(200)], pod("a").cpu("1"), pod("b").cpu("1"))
    placed = where(snap)
    assert placed["a"] < "n100" and placed["b"] >= "n100"
    # a later emulation goes on from where this one stopped, as the kube-scheduler does
    first = emulate(snapshot_of(*[n(f"n{i:03d}") for i in range(200)], pod("a").cpu("1")))
    later = emulate(snapshot_of(*[n(f"n{i:03d}") for i in range(200)], pod("b").cpu("1")), start=first.next_start)
    assert first.next_start == 100 and later.placements[0][2] >= "n100"


def test_profile_filters_are_honoured() -> None:
    nodes = [n("shared"), n("owned", tenant="team-b")]
    snap = snapshot_of(*nodes, namespace("apps").label("tenant", "team-a"), pod("p", "apps").cpu("1"),
                       pod("q", "apps").cpu("1"))
    filters = instantiate(Configuration(), Profile(), snap).filters
    result = emulate(snap, filters=filters)
    assert {node_name for _, _, node_name in result.placements} == {"shared"}
    assert np.array_equal(np.array(emulate(snap, filters=filters).placements), np.array(result.placements))


def test_balanced_allocation_breaks_an_even_least_allocated() -> None:
    # n1 runs a memory-heavy pod, n2 a CPU-heavy one; LeastAllocated scores both 60 for a
    # memory-heavy pod, BalancedAllocation prefers n2, where it evens the node out
    running = [pod("mem").memory("8Gi").on("n1"), pod("cpu").cpu("2").on("n2")]
    for nodes in ([n("n1"), n("n2")], [n("n2"), n("n1")]):
        assert where(snapshot_of(*nodes, *running, pod("p").memory("4Gi")))["p"] == "n2"


def test_hard_spread_overrides_the_emptier_zone() -> None:
    nodes = [*(n(f"a{i}", cpu="8").label("zone", "a") for i in range(3)), n("b1", cpu="8").label("zone", "b")]
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    busy = pod("busy").cpu("4").on("b1")
    web = [pod(f"web-{i}").cpu("1").label("app", "web").spec("topologySpreadConstraints", spread) for i in range(4)]
    placed = where(snapshot_of(*nodes, busy, *web))
    assert sorted(v[0] for v in placed.values()) == ["a", "a", "b", "b"]


def test_anti_affinity_both_ways_overrides_the_emptier_node() -> None:
    nodes = [n("n1", cpu="64"), n("n2")]
    keep_out = {"podAntiAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "web"}},
                                           "topologyKey": "kubernetes.io/hostname"}]}}
    guard = pod("guard").cpu("100m").spec("affinity", keep_out).on("n1")
    assert where(snapshot_of(*nodes, guard, pod("w").cpu("1").label("app", "web")))["w"] == "n2"
    web = pod("web").cpu("100m").label("app", "web").on("n1")
    assert where(snapshot_of(*nodes, web, pod("x").cpu("1").spec("affinity", keep_out)))["x"] == "n2"


def test_running_pods_terms_attract_the_pods_they_match() -> None:
    nodes = [n("n1"), n("n2", cpu="64")]  # n2 is the emptier node
    likes_web = {"podAffinity": {PREF: [{"weight": 100, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}}]}}
    fan = pod("fan").cpu("100m").spec("affinity", likes_web).on("n1")
    assert where(snapshot_of(*nodes, fan, pod("w").cpu("1").label("app", "web")))["w"] == "n1"


def _candidate(snap: Snapshot) -> tuple[Any, Any, Any]:
    from kubeplace.models.aggregate import aggregate
    from kubeplace.solver.emulate.scheduler import as_candidate

    plugins = instantiate(Configuration(), Profile(), snap)
    problem = aggregate(snap, plugins).problem
    class_of = {snap.pending[m].key: c for c, members in enumerate(problem.members) for m in members}
    node_of = {name: i for i, name in enumerate(problem.node_names)}
    result = emulate(snap, filters=plugins.filters)
    steps = [(class_of[f"{ns}/{name}"], node_of[node]) for ns, name, node in result.placements]
    return problem, result, as_candidate(problem, steps)


def test_the_emulation_as_a_candidate_keeps_its_placements_and_the_rules() -> None:
    from kubeplace.models import evaluate

    nodes, web = zones_and_web()
    problem, result, candidate = _candidate(snapshot_of(*nodes, *web, *group("g1", 2)))
    assert evaluate.pods_placed(candidate) == len(result.placements) == 8
    assert evaluate.rule_violations(problem, candidate) == []


def test_the_emulation_as_a_candidate_drops_a_gang_it_left_below_min_member() -> None:
    from kubeplace.models import evaluate

    gang = [pod(f"m{i}").cpu("3").label("scheduling.x-k8s.io/pod-group", "job") for i in range(3)]
    group_object = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 3}}
    anti = {"podAntiAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "x"}},
                                       "topologyKey": "kubernetes.io/hostname"}]}}
    solo = pod("solo").cpu("1").label("app", "x").spec("affinity", anti)  # an inter-pod rule: the seed is used
    _, result, candidate = _candidate(snapshot_of(n("n1"), n("n2"), group_object, *gang, solo))
    assert len(result.placements) == 3  # the emulation places two members one by one, and solo
    assert evaluate.pods_placed(candidate) == 1  # the candidate keeps solo only


def test_a_time_cap_leaves_the_rest_of_the_queue_waiting() -> None:
    snap = snapshot_of(n("n1"), *(pod(f"p{i}").cpu("100m") for i in range(5)))
    capped = emulate(snap, budget=Budget.of(0.0))
    assert capped.placements == () and len(capped.unplaced) == 5
    assert len(emulate(snap, budget=Budget.of(60.0)).placements) == 5


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), max_size=20))
def test_the_candidate_places_no_more_pods_of_a_class_than_it_has(steps: list[tuple[int, int]]) -> None:
    """Steps made elsewhere (a seed listing a pod twice) may name a class more often than it has
    pods: the replay keeps at most its count, and the model's rules."""
    from kubeplace.models import evaluate
    from kubeplace.models.aggregate import aggregate
    from kubeplace.solver.emulate.scheduler import as_candidate

    spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "web"}}}
    snap = snapshot_of(n("a1", "8").label(ZONE, "a"), n("b1", "8").label(ZONE, "b"), n("c1", "8").label(ZONE, "c"),
                       *[pod(f"web-{i}").cpu("1").label("app", "web").spec("topologySpreadConstraints", [spread])
                         for i in range(2)],
                       pod("big").cpu("3"), *[pod(f"small-{i}").cpu("500m") for i in range(3)])
    problem = aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem
    assert problem.n_classes == 3 and problem.n_nodes == 3
    candidate = as_candidate(problem, steps)
    assert (candidate.placed_per_class(problem.n_classes) <= problem.count).all()
    assert evaluate.rule_violations(problem, candidate) == []
