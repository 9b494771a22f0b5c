"""Preferences in the second goal: ScheduleAnyway spread, preferred pod anti-affinity,
preferred node affinity and PreferNoSchedule taints, planned whole and by neighbourhoods on
CP-SAT and HiGHS. Each scenario is built so that the balance goal alone would do the opposite
(an empty big node draws every pod), and each is checked to do that opposite with its plugin's
weight set to 0. No preference ever costs a placed pod."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from kubeplace.kube.objects import Snapshot
from kubeplace.models import evaluate
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.formulation.placement import Neighbourhood, objective_model
from kubeplace.models.framework import PreferenceTerm
from kubeplace.models.linear_terms import SCALE
from kubeplace.models.plugins.inter_pod_affinity import InterPodAffinityArgs
from kubeplace.models.plugins.node_affinity import NodeAffinityArgs
from kubeplace.models.plugins.taint_toleration import TaintTolerationArgs
from kubeplace.models.plugins.topology_spread import DefaultConstraint, PodTopologySpreadArgs
from kubeplace.models.preferences import node_scores
from kubeplace.models.problem import Assignment, NodePreference
from kubeplace.models.terms import objective_value
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import Planned, make_plan
from kubeplace.plan.plan import Placement
from kubeplace.plan.verify import verify
from kubeplace.solver.backends import get_backend
from kubeplace.solver.budget import Budget
from kubeplace.solver.greedy import POLICIES, greedy
from tests.builders import NodeBuilder, PodBuilder, node, pod, snapshot_of

HOST = "kubernetes.io/hostname"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
WAYS = [("cpsat", 2000), ("highs", 2000), ("cpsat", 1), ("highs", 1)]
"""(backend, full_model_pairs): the whole model, and neighbourhoods only (LNS)."""
OFF = {"NodeAffinity": NodeAffinityArgs(weight=0), "TaintToleration": TaintTolerationArgs(weight=0),
       "InterPodAffinity": InterPodAffinityArgs(weight=0), "PodTopologySpread": PodTopologySpreadArgs(weight=0)}


def n(name: str, cpu: str = "4", **labels: str) -> NodeBuilder:
    built = node(name).cpu(cpu).memory("64Gi").label(HOST, name)
    for key, value in labels.items():
        built = built.label(key, value)
    return built


def busy(name: str, zone: str, cpu: str = "4", used: str = "3") -> list[NodeBuilder | PodBuilder]:
    """A node already three quarters full (the balance goal keeps new pods off it)."""
    return [n(name, cpu, zone=zone), pod(f"{name}-load").scheduler("other").cpu(used).memory("1Gi").on(name)]


def cluster() -> list[NodeBuilder | PodBuilder]:
    """An empty big node in zone a beside loaded small ones in zones a, b, c."""
    return [n("big", "64", zone="a"), *busy("a1", "a"), *busy("b1", "b"), *busy("b2", "b"), *busy("c1", "c"),
            *busy("c2", "c")]


def replicas(app: str, count: int, **spec: Any) -> list[PodBuilder]:
    out = []
    for i in range(count):
        built = pod(f"{app}-{i}").cpu("100m").memory("128Mi").label("app", app)
        for field, value in spec.items():
            built = built.spec(field, value)
        out.append(built)
    return out


def soft_spread(app: str, key: str, max_skew: int = 1) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": app}}}


def plans(snap: Snapshot, plugin_args: dict[str, Any] | None = None) -> list[Planned]:
    """The plan every way, each verified by the independent verifier."""
    out = []
    for backend, pairs in WAYS:
        settings = SolverSettings(backend=backend, time_limit=4, workers=1, full_model_pairs=pairs)
        planned = make_plan(snap, Configuration(), Profile(plugin_args=plugin_args or {}), settings)
        assert planned.violations == (), (backend, pairs, planned.violations)
        assert verify(snap, [(p.namespace, p.name, p.node) for p in planned.plan.placements]) == []
        out.append(planned)
    return out


def where(planned: Planned) -> dict[str, str]:
    return {p.name: p.node for p in planned.plan.placements}


def frontend() -> Snapshot:
    spread = [soft_spread("frontend", "zone"), soft_spread("frontend", HOST)]
    return snapshot_of(*cluster(), *replicas("frontend", 6, topologySpreadConstraints=spread))


def test_soft_zone_and_host_spread_keep_six_replicas_off_one_node() -> None:
    for planned in plans(frontend()):
        per_node = Counter(where(planned).values())
        assert sum(per_node.values()) == 6
        assert max(per_node.values()) <= 2, per_node
        zones = Counter({"b": 0, "c": 0} | Counter("a" if n == "big" else n[0] for n in where(planned).values()))
        assert max(zones.values()) - min(zones.values()) <= 1, zones


def test_without_the_spread_score_the_replicas_pile_on_the_big_node() -> None:
    for planned in plans(frontend(), {"PodTopologySpread": PodTopologySpreadArgs(weight=0)}):
        assert max(Counter(where(planned).values()).values()) >= 5


def ingress() -> Snapshot:
    term = {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "ingress"}},
                                               "topologyKey": HOST}}
    return snapshot_of(*cluster(), *replicas("ingress", 2, affinity={"podAntiAffinity": {PREFERRED: [term]}}))


def test_preferred_anti_affinity_puts_two_ingress_pods_on_different_hosts() -> None:
    for planned in plans(ingress()):
        assert len(set(where(planned).values())) == 2
    for planned in plans(ingress(), {"InterPodAffinity": InterPodAffinityArgs(weight=0)}):
        assert set(where(planned).values()) == {"big"}


def ssd_lovers() -> Snapshot:
    term = {"weight": 50, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}
    nodes = [n("big", "64", zone="a"), n("s1", "4", zone="b", disk="ssd"),
             pod("s1-load").scheduler("other").cpu("3").on("s1")]
    return snapshot_of(*nodes, *replicas("db", 3, affinity={"nodeAffinity": {PREFERRED: [term]}}))


def test_preferred_node_affinity_chooses_the_preferred_nodes() -> None:
    for planned in plans(ssd_lovers()):
        assert set(where(planned).values()) == {"s1"}
    for planned in plans(ssd_lovers(), {"NodeAffinity": NodeAffinityArgs(weight=0)}):
        assert "big" in set(where(planned).values())


def tainted(used: str = "1") -> Snapshot:
    nodes = [n("big", "64", zone="a").taint("spot", "yes", "PreferNoSchedule"), *busy("b1", "b", "4", used)]
    return snapshot_of(*nodes, *replicas("web", 3))


def test_prefer_no_schedule_taints_are_avoided_when_possible() -> None:
    for planned in plans(tainted()):
        assert set(where(planned).values()) == {"b1"}
    for planned in plans(tainted(), {"TaintToleration": TaintTolerationArgs(weight=0)}):
        assert "big" in set(where(planned).values())


def test_a_preference_never_costs_a_placed_pod() -> None:
    # b1 takes two of the three pods: the third goes to the tainted node rather than nowhere
    for planned in plans(tainted("3800m")):
        assert len(planned.plan.placements) == 3
        assert Counter(where(planned).values()) == {"b1": 2, "big": 1}


def test_every_preference_has_a_term_at_the_default_profile_weight() -> None:
    planned = make_plan(frontend(), Configuration(), Profile(), SolverSettings(time_limit=1, workers=1))
    assert PreferenceTerm("PodTopologySpread", 2) in planned.terms
    assert [t for t in make_plan(tainted(), Configuration(), Profile(), SolverSettings(time_limit=1)).terms
            if isinstance(t, PreferenceTerm)] == [PreferenceTerm("TaintToleration", 3)]
    off = make_plan(frontend(), Configuration(), Profile(plugin_args=OFF), SolverSettings(time_limit=1))
    assert not [t for t in off.terms if isinstance(t, PreferenceTerm)]


def test_node_scores_are_the_kube_schedulers_normalised_scores() -> None:
    planned = make_plan(tainted(), Configuration(), Profile(), SolverSettings(time_limit=1))
    problem = planned.aggregation.problem
    (pref,) = [p for p in problem.preferences if isinstance(p, NodePreference)]
    names = list(problem.node_names)
    scores = node_scores(problem, pref)[0]
    # DefaultNormalizeScore reversed: one untolerated taint of at most one scores 0, none 100
    assert scores[names.index("big")] == 0 and scores[names.index("b1")] == 100


@pytest.mark.parametrize("make", [frontend, ingress, ssd_lovers, tainted])
def test_plans_are_never_worse_than_the_greedy_on_the_preferences(make: Any) -> None:
    planned = plans(make())[0]
    problem, terms = planned.aggregation.problem, planned.terms
    prefs = [t for t in terms if isinstance(t, PreferenceTerm)]
    chosen = planned.report.assignment
    for policy in POLICIES:
        candidate = greedy(problem, policy)
        if evaluate.placed_weight(problem, candidate) == evaluate.placed_weight(problem, chosen):
            assert objective_value(problem, chosen, prefs) <= objective_value(
                problem, candidate, prefs) + 1e-9


def replica_set(name: str, app: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}, "template": {}}}


def service(name: str, selector: dict[str, str] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": [{"port": 80}]}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def owned(*objects: dict[str, Any]) -> Snapshot:
    """Six replicas of a ReplicaSet without spread constraints of their own."""
    pods = [p.owner("ReplicaSet", "web-1") for p in replicas("web", 6)]
    return snapshot_of(*cluster(), *objects, *pods)


def test_the_system_default_spread_keeps_a_replica_set_off_one_node() -> None:
    # the system defaults: hostname maxSkew 3 and zone maxSkew 5, ScheduleAnyway, selecting by the ReplicaSet
    for planned in plans(owned(replica_set("web-1", "web"))):
        assert max(Counter(where(planned).values()).values()) <= 2
    for planned in plans(owned()):  # no ReplicaSet in the snapshot: no selector, no default constraints
        assert set(where(planned).values()) == {"big"}


def test_a_service_selecting_the_pods_gives_the_default_selector() -> None:
    for planned in plans(owned(service("web", {"app": "web"}))):
        assert max(Counter(where(planned).values()).values()) <= 2
    for planned in plans(owned(service("web", None), service("other", {"app": "db"}))):
        assert set(where(planned).values()) == {"big"}  # a nil selector selects nothing; "other" not these pods


def test_listed_default_constraints_that_do_not_schedule_are_hard() -> None:
    hard = PodTopologySpreadArgs(defaultConstraints=(DefaultConstraint(1, HOST, "DoNotSchedule"),),
                                 defaultingType="List")
    snap = owned(replica_set("web-1", "web"))
    for planned in plans(snap, {"PodTopologySpread": hard}):
        assert len(set(where(planned).values())) == 6
    profile = Profile(plugin_args={"PodTopologySpread": hard})
    stacked = [Placement("default", f"web-{i}", "big") for i in range(2)]
    violations = verify_plan(snap, stacked, Configuration(), profile)
    assert violations and all(v.rule == "PodTopologySpread" for v in violations)
    assert verify_plan(snap, stacked, Configuration(), Profile()) == []


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
@pytest.mark.parametrize("make", [ssd_lovers, tainted, frontend, ingress])
def test_the_linear_goal_moves_pods_off_a_hint_that_ignores_the_preferences(backend: str, make: Any) -> None:
    # stage 2 alone, from the hint "everything on the big node": the rows, not the greedy, find the preferred nodes
    planned = make_plan(make(), Configuration(), Profile(), SolverSettings(time_limit=1, workers=1))
    problem, terms = planned.aggregation.problem, planned.terms
    big = problem.node_names.index("big")
    counts = problem.count.astype(np.int64)
    hint = Assignment(np.arange(problem.n_classes), np.full(problem.n_classes, big), counts)
    hood = Neighbourhood.whole(problem)
    prefs = [t for t in terms if isinstance(t, PreferenceTerm)]
    form = objective_model(problem, hood, prefs, evaluate.stage_weights(problem, hint),
                           evaluate.mean_utilisation(problem, hint), hint)
    assert form.model.hint is not None and form.model.violations(form.model.hint) == []
    result = get_backend(backend).solve(form.model, SolverSettings(time_limit=5, workers=1), Budget.of(5))
    assert result.values is not None
    answer = form.assignment(result.values)
    best = 15.0 if make is frontend else 0.0  # six replicas in three zones: three pairs of 50 points, weight 2
    assert objective_value(problem, answer, prefs) == best < objective_value(problem, hint, prefs)
    # the linear goal counts the preferences exactly as the exact evaluation does, hint and answer alike
    assert form.model.evaluate(result.values) == round(best * SCALE)
    assert form.model.evaluate(form.model.hint) == round(objective_value(problem, hint, prefs) * SCALE)
