"""Required inter-pod (anti-)affinity and DoNotSchedule topology spread between pending pods,
planned by the model (whole and by neighbourhoods, CP-SAT and HiGHS) and by the greedy: each
rule and option changes the answer, and every plan passes the independent verifier's replay."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from kubeplace.kube.objects import Snapshot
from kubeplace.models import evaluate
from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.formulation.placement import Neighbourhood, placement_model
from kubeplace.models.framework import Objective
from kubeplace.models.problem import Assignment, Problem
from kubeplace.plan.pipeline import Planned, make_plan
from kubeplace.plan.verify import verify
from kubeplace.solver.backends import get_backend
from kubeplace.solver.budget import Budget
from kubeplace.solver.greedy import POLICIES, greedy
from tests.builders import NodeBuilder, PodBuilder, node, pod, snapshot_of

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
HOST = "kubernetes.io/hostname"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
ANTI = "node(s) didn't match pod anti-affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
AFFINITY = "node(s) didn't match pod affinity rules"
WAYS = [("cpsat", 2000), ("highs", 2000), ("cpsat", 1), ("highs", 1)]
"""(backend, full_model_pairs): the whole model, and neighbourhoods only (LNS)."""


def n(name: str, cpu: str = "4", **labels: str) -> NodeBuilder:
    built = node(name).cpu(cpu).memory("16Gi")
    for key, value in labels.items():
        built = built.label(key, value)
    return built


def zoned(per_zone: int, zones: str = "abc", cpu: str = "4") -> list[NodeBuilder]:
    return [n(f"{z}{i}", cpu, zone=z) for z in zones for i in range(per_zone)]


def anti(app: str, key: str = HOST) -> dict[str, Any]:
    return {"podAntiAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}


def spread(app: str, key: str = "zone", max_skew: int = 1, **extra: Any) -> list[dict[str, Any]]:
    return [{"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": app}}, **extra}]


def replicas(app: str, count: int, cpu: str = "100m", **spec: Any) -> list[PodBuilder]:
    out = []
    for i in range(count):
        built = pod(f"{app}-{i}").cpu(cpu).label("app", app)
        for field, value in spec.items():
            built = built.spec(field, value)
        out.append(built)
    return out


def plans(snap: Snapshot) -> list[Planned]:
    """The plan every way, each verified; and every greedy placement keeps the model's rules."""
    out = []
    for backend, pairs in WAYS:
        settings = SolverSettings(backend=backend, time_limit=4, workers=1, full_model_pairs=pairs)
        planned = make_plan(snap, Configuration(), Profile(), settings)
        assert planned.violations == (), (backend, pairs, planned.violations)
        assert verify(snap, [(p.namespace, p.name, p.node) for p in planned.plan.placements]) == []
        out.append(planned)
    problem = out[0].aggregation.problem
    for policy in POLICIES:
        assert evaluate.rule_violations(problem, greedy(problem, policy)) == []
    return out


def where(planned: Planned) -> dict[str, str]:
    return {p.name: p.node for p in planned.plan.placements}


def placed_counts(snap: Snapshot) -> list[int]:
    return [len(p.plan.placements) for p in plans(snap)]


def test_anti_affinity_between_pending_pods_of_one_class_keeps_one_per_node() -> None:
    snap = snapshot_of(*zoned(2, "ab"), *replicas("web", 6, affinity=anti("web")))
    for planned in plans(snap):
        nodes = list(where(planned).values())
        assert len(nodes) == 4 and len(set(nodes)) == 4
        reasons = {r for u in planned.plan.unplaced for r in u.reasons}
        assert reasons == {f"0/4 nodes are available: 4 {ANTI}."}


