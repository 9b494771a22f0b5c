"""models/plugins/inter_pod_affinity/: the verifier check in the plan's replay and the
emulation's filter against the kube-scheduler's filter cases (its filtering_test.go), the starters
and supporters the replay orders itself, the check running only where the profile enables the
rule; and the model: running pods' required anti-affinity, and the rules between pending pods."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.framework import RunContext
from kubeplace.models.plugins import inter_pod_affinity
from kubeplace.models.plugins.inter_pod_affinity import InterPodAffinityArgs
from kubeplace.models.plugins.inter_pod_affinity.emulate import admits
from kubeplace.models.plugins.inter_pod_affinity.verify import (
    AFFINITY_MISMATCH,
    ANTI_AFFINITY_MISMATCH,
    EXISTING_ANTI_AFFINITY_MISMATCH,
)
from kubeplace.plan.checks import verify_settings
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.verify import replay_plan, verify
from tests.builders import PodBuilder, namespace, node, pod, snapshot_of
from tests.replay_builders import OK, affinity, anti, emulated, labelled, n, names, outcomes, term

AFF, ANTI, EXISTING = AFFINITY_MISMATCH, ANTI_AFFINITY_MISMATCH, EXISTING_ANTI_AFFINITY_MISMATCH


NAMESPACES = (namespace("subteam1-team1").label("team", "team1"), namespace("subteam2-team1").label("team", "team1"),
              namespace("subteam1-team2").label("team", "team2"), namespace("ns-1"))
NODE1 = n("node1", region="r1", zone="z11")
SCAN = term("service", "region", "In", "securityscan", "value2")
TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}
CHINA_INDIA = (n("nodea", region="China"), n("nodeb", region="China", az="az1"), n("nodec", region="India"))
R1_Z1_Z2 = (n("nodea", region="r1", zone="z1"), n("nodeb", region="r1", zone="z2"))

AFFINITY_CASES = [
    ("1 affinity In matches the existing pod",
     [NODE1, labelled(pod("e"), service="securityscan").on("node1"), affinity(labelled(pod("p"), security="S1"), SCAN)],
     {"node1": OK}),
    ("2 namespaces exclude the existing pod's namespace",
     [NODE1, labelled(pod("e", "ns"), service="securityscan").on("node1"),
      affinity(pod("p"), {**SCAN, "namespaces": ["DiffNameSpace"]})],
     {"node1": AFF}),
    ("3a namespaceSelector selects the existing pod's namespace",
     [*NAMESPACES, NODE1, labelled(pod("e", "subteam1-team1"), service="securityscan").on("node1"),
      affinity(pod("p"), {**SCAN, "namespaceSelector": TEAM1})],
     {"node1": OK}),
    ("3b namespaceSelector does not select it",
     [*NAMESPACES, NODE1, labelled(pod("e", "subteam1-team2"), service="securityscan").on("node1"),
      affinity(pod("p"), {**SCAN, "namespaceSelector": TEAM1})],
     {"node1": AFF}),
    ("4a anti-affinity with namespaceSelector {} reaches every namespace",
     [*NAMESPACES, NODE1, labelled(pod("e", "subteam2-team1"), service="securityscan").on("node1"),
      anti(pod("p", "subteam1-team1"), {**term("service", "zone", "In", "securityscan"), "namespaceSelector": {}})],
     {"node1": ANTI}),
    ("4b anti-affinity namespaceSelector does not select the existing pod's namespace",
     [*NAMESPACES, NODE1, labelled(pod("e", "subteam1-team2"), service="securityscan").on("node1"),
      anti(pod("p", "subteam1-team1"), {**term("service", "zone", "In", "securityscan"), "namespaceSelector": TEAM1})],
     {"node1": OK}),
    ("5 affinity on region: same region passes, another fails",
     [*CHINA_INDIA, labelled(pod("e"), foo="bar").on("nodea"), affinity(pod("p"), term("foo", "region", "In", "bar"))],
     {"nodea": OK, "nodeb": OK, "nodec": AFF}),
    ("6 first pod of a self-affine collection passes anywhere",
     [n("nodea", zone="az1"), n("nodeb", zone="az2"), labelled(pod("e"), foo="bar").on("nodea"),
      affinity(labelled(pod("p"), foo="bar", service="securityscan"), term("foo", "zone", "In", "bar"),
               term("service", "zone", "In", "securityscan"))],
     {"nodea": OK, "nodeb": OK}),
    ("7 first pod only on nodes with the topology keys",
     [n("nodea", zoneLabel="az1"), n("nodeb", zoneLabel="az2"), labelled(pod("e"), foo="bar").on("nodea"),
      affinity(labelled(pod("p"), foo="bar", service="securityscan"), term("foo", "zone", "In", "bar"),
               term("service", "zone", "In", "securityscan"))],
     {"nodea": AFF, "nodeb": AFF}),
    ("8 anti-affinity covers the whole region",
     [n("nodea", region="r1"), n("nodeb", region="r1"), labelled(pod("e"), foo="abc").on("nodea"),
      anti(pod("p"), term("foo", "region", "In", "abc"))],
     {"nodea": ANTI, "nodeb": ANTI}),
    ("9 any anti-affinity term suffices",
     [n("nodea", region="r1", zone="z1"), n("nodeb", region="r1", zone="z2"),
      labelled(pod("e"), foo="abc", service="securityscan").on("nodea"),
      anti(pod("p"), term("foo", "region", "In", "abc"), term("service", "zone", "In", "securityscan"))],
     {"nodea": ANTI, "nodeb": ANTI}),
    ("10 an existing term whose key no node has forbids nothing",
     [n("nodea", region="r1", zone="z1"), n("nodeb", region="r1", zone="z1"),
      anti(pod("e"), term("foo", "invalid-node-label", "Exists")).on("nodea"), labelled(pod("p"), foo="")],
     {"nodea": OK, "nodeb": OK}),
    ("11 existing pod's term counts only with its key",
     [*R1_Z1_Z2, anti(pod("e"), term("foo", "invalid-node-label", "Exists"), term("bar", "zone", "Exists")).on("nodea"),
      labelled(pod("p"), foo="", bar="")],
     {"nodea": EXISTING, "nodeb": OK}),
    ("12 incoming anti-affinity terms over two pods",
     [*R1_Z1_Z2, labelled(pod("e1"), foo="").on("nodea"), labelled(pod("e2"), bar="").on("nodeb"),
      anti(pod("p"), term("foo", "zone", "Exists"), term("bar", "region", "Exists"))],
     {"nodea": ANTI, "nodeb": ANTI}),
    ("13 affinity terms must be met by one pod",
     [*R1_Z1_Z2, labelled(pod("e1"), foo="").on("nodea"), labelled(pod("e2"), bar="").on("nodeb"),
      affinity(pod("p"), term("foo", "region", "Exists"), term("bar", "zone", "Exists"))],
     {"nodea": AFF, "nodeb": AFF}),
    ("14 one pod matching all terms supports the domain",
     [n("nodea", region="r1", zone="z1"), n("nodeb", region="r1", zone="z1"),
      labelled(pod("e"), foo="", bar="").on("nodea"),
      affinity(pod("p"), term("foo", "region", "Exists"), term("bar", "zone", "Exists"))],
     {"nodea": OK, "nodeb": OK}),
    ("15 existing pods' terms stay in their own namespace",
     [*NAMESPACES, *CHINA_INDIA, labelled(pod("e1", "ns-1"), foo="bar").on("nodea"),
      anti(pod("e2", "ns-2"), term("foo", "region", "In", "123")).on("nodec"),
      anti(labelled(pod("p", "ns-1"), foo="123"), term("foo", "region", "In", "bar"))],
     {"nodea": ANTI, "nodeb": ANTI, "nodec": OK}),
    ("16 a null-selector affinity term matches nothing, not even the pod",
     [*R1_Z1_Z2, labelled(pod("e"), foo="").on("nodea"), affinity(labelled(pod("p"), foo=""), {"topologyKey": "zone"})],
     {"nodea": AFF, "nodeb": AFF}),
]


@pytest.mark.parametrize(("objects", "expected"), [c[1:] for c in AFFINITY_CASES], ids=[c[0] for c in AFFINITY_CASES])
def test_inter_pod_affinity_filter(objects: list[Any], expected: dict[str, str | None]) -> None:
    assert outcomes(snapshot_of(*objects)) == expected


@pytest.mark.parametrize(("objects", "expected"), [c[1:] for c in AFFINITY_CASES], ids=[c[0] for c in AFFINITY_CASES])
def test_the_emulation_gives_the_kube_schedulers_answer(objects: list[Any], expected: dict[str, str | None]) -> None:
    assert emulated(snapshot_of(*objects), admits) == {node: why is None for node, why in expected.items()}


def group(name: str, size: int) -> list[PodBuilder]:
    """LeaderWorkerSet exclusive topology: each pod requires its group's rack and keeps other groups out."""
    key = "leaderworkerset.sigs.k8s.io/group-key"
    own = term(key, "rack", "In", name)
    others = {"labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"},
                                                     {"key": key, "operator": "NotIn", "values": [name]}]},
              "topologyKey": "rack"}
    return [affinity(labelled(pod(f"{name}-{i}"), **{key: name}), own, anti=(others,)) for i in range(size)]


