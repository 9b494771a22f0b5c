"""plan.verify_domains: InterPodAffinity and PodTopologySpread replayed as the kube-scheduler
filters them (cases from its filtering_test.go, design-12 section 6), and whole plans replayed
in an order the verifier finds itself."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.objects import Snapshot
from kubeplace.plan.verify import verify
from kubeplace.plan.verify_domains import (
    AFFINITY_MISMATCH,
    ANTI_AFFINITY_MISMATCH,
    EXISTING_ANTI_AFFINITY_MISMATCH,
    SPREAD_MISMATCH,
    SPREAD_MISSING_LABEL,
    replay,
)
from tests.builders import NodeBuilder, PodBuilder, namespace, node, pod, snapshot_of

AFF, ANTI, EXISTING = AFFINITY_MISMATCH, ANTI_AFFINITY_MISMATCH, EXISTING_ANTI_AFFINITY_MISMATCH
SPREAD, LABEL = SPREAD_MISMATCH, SPREAD_MISSING_LABEL
OK = None
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def outcomes(snapshot: Snapshot, name: str = "p") -> dict[str, str | None]:
    """The incoming pod placed alone on each node in turn: None, or the kube-scheduler's reason."""
    (incoming,) = [p for p in snapshot.pending if p.name == name]
    out: dict[str, str | None] = {}
    for n in snapshot.nodes:
        result = replay(snapshot, [(incoming.namespace, name, n.name)])
        out[n.name] = result.violations[0].reason if result.violations else None
    return out


def n(name: str, **labels: str) -> NodeBuilder:
    built = node(name).cpu("8").memory("8Gi")
    for key, value in labels.items():
        built = built.label(key, value)
    return built


def labelled(builder: PodBuilder, **labels: str) -> PodBuilder:
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder


def term(key: str, topology: str, operator: str = "In", *values: str, **extra: Any) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"labelSelector": {"matchExpressions": [expression]}, "topologyKey": topology, **extra}


def affinity(builder: PodBuilder, *terms: dict[str, Any], anti: tuple[dict[str, Any], ...] = ()) -> PodBuilder:
    rules: dict[str, Any] = {}
    if terms:
        rules["podAffinity"] = {REQ: list(terms)}
    if anti:
        rules["podAntiAffinity"] = {REQ: list(anti)}
    return builder.spec("affinity", rules)


def anti(builder: PodBuilder, *terms: dict[str, Any]) -> PodBuilder:
    return affinity(builder, anti=terms)


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


FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
ZONES = (n("node-a", zone="zone1", node="node-a"), n("node-b", zone="zone1", node="node-b"),
         n("node-x", zone="zone2", node="node-x"), n("node-y", zone="zone2", node="node-y"))


def c(max_skew: int, key: str, selector: Any = FOO, **extra: Any) -> dict[str, Any]:
    out = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", **extra}
    if selector is not None:
        out["labelSelector"] = selector
    return out


def spread(*constraints: dict[str, Any], ns: str = "default", **labels: str) -> PodBuilder:
    return labelled(pod("p", ns), **(labels or {"foo": ""})).spec("topologySpreadConstraints", list(constraints))


def on(spec: str, ns: str = "default", **labels: str) -> list[PodBuilder]:
    """Existing pods: ``a2 b1`` puts two on node-a and one on node-b."""
    out = []
    for part in spec.split():
        for i in range(int(part[1:])):
            name = "-".join([f"e-{part[0]}{i}", *filter(None, labels.values())])  # a name the API server takes
            out.append(labelled(pod(name, ns), **(labels or {"foo": ""})).on(f"node-{part[0]}"))
    return out


def nodes_with(**overrides: dict[str, str]) -> list[NodeBuilder]:
    """The four zone nodes, with other labels for some: ``b={"zon": "zone1", "node": "node-b"}``."""
    out = []
    for builder in ZONES:
        name = builder.manifest()["metadata"]["name"]
        labels = overrides.get(name.removeprefix("node-"))
        out.append(builder if labels is None else n(name, **labels))
    return out