def test_anti_affinity_on_zones_between_two_apps() -> None:
    # web keeps db out of its zone (and db, unaware, is kept from web's zone by symmetry)
    snap = snapshot_of(*zoned(1, "ab"), *replicas("web", 2, affinity=anti("db", "zone")), *replicas("db", 2))
    for planned in plans(snap):
        zone = {name: node[0] for name, node in where(planned).items()}
        assert len(zone) == 4
        assert {zone["web-0"], zone["web-1"]}.isdisjoint({zone["db-0"], zone["db-1"]})


def test_zone_spread_max_skew_one_across_a_batch() -> None:
    snap = snapshot_of(*zoned(2), *replicas("web", 7, topologySpreadConstraints=spread("web")))
    for planned in plans(snap):
        counts = Counter(node[0] for node in where(planned).values())
        assert sorted(counts.values()) == [2, 2, 3]


def test_zone_spread_fills_the_empty_zone_up_to_the_running_ones() -> None:
    # zone a runs 5 matching pods, b none; maxSkew 1: all 6 pending fit (6/5 or
    # 5/6), b being filled level by level up to a's count
    running = [pod(f"old-{i}").scheduler("x").cpu("100m").label("app", "web").on("a0") for i in range(5)]
    snap = snapshot_of(n("a0", "8", zone="a"), n("b0", "8", zone="b"), *running,
                       *replicas("web", 6, topologySpreadConstraints=spread("web")))
    for planned in plans(snap):
        counts = Counter(node[0] for node in where(planned).values())
        assert counts in ({"b": 5, "a": 1}, {"b": 6})


def test_min_domains_above_the_domain_count_makes_the_floor_zero() -> None:
    three = snapshot_of(*zoned(1), *replicas("web", 5, topologySpreadConstraints=spread("web", minDomains=4)))
    assert placed_counts(three) == [3, 3, 3, 3]  # one per zone: the floor stays 0
    enough = snapshot_of(*zoned(1), *replicas("web", 5, topologySpreadConstraints=spread("web", minDomains=3)))
    assert placed_counts(enough) == [5, 5, 5, 5]


def test_a_spread_over_a_single_domain_never_filters() -> None:
    # one zone: the kube-scheduler's skew is the pod itself wherever it goes; the web pod with
    # hostname spread counts the zone-spread pods too, so a fixed floor on the zone refused one
    both = snapshot_of(n("a0", "1", zone="a"), n("a1", "1", zone="a"),
                       *replicas("web", 1, "250m", topologySpreadConstraints=spread("web", HOST)),
                       pod("zonal").cpu("250m").label("app", "web").spec("topologySpreadConstraints", spread("web")))
    for planned in plans(both):
        assert planned.plan.summary.pods_placed == 2
        assert not any(step.startswith("kube-scheduler emulation kept") for step in planned.report.steps)
    assert all(not s.name.endswith("on zone maxSkew 1") for s in plans(both)[0].aggregation.problem.spreads)
    lone = snapshot_of(n("a0", "1", zone="a"), *replicas("web", 3, "250m", topologySpreadConstraints=spread(
        "web", minDomains=2)))  # minDomains 2 over one zone: the global minimum is 0, so one pod only
    assert placed_counts(lone) == [1, 1, 1, 1]


def test_constraints_that_differ_only_where_it_changes_nothing_are_one() -> None:
    # hostname spread maxSkew 1 over two untainted nodes: nodeTaintsPolicy Honor or Ignore leave
    # the same eligible nodes, so the kube-scheduler places all three (1/1, then 2/1); two
    # separate fixed floors capped each host at one. The last pod's zone spread (one zone) is void.
    honour = {"nodeTaintsPolicy": "Honor"}
    snap = snapshot_of(n("a0", "1", zone="a"), n("a1", "1", zone="a"),
                       *replicas("web", 2, "250m", topologySpreadConstraints=spread("web", HOST, **honour)),
                       pod("web-x").cpu("250m").label("app", "web").spec(
                           "topologySpreadConstraints", spread("web", HOST) + spread("web")))
    for planned in plans(snap):
        assert planned.plan.summary.pods_placed == 3
        assert not any(step.startswith("kube-scheduler emulation kept") for step in planned.report.steps)
    assert len(plans(snap)[0].aggregation.problem.spreads) == 1
    # one node per zone: hostname and zone spread group the nodes alike, so they are one constraint
    alike = snapshot_of(n("a0", "1", zone="a"), n("b0", "1", zone="b"),
                        *replicas("web", 2, "250m", topologySpreadConstraints=spread("web", HOST)),
                        pod("web-z").cpu("250m").label("app", "web").spec("topologySpreadConstraints", spread("web")))
    assert [p.plan.summary.pods_placed for p in plans(alike)] == [3, 3, 3, 3]
    assert len(plans(alike)[0].aggregation.problem.spreads) == 1