RACKS = [n("r1a", rack="r1"), n("r1b", rack="r1"), n("r2a", rack="r2"), n("r2b", rack="r2")]


def test_self_affine_groups_start_with_one_pod_each() -> None:
    snap = snapshot_of(*RACKS, *group("g1", 4), *group("g2", 2))
    plan = [("default", f"g1-{i}", "r1a" if i % 2 else "r1b") for i in range(4)]
    plan += [("default", "g2-0", "r2a"), ("default", "g2-1", "r2b")]
    result = replay_plan(snap, plan[::-1])
    assert result.violations == ()
    starters = names(result.order)[:2]
    assert sorted(starters) == ["g1-0", "g2-0"]
    # a group split over two racks: the second rack has no supporter and the first pod went first
    split = [*plan[:3], ("default", "g1-3", "r2a")]
    (violation,) = replay_plan(snap, split).violations
    assert (violation.name, violation.reason) == ("g1-3", AFF)
    # two groups in one rack: the later one is kept out by the other's anti-affinity
    shared = [*plan[:4], ("default", "g2-0", "r1a"), ("default", "g2-1", "r1b")]
    assert {v.reason for v in replay_plan(snap, shared).violations} == {ANTI}


def test_a_bound_member_takes_away_the_first_pod_rule() -> None:
    snap = snapshot_of(*RACKS, *[b.on("r2a") for b in group("g1", 1)], *group("g1", 4)[1:])
    ok = [("default", "g1-1", "r2b"), ("default", "g1-2", "r2a")]
    assert replay_plan(snap, ok).violations == ()
    (violation,) = replay_plan(snap, [*ok, ("default", "g1-3", "r1a")]).violations
    assert (violation.name, violation.reason) == ("g1-3", AFF)