ALL_OK = {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}
ABC = (n("node-a", node="node-a"), n("node-b", node="node-b"), n("node-c", node="node-c"))
TAINTED_Y = n("node-y", node="node-y").taint("t", effect="NoSchedule")
FOO_NODES = (n("node-a", node="node-a", foo=""), n("node-b", node="node-b", foo=""), n("node-x", node="node-x", foo=""))

SPREAD_CASES = [
    ("17a no existing pods", [*ZONES, spread(c(1, "zone"))], ALL_OK),
    ("17b no existing pods, the pod does not match itself", [*ZONES, spread(c(1, "zone", BAR))], ALL_OK),
    ("18 pods of other namespaces do not count",
     [*ZONES, *on("a1", "ns1"), *on("a1", "ns2"), *on("x1 y1"), spread(c(1, "zone"))],
     {"node-a": OK, "node-b": OK, "node-x": SPREAD, "node-y": SPREAD}),
    ("19 a null selector counts nothing", [*ZONES, *on("x1 y1"), spread(c(1, "zone", None))], ALL_OK),
    ("19b an empty selector {} counts nothing, yet matches the pod itself",
     [*ZONES, *on("x1 y1"), spread(c(1, "zone", {}))], ALL_OK),
    ("20 a node without the key: missing label, its pods not counted",
     [*nodes_with(b={"zon": "zone1", "node": "node-b"}), *on("a1 b1 x1 y1"), spread(c(1, "zone"))],
     {"node-a": OK, "node-b": LABEL, "node-x": SPREAD, "node-y": SPREAD}),
    ("21a hostname-like key, 2/1/0/3, maxSkew 1", [*ZONES, *on("a2 b1 y3"), spread(c(1, "node"))],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": OK, "node-y": SPREAD}),
    ("21b maxSkew 2", [*ZONES, *on("a2 b1 y3"), spread(c(2, "node"))],
     {"node-a": SPREAD, "node-b": OK, "node-x": OK, "node-y": SPREAD}),
    ("21c the pod does not match itself", [*ZONES, *on("a2 b1 y3"), spread(c(1, "node"), bar="")],
     {"node-a": SPREAD, "node-b": OK, "node-x": OK, "node-y": SPREAD}),
    ("22 terminating pods are not counted",
     [n("node-a", node="node-a"), n("node-b", node="node-b"), on("a1")[0].deleting(), *on("b1"), spread(c(1, "node"))],
     {"node-a": OK, "node-b": SPREAD}),
    ("23a fewer domains than minDomains: the minimum is 0",
     [*ABC, *on("a2 b2 c1"), spread(c(2, "node", minDomains=4))], {"node-a": SPREAD, "node-b": SPREAD, "node-c": OK}),
    ("23b enough domains", [*ABC, *on("a2 b2 c1"), spread(c(2, "node", minDomains=2))],
     {"node-a": OK, "node-b": OK, "node-c": OK}),
    ("23c zones 2/1, minDomains 3", [*ZONES, *on("a1 b1 y1"), spread(c(2, "zone", minDomains=3))],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": OK, "node-y": OK}),
    ("23d zones 2/1, minDomains 1", [*ZONES, *on("a1 b1 y1"), spread(c(2, "zone", minDomains=1))], ALL_OK),
    ("24a nodeAffinityPolicy Honor leaves out nodes the pod cannot use",
     [*FOO_NODES, n("node-y", node="node-y"), *on("a1 b1 y1"), spread(c(1, "node")).selector("foo", "")],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": OK, "node-y": OK}),
    ("24b nodeAffinityPolicy Ignore counts them",
     [*FOO_NODES, n("node-y", node="node-y"), *on("a1 b1 y1"),
      spread(c(1, "node", nodeAffinityPolicy="Ignore")).selector("foo", "")],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": OK, "node-y": SPREAD}),
    ("25a nodeTaintsPolicy Honor leaves out untolerated tainted nodes",
     [*FOO_NODES, TAINTED_Y, *on("a1 b1 y1"), spread(c(1, "node", nodeTaintsPolicy="Honor"))],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": OK, "node-y": OK}),
    ("25b nodeTaintsPolicy Ignore (the default) counts them",
     [*FOO_NODES, TAINTED_Y, *on("a1 b1 y1"), spread(c(1, "node"))],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": OK, "node-y": SPREAD}),
    ("26a zone and node, [3/3, 2/1/0/3]", [*ZONES, *on("a2 b1 y3"), spread(c(1, "zone"), c(1, "node"))],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": OK, "node-y": SPREAD}),
    ("26b zone and node, [3/4, 2/1/0/4]", [*ZONES, *on("a2 b1 y4"), spread(c(1, "zone"), c(1, "node"))],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": SPREAD, "node-y": SPREAD}),
    ("26c node-x without the node key, [1/1, 1/0/0/1]",
     [*nodes_with(x={"zone": "zone2"}), *on("a1 y1"), spread(c(1, "zone"), c(1, "node"))],
     {"node-a": SPREAD, "node-b": OK, "node-x": LABEL, "node-y": SPREAD}),
    ("26d a node lacking one hard key is not eligible for the other constraint either",
     [*nodes_with(x={"zone": "zone2"}), *on("a1 x2"), spread(c(1, "zone"), c(5, "node"))],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": LABEL, "node-y": OK}),
    ("27 matchLabelKeys turn {} into the pod's own value",
     [*ZONES, *on("a2 b1 y2", foo="a"), *on("x2", foo="b"),
      spread(c(1, "zone", {}, matchLabelKeys=["foo"]), foo="a")],
     {"node-a": SPREAD, "node-b": SPREAD, "node-x": OK, "node-y": OK}),
]


@pytest.mark.parametrize(("objects", "expected"), [c[1:] for c in SPREAD_CASES], ids=[c[0] for c in SPREAD_CASES])
def test_pod_topology_spread_filter(objects: list[Any], expected: dict[str, str | None]) -> None:
    assert outcomes(snapshot_of(*objects)) == expected


# -- whole plans: the verifier finds the order itself ------------------------------------

def names(order: tuple[tuple[str, str, str], ...]) -> list[str]:
    return [name for _, name, _ in order]


def test_28_no_order_exists_for_zone_and_host_spread_together() -> None:
    # zones A = {h1}, B = {h2, h3, h4}; 5 pods spread over zone and host, maxSkew 1 each;
    # h1 = 2 and h2 = h3 = h4 = 1 satisfies each constraint alone, yet no order replays it
    hosts = [n("h1", zone="A"), n("h2", zone="B"), n("h3", zone="B"), n("h4", zone="B")]
    both = [c(1, "zone"), c(1, "kubernetes.io/hostname")]
    pods = [labelled(pod(f"p{i}"), foo="").spec("topologySpreadConstraints", both) for i in range(5)]
    snap = snapshot_of(*hosts, *pods)
    plan = [("default", "p0", "h1"), ("default", "p1", "h1"), ("default", "p2", "h2"), ("default", "p3", "h3"),
            ("default", "p4", "h4")]
    result = replay(snap, plan)
    assert result.violations and {v.reason for v in result.violations} == {SPREAD}
    assert len(result.order) == 5
    # one pod on each of h3, h2, h1 (zones 1/2) replays, whatever order the plan lists
    assert replay(snap, [("default", "p0", "h3"), ("default", "p1", "h2"), ("default", "p2", "h1")]).violations == ()


def test_29_water_filling_replays_bound_5_0_to_6_5() -> None:
    zones = [n("a1", zone="a"), n("b1", zone="b")]
    bound = [labelled(pod(f"old{i}"), foo="").on("a1") for i in range(5)]
    pending = [labelled(pod(f"new{i}"), foo="").spec("topologySpreadConstraints", [c(1, "zone")]) for i in range(6)]
    snap = snapshot_of(*zones, *bound, *pending)
    plan = [("default", "new0", "a1"), *(("default", f"new{i}", "b1") for i in range(1, 6))]
    result = replay(snap, plan)
    assert result.violations == ()
    assert names(result.order) == ["new1", "new2", "new3", "new4", "new5", "new0"]  # 5/0 -> 5/5 -> 6/5
    # two more in zone a can never replay: 7/5 has skew 2 whatever the order
    worse = [("default", "new0", "a1"), ("default", "new1", "a1"), *(("default", f"new{i}", "b1") for i in range(2, 6))]
    assert [(v.name, v.reason) for v in replay(snap, worse).violations] == [("new0", SPREAD), ("new1", SPREAD)]


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
    result = replay(snap, plan[::-1])
    assert result.violations == ()
    starters = names(result.order)[:2]
    assert sorted(starters) == ["g1-0", "g2-0"]
    # a group split over two racks: the second rack has no supporter and the first pod went first
    split = [*plan[:3], ("default", "g1-3", "r2a")]
    (violation,) = replay(snap, split).violations
    assert (violation.name, violation.reason) == ("g1-3", AFF)
    # two groups in one rack: the later one is kept out by the other's anti-affinity
    shared = [*plan[:4], ("default", "g2-0", "r1a"), ("default", "g2-1", "r1b")]
    assert {v.reason for v in replay(snap, shared).violations} == {ANTI}


def test_a_bound_member_takes_away_the_first_pod_rule() -> None:
    snap = snapshot_of(*RACKS, *[b.on("r2a") for b in group("g1", 1)], *group("g1", 4)[1:])
    ok = [("default", "g1-1", "r2b"), ("default", "g1-2", "r2a")]
    assert replay(snap, ok).violations == ()
    (violation,) = replay(snap, [*ok, ("default", "g1-3", "r1a")]).violations
    assert (violation.name, violation.reason) == ("g1-3", AFF)


def test_a_free_supporter_goes_before_the_pods_that_need_it() -> None:
    zones = [n("a1", zone="a"), n("b1", zone="b")]
    web = affinity(labelled(pod("web"), app="web"), term("app", "zone", "In", "db"))
    snap = snapshot_of(*zones, web, labelled(pod("db"), app="db"))
    result = replay(snap, [("default", "web", "b1"), ("default", "db", "b1")])
    assert result.violations == () and names(result.order) == ["db", "web"]
    (violation,) = replay(snap, [("default", "web", "a1"), ("default", "db", "b1")]).violations
    assert (violation.name, violation.reason) == ("web", AFF)


def test_anti_affinity_between_pending_pods_is_symmetric() -> None:
    hosts = [n("h1"), n("h2")]
    carrier = anti(labelled(pod("c"), app="web"), term("app", "kubernetes.io/hostname", "In", "web"))
    snap = snapshot_of(*hosts, carrier, labelled(pod("w"), app="web"))
    assert replay(snap, [("default", "c", "h1"), ("default", "w", "h2")]).violations == ()
    (violation,) = replay(snap, [("default", "c", "h1"), ("default", "w", "h1")]).violations
    assert violation.reason in (ANTI, EXISTING)


def test_verify_reports_domain_violations_with_the_rest() -> None:
    snap = snapshot_of(*ZONES, *on("a2 b1 y3"), spread(c(1, "node")))
    (spread_violation, *_) = [v for v in verify(snap, [("default", "p", "node-a")]) if v.rule == "PodTopologySpread"]
    assert spread_violation.detail.startswith(SPREAD)
    assert verify(snap, [("default", "p", "node-x")]) == []  # the pod's spread rule is modelled, not left


def test_unknown_and_duplicate_placements_are_left_to_verify() -> None:
    snap = snapshot_of(*ZONES, spread(c(1, "zone")))
    plan = [("default", "p", "node-a"), ("default", "p", "node-x"), ("default", "ghost", "node-a"),
            ("default", "p", "nowhere")]
    result = replay(snap, plan)
    assert result.violations == () and result.order == tuple(plan)


def test_spread_pods_replay_level_by_level() -> None:
    zones = [n("a1", zone="a"), n("b1", zone="b")]
    pending = [labelled(pod(f"p{i}"), foo="").spec("topologySpreadConstraints", [c(1, "zone")]) for i in range(6)]
    plan = [("default", f"p{i}", "a1" if i < 3 else "b1") for i in range(6)]
    result = replay(snapshot_of(*zones, *pending), plan)
    assert result.violations == ()
    assert names(result.order) == ["p0", "p3", "p1", "p4", "p2", "p5"]