def test_where_the_fixed_floor_is_stricter_the_kube_schedulers_placement_is_kept() -> None:
    # web-3's hostname spread has minDomains 3 over two hosts: its host must hold no web pod when it
    # goes there. The fixed floor counts the final placement, so web-3 and the others never share a
    # host, while the kube-scheduler places them one by one and the replay finds its order.
    running = [pod(f"old-{i}").scheduler("x").cpu("250m").label("app", "web").on("a0") for i in range(3)]
    snap = snapshot_of(n("a0", "1", zone="a"), n("a1", "1", zone="a"), *running,
                       *replicas("web", 2, "250m"),
                       pod("web-2").cpu("250m").label("app", "web").spec(
                           "topologySpreadConstraints", spread("web", HOST)),
                       pod("web-3").cpu("250m").label("app", "web").spec(
                           "topologySpreadConstraints", spread("web", HOST, minDomains=3)))
    for planned in plans(snap):
        assert planned.plan.summary.pods_placed == 3 and planned.plan.summary.bound is None
        assert any(step.startswith("kube-scheduler emulation kept") for step in planned.report.steps)


@pytest.mark.parametrize(("policy", "placed"), [("Honor", 4), ("Ignore", 2)])
def test_node_affinity_policy(policy: str, placed: int) -> None:
    # zone c's node lacks the label the pods select: under Honor zone c is no domain of the spread;
    # under Ignore it is one, empty for ever, so zones a and b stay at maxSkew
    nodes = [n("a0", disk="ssd", zone="a"), n("b0", disk="ssd", zone="b"), n("c0", zone="c")]
    pods = [p.spec("nodeSelector", {"disk": "ssd"}) for p in
            replicas("web", 4, topologySpreadConstraints=spread("web", nodeAffinityPolicy=policy))]
    assert placed_counts(snapshot_of(*nodes, *pods)) == [placed] * 4


@pytest.mark.parametrize(("policy", "placed"), [("Honor", 4), ("Ignore", 2)])
def test_node_taints_policy(policy: str, placed: int) -> None:
    nodes = [n("a0", zone="a"), n("b0", zone="b"), n("c0", zone="c").taint("dedicated", "x")]
    pods = replicas("web", 4, topologySpreadConstraints=spread("web", nodeTaintsPolicy=policy))
    assert placed_counts(snapshot_of(*nodes, *pods)) == [placed] * 4


def test_a_spread_pod_on_a_node_without_the_key_is_refused_with_the_kube_scheduler_reason() -> None:
    snap = snapshot_of(n("a0", zone="a"), n("x0"), *replicas("web", 3, "3", topologySpreadConstraints=spread("web")))
    for planned in plans(snap):
        assert list(where(planned).values()) == ["a0"]
        (reason,) = {r for u in planned.plan.unplaced for r in u.reasons}
        assert reason == ("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod topology "
                          "spread constraints (missing required label).")