def test_a_free_supporter_goes_before_the_pods_that_need_it() -> None:
    zones = [n("a1", zone="a"), n("b1", zone="b")]
    web = affinity(labelled(pod("web"), app="web"), term("app", "zone", "In", "db"))
    snap = snapshot_of(*zones, web, labelled(pod("db"), app="db"))
    result = replay_plan(snap, [("default", "web", "b1"), ("default", "db", "b1")])
    assert result.violations == () and names(result.order) == ["db", "web"]
    (violation,) = replay_plan(snap, [("default", "web", "a1"), ("default", "db", "b1")]).violations
    assert (violation.name, violation.reason) == ("web", AFF)


def test_anti_affinity_between_pending_pods_is_symmetric() -> None:
    hosts = [n("h1"), n("h2")]
    carrier = anti(labelled(pod("c"), app="web"), term("app", "kubernetes.io/hostname", "In", "web"))
    snap = snapshot_of(*hosts, carrier, labelled(pod("w"), app="web"))
    assert replay_plan(snap, [("default", "c", "h1"), ("default", "w", "h2")]).violations == ()
    (violation,) = replay_plan(snap, [("default", "c", "h1"), ("default", "w", "h1")]).violations
    assert violation.reason in (ANTI, EXISTING)


def test_the_check_runs_only_where_the_profile_enables_the_rule() -> None:
    hosts = [n("h1"), n("h2")]
    carrier = anti(labelled(pod("c"), app="web"), term("app", "kubernetes.io/hostname", "In", "web"))
    snap = snapshot_of(*hosts, carrier, labelled(pod("w"), app="web"))
    together = [("default", "c", "h1"), ("default", "w", "h1")]
    assert [v.rule for v in verify(snap, together)] == ["InterPodAffinity"]
    disabled = Profile(disabled=("InterPodAffinity",))
    assert verify(snap, together, verify_settings(Configuration(), disabled)) == []


