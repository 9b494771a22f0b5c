"""PodTopologySpread's verifier check (``models/plugins/topology_spread/verify.py``) in the
plan's replay: the kube-scheduler's filter cases (its filtering_test.go), whole plans replayed
level by level in an order the replay finds itself, and the check running only where the profile
enables the rule."""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.models.config import Configuration, Profile
from kubeplace.models.plugins.topology_spread.emulate import admits
from kubeplace.models.plugins.topology_spread.verify import SPREAD_MISMATCH, SPREAD_MISSING_LABEL
from kubeplace.plan.checks import verify_settings
from kubeplace.plan.verify import replay_plan, verify
from tests.builders import NodeBuilder, PodBuilder, pod, snapshot_of
from tests.replay_builders import OK, emulated, labelled, n, names, outcomes

SPREAD, LABEL = SPREAD_MISMATCH, SPREAD_MISSING_LABEL


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


@pytest.mark.parametrize(("objects", "expected"), [c[1:] for c in SPREAD_CASES], ids=[c[0] for c in SPREAD_CASES])
def test_the_emulation_gives_the_kube_schedulers_answer(objects: list[Any], expected: dict[str, str | None]) -> None:
    assert emulated(snapshot_of(*objects), admits) == {node: why is None for node, why in expected.items()}


# -- whole plans: the verifier finds the order itself ------------------------------------

def test_28_no_order_exists_for_zone_and_host_spread_together() -> None:
    # zones A = {h1}, B = {h2, h3, h4}; 5 pods spread over zone and host, maxSkew 1 each;
    # h1 = 2 and h2 = h3 = h4 = 1 satisfies each constraint alone, yet no order replays it
    hosts = [n("h1", zone="A"), n("h2", zone="B"), n("h3", zone="B"), n("h4", zone="B")]
    both = [c(1, "zone"), c(1, "kubernetes.io/hostname")]
    pods = [labelled(pod(f"p{i}"), foo="").spec("topologySpreadConstraints", both) for i in range(5)]
    snap = snapshot_of(*hosts, *pods)
    plan = [("default", "p0", "h1"), ("default", "p1", "h1"), ("default", "p2", "h2"), ("default", "p3", "h3"),
            ("default", "p4", "h4")]
    result = replay_plan(snap, plan)
    assert result.violations and {v.reason for v in result.violations} == {SPREAD}
    assert len(result.order) == 5
    # one pod on each of h3, h2, h1 (zones 1/2) replays, whatever order the plan lists
    one_each = [("default", "p0", "h3"), ("default", "p1", "h2"), ("default", "p2", "h1")]
    assert replay_plan(snap, one_each).violations == ()


def test_29_water_filling_replays_bound_5_0_to_6_5() -> None:
    zones = [n("a1", zone="a"), n("b1", zone="b")]
    bound = [labelled(pod(f"old{i}"), foo="").on("a1") for i in range(5)]
    pending = [labelled(pod(f"new{i}"), foo="").spec("topologySpreadConstraints", [c(1, "zone")]) for i in range(6)]
    snap = snapshot_of(*zones, *bound, *pending)
    plan = [("default", "new0", "a1"), *(("default", f"new{i}", "b1") for i in range(1, 6))]
    result = replay_plan(snap, plan)
    assert result.violations == ()
    assert names(result.order) == ["new1", "new2", "new3", "new4", "new5", "new0"]  # 5/0 -> 5/5 -> 6/5
    # two more in zone a can never replay: 7/5 has skew 2 whatever the order
    worse = [("default", "new0", "a1"), ("default", "new1", "a1"), *(("default", f"new{i}", "b1") for i in range(2, 6))]
    assert [(v.name, v.reason) for v in replay_plan(snap, worse).violations] == [("new0", SPREAD), ("new1", SPREAD)]


def test_verify_reports_domain_violations_with_the_rest() -> None:
    snap = snapshot_of(*ZONES, *on("a2 b1 y3"), spread(c(1, "node")))
    (spread_violation, *_) = [v for v in verify(snap, [("default", "p", "node-a")]) if v.rule == "PodTopologySpread"]
    assert spread_violation.detail.startswith(SPREAD)
    assert verify(snap, [("default", "p", "node-x")]) == []  # the pod's spread rule is modelled, not left


def test_spread_pods_replay_level_by_level() -> None:
    zones = [n("a1", zone="a"), n("b1", zone="b")]
    pending = [labelled(pod(f"p{i}"), foo="").spec("topologySpreadConstraints", [c(1, "zone")]) for i in range(6)]
    plan = [("default", f"p{i}", "a1" if i < 3 else "b1") for i in range(6)]
    result = replay_plan(snapshot_of(*zones, *pending), plan)
    assert result.violations == ()
    assert names(result.order) == ["p0", "p3", "p1", "p4", "p2", "p5"]


def test_the_check_runs_only_where_the_profile_enables_the_rule() -> None:
    snap = snapshot_of(*ZONES, *on("a2 b1 y3"), spread(c(1, "node")))
    assert [v.rule for v in verify(snap, [("default", "p", "node-a")])] == ["PodTopologySpread"]
    disabled = Profile(disabled=("PodTopologySpread",))
    assert verify(snap, [("default", "p", "node-a")], verify_settings(Configuration(), disabled)) == []