def test_spread_unplaced_pods_say_the_skew_in_the_kube_schedulers_words() -> None:
    # zone b is full; a takes maxSkew more than b's 0 and then says no
    snap = snapshot_of(n("a0", "8", zone="a"), n("b0", "0", zone="b"),
                       *replicas("web", 3, "1", topologySpreadConstraints=spread("web")))
    for planned in plans(snap):
        assert len(planned.plan.placements) == 1
        assert {r for u in planned.plan.unplaced for r in u.reasons} == {
            f"0/2 nodes are available: 1 Insufficient cpu, 1 {SPREAD}."}


def group(name: str, size: int, cpu: str = "1", exclusive: bool = True) -> list[PodBuilder]:
    own = {"labelSelector": {"matchLabels": {GROUP_KEY: name}}, "topologyKey": "rack"}
    others = {"labelSelector": {"matchExpressions": [{"key": GROUP_KEY, "operator": "Exists"},
                                                     {"key": GROUP_KEY, "operator": "NotIn", "values": [name]}]},
              "topologyKey": "rack"}
    affinity: dict[str, Any] = {"podAffinity": {REQ: [own]}}
    if exclusive:
        affinity["podAntiAffinity"] = {REQ: [others]}
    return [pod(f"{name}-{i}").cpu(cpu).label(GROUP_KEY, name).spec("affinity", affinity) for i in range(size)]


def racks(count: int, per_rack: int = 2, cpu: str = "2") -> list[NodeBuilder]:
    return [n(f"r{r}n{i}", cpu, rack=f"r{r}") for r in range(count) for i in range(per_rack)]


def test_a_self_affine_group_starts_in_one_rack_and_stays_there() -> None:
    # no pod of the group runs yet, so its first pod may go anywhere (the
    # kube-scheduler's first-pod rule); all the others must then join its rack
    snap = snapshot_of(*racks(3), *group("g1", 4), *group("g2", 3))
    for planned in plans(snap):
        rack = {name: node.split("n")[0] for name, node in where(planned).items()}
        assert len(rack) == 7
        assert len({rack[f"g1-{i}"] for i in range(4)}) == 1 and len({rack[f"g2-{i}"] for i in range(3)}) == 1
        assert rack["g1-0"] != rack["g2-0"]  # exclusive racks


def test_a_group_that_fits_no_rack_whole_splits_nowhere() -> None:
    # 5 pods of 1 CPU, racks of 4 CPU: the first pod's rack takes 4, the fifth has no supporter elsewhere
    snap = snapshot_of(*racks(2), *group("g1", 5, exclusive=False))
    for planned in plans(snap):
        assert len({node.split("n")[0] for node in where(planned).values()}) == 1
        assert len(planned.plan.placements) == 4
        assert {r for u in planned.plan.unplaced for r in u.reasons} == {
            f"0/4 nodes are available: 2 Insufficient cpu, 2 {AFFINITY}."}