# -- the model ---------------------------------------------------------------------------

def anti_spec(selector: dict[str, str], key: str = "kubernetes.io/hostname", **extra: Any) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": selector}, "topologyKey": key, **extra}]}}


def zones_with_db(*extra: Any) -> Any:
    return snapshot_of(
        node("a1").cpu("8").memory("8Gi").label("zone", "a"), node("a2").cpu("8").memory("8Gi").label("zone", "a"),
        node("b1").cpu("1").memory("8Gi").label("zone", "b"),
        pod("db-0", "data").scheduler("x").cpu("1").label("app", "db")
        .spec("affinity", anti_spec({"app": "web"}, "zone")).on("a1"),
        *extra)


@pytest.mark.parametrize("backend", ["cpsat", "cbc"])
def test_running_pods_anti_affinity_forbids_its_zone(backend: str) -> None:
    # web pods in namespace data must stay out of zone a; zone b has room for one
    snap = zones_with_db(pod("w0", "data").cpu("1").label("app", "web"), pod("w1", "data").cpu("1").label("app", "web"),
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
    snap = zones_with_db(pod("w", "elsewhere").cpu("1").label("app", "web"))  # term scoped to namespace data
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1)).plan
    assert plan.placements[0].node in {"a1", "a2"} or plan.placements[0].node == "b1"
    assert verify(snap, [("elsewhere", "w", "a2")]) == []


def test_verifier_catches_a_placement_in_the_forbidden_domain() -> None:
    snap = zones_with_db(pod("w", "data").cpu("1").label("app", "web"))
    (violation,) = verify(snap, [("data", "w", "a2")])
    assert violation.rule == "InterPodAffinity" and "data/db-0" in violation.detail
    assert violation.detail.startswith("node(s) didn't satisfy existing pods anti-affinity rules")


def test_namespace_selector_is_evaluated_against_the_namespace_labels() -> None:
    # db-0's term reaches web pods in namespaces labelled team=a only (not every namespace)
    scoped = anti_spec({"app": "web"}, "zone", namespaceSelector={"matchLabels": {"team": "a"}})
    snap = snapshot_of(
        namespace("ours").label("team", "a"), namespace("theirs").label("team", "b"),
        node("a1").cpu("8").memory("8Gi").label("zone", "a"), node("b1").cpu("8").memory("8Gi").label("zone", "b"),
        pod("db-0", "data").scheduler("x").label("app", "db").spec("affinity", scoped).on("a1"),
        pod("w", "ours").label("app", "web"), pod("v", "theirs").label("app", "web"),
    )
    _, _, filter_plugin, _, _ = inter_pod_affinity.build(InterPodAffinityArgs(), RunContext(snap))
    allowed = {p.name: filter_plugin.filter(p, snap.nodes).tolist() for p in snap.pending}
    assert allowed == {"w": [False, True], "v": [True, True]}
    assert verify(snap, [("theirs", "v", "a1")]) == []
    (violation,) = verify(snap, [("ours", "w", "a1")])
    assert "data/db-0" in violation.detail