def test_affinity_to_running_pods_and_to_pending_supporters() -> None:
    to = {"podAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}
    running_db = pod("db-old").scheduler("x").cpu("100m").label("app", "db").on("b0")
    snap = snapshot_of(*zoned(1), running_db, *replicas("web", 2, affinity=to))
    for planned in plans(snap):
        assert set(where(planned).values()) == {"b0"}
    pending_db = replicas("db", 1)  # no running db: the web pods follow the pending one
    snap = snapshot_of(*zoned(1, cpu="1"), *pending_db, *replicas("web", 3, cpu="300m", affinity=to))
    for planned in plans(snap):
        placed = where(planned)
        assert len(placed) == 4 and {node for name, node in placed.items()} == {placed["db-0"]}


def test_affinity_without_any_possible_supporter_places_nothing() -> None:
    to = {"podAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}
    snap = snapshot_of(*zoned(1), *replicas("web", 2, affinity=to))
    for planned in plans(snap):
        assert planned.plan.placements == ()
        assert {r for u in planned.plan.unplaced for r in u.reasons} == {f"0/3 nodes are available: 3 {AFFINITY}."}


def test_symmetry_with_running_pods() -> None:
    # a running web pod carries anti-affinity to db on zones; a pending db pod matching it stays
    # out of its zone, and a pending web pod's own term keeps it out of the running db's zone
    running = [pod("web-old").scheduler("x").cpu("100m").label("app", "web").spec("affinity", anti("db", "zone"))
               .on("a0"), pod("db-old").scheduler("x").cpu("100m").label("app", "db").on("b0")]
    snap = snapshot_of(*zoned(1), *running, *replicas("db", 1), *replicas("web", 1, affinity=anti("db", "zone")))
    for planned in plans(snap):
        placed = where(planned)
        assert placed["db-0"][0] != "a" and placed["web-0"][0] != "b"


def test_pods_placed_by_class_stay_interchangeable() -> None:
    # replicas differing only in a label no rule reads share one class
    pods = [p.label("pod-template-hash", f"h{i}") for i, p in
            enumerate(replicas("web", 4, affinity=anti("web"), topologySpreadConstraints=spread("web")))]
    planned = plans(snapshot_of(*zoned(2, "ab"), *pods))[0]
    assert planned.aggregation.problem.n_classes == 1
    assert np.array_equal(planned.aggregation.problem.count, [4])


def _scenarios() -> dict[str, Snapshot]:
    to_db = {"podAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}
    return {
        "hostname anti-affinity": snapshot_of(*zoned(2, "ab"), *replicas("web", 6, affinity=anti("web"))),
        "zone anti-affinity between apps": snapshot_of(*zoned(1, "ab"), *replicas("db", 2),
                                                       *replicas("web", 2, affinity=anti("db", "zone"))),
        "zone anti-affinity in one app": snapshot_of(*zoned(2), *replicas("web", 5, affinity=anti("web", "zone"))),
        "zone spread": snapshot_of(*zoned(2), *replicas("web", 7, topologySpreadConstraints=spread("web"))),
        "spread counting other pods": snapshot_of(*zoned(1, cpu="1"), *replicas("web", 4, "300m",
                                                  topologySpreadConstraints=spread("app-any")),
                                                  *[p.label("app", "app-any") for p in replicas("other", 3, "300m")]),
        "min domains": snapshot_of(*zoned(1), *replicas("web", 5, topologySpreadConstraints=spread("web",
                                                                                                  minDomains=4))),
        "rack groups": snapshot_of(*racks(3), *group("g1", 4), *group("g2", 3)),
        "affinity to pending": snapshot_of(*zoned(1, cpu="1"), *replicas("db", 1),
                                           *replicas("web", 3, cpu="300m", affinity=to_db)),
    }


@pytest.mark.parametrize("name", list(_scenarios()))
@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_the_rows_alone_keep_every_rule(name: str, backend: str) -> None:
    """The model's own answer (no greedy, no check after it) keeps the rules: the whole model,
    and a neighbourhood of half the nodes with the greedy's pods fixed on the others."""
    snap = _scenarios()[name]
    problem = aggregate_of(snap)
    start = greedy(problem, "best-fit")
    half = np.arange(0, problem.n_nodes, 2, dtype=np.int64)
    for hood in (Neighbourhood.whole(problem), Neighbourhood(half, start.on_nodes(half, inside=False))):
        form = placement_model(problem, hood, start.on_nodes(hood.nodes))
        assert form.model.hint is not None and form.model.violations(form.model.hint) == []  # a complete, feasible hint
        result = get_backend(backend).solve(form.model, SolverSettings(backend, 5.0, workers=1), Budget.of(5.0))
        assert result.values is not None
        answer = hood.fixed.merge(form.assignment(result.values))
        assert evaluate.rule_violations(problem, answer) == []
        assert evaluate.placed_weight(problem, answer) >= evaluate.placed_weight(problem, start)


def test_rule_violations_sees_each_rule_broken() -> None:
    scenarios = _scenarios()
    for name, cls_node_counts in [("hostname anti-affinity", [(0, 0, 2)]), ("zone spread", [(0, 0, 2)]),
                                  ("rack groups", [(0, 0, 1), (0, 2, 1)])]:
        snap = scenarios[name]
        problem = aggregate_of(snap)
        a = Assignment(*(np.array(column, dtype=np.int64) for column in zip(*cls_node_counts, strict=True)))
        assert evaluate.rule_violations(problem, a), name


def aggregate_of(snap: Snapshot) -> Problem:
    return aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem


def test_water_filling_stops_at_max_skew_when_a_zone_is_full() -> None:
    # zone b's nodes hold one pod each; zone a has room for many, but may only run maxSkew ahead
    nodes = [n("a0", "8", zone="a"), n("a1", "8", zone="a"), n("b0", "1", zone="b"), n("b1", "1", zone="b")]
    snap = snapshot_of(*nodes, *replicas("web", 8, "1", topologySpreadConstraints=spread("web", max_skew=2)))
    for planned in plans(snap):
        assert Counter(node[0] for node in where(planned).values()) == {"a": 4, "b": 2}


def test_a_placed_pods_anti_affinity_explains_why_a_matched_pod_waits() -> None:
    # web (first by priority) keeps db pods out of its zone: web takes b0, four db pods fill a0,
    # and b0 (room for one more) refuses the last two for web's sake
    web = [p.priority(10) for p in replicas("web", 1, affinity=anti("db", "zone"))]
    snap = snapshot_of(n("a0", "4", zone="a"), n("b0", "2", zone="b"), *web, *replicas("db", 6, "1"))
    for planned in plans(snap):
        assert where(planned)["web-0"] == "b0" and len(planned.plan.placements) == 5
        assert {r for u in planned.plan.unplaced for r in u.reasons} == {
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't satisfy existing pods anti-affinity rules."}


def test_an_affinity_group_in_a_part_that_sees_fewer_domains_of_its_key() -> None:
    # binpack separates the two apps into parts; web's part has no node of zone c, the last
    # zone of the affinity term's key, whose running supporter array still counts it
    to_db = {"podAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}
    nodes = [n("a0", zone="a", pool="web"), n("b0", zone="b", pool="web"), n("c0", zone="c", pool="batch")]
    running_db = pod("db-old").scheduler("x").cpu("100m").label("app", "db").on("b0")
    web = [p.selector("pool", "web") for p in replicas("web", 2, affinity=to_db)]
    batch = [p.selector("pool", "batch") for p in replicas("batch", 2)]
    snap = snapshot_of(*nodes, running_db, *web, *batch)
    for backend in ("cpsat", "highs"):
        settings = SolverSettings(backend=backend, time_limit=4, workers=1)
        planned = make_plan(snap, Configuration(), Profile(objective=Objective.BINPACK), settings)
        assert planned.violations == () and len(planned.report.steps) > 1  # parts solved
        assert {name: node for name, node in where(planned).items() if name.startswith("web")} == {
            "web-0": "b0", "web-1": "b0"}


def test_the_plan_lists_its_placements_in_an_order_the_kube_scheduler_accepts() -> None:
    # zones a, b, c with 2, 2, 1 web pods: bound in class order (a, a, ...) the second pod in a
    # would see a skew of 2; the plan lists them level by level, so each step keeps maxSkew 1
    snap = snapshot_of(n("a1", zone="a"), n("b1", zone="b"), n("c1", "1", zone="c"),
                       *replicas("web", 6, "1", topologySpreadConstraints=spread("web")))
    for planned in plans(snap):
        counts = dict.fromkeys("abc", 0)
        for placement in planned.plan.placements:
            zone = placement.node[0]
            assert counts[zone] + 1 - min(counts.values()) <= 1, planned.plan.placements
            counts[zone] += 1
        assert counts == {"a": 2, "b": 2, "c": 1}
