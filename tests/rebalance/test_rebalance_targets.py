"""Rebalance targets: parsed with their expiry, one pod per move, the pod's own rules kept."""

from __future__ import annotations

import datetime
import json

from kubeplace.kube.parse import parse_pod
from kubeplace.rebalance.targets import Target, parse_targets, pinned_to, steer
from tests.builders import pod

NOW = datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)


def test_targets_expire_and_bad_data_is_none() -> None:
    data = {"expires": "2026-12-02T01:00:00.000000Z",
            "targets.json": json.dumps([{"namespace": "a", "owner": "ReplicaSet/r", "to": "n2"}])}
    assert parse_targets(data, NOW) == [Target("a", "ReplicaSet/r", "n2")]
    assert parse_targets(data, NOW + datetime.timedelta(hours=2)) == []
    assert parse_targets({"expires": "soon", "targets.json": "[]"}, NOW) == []
    assert parse_targets(None, NOW) == []


def test_one_pod_per_move_oldest_first() -> None:
    pods = [pod(f"r-{i}").owner("ReplicaSet", "r").created(f"2026-01-0{i + 1}T00:00:00Z").manifest()
            for i in range(3)]
    out = steer(pods, [Target("default", "ReplicaSet/r", "n2")], "kubeplace")
    pinned = [parse_pod(o).required_terms for o in out]
    assert pinned[0] is not None and pinned[1] is None and pinned[2] is None


def test_the_pin_adds_to_every_term_and_keeps_empty_ones_empty() -> None:
    raw = pod("p").require("zone", "In", "a").or_term().require("zone", "In", "b").manifest()
    terms = parse_pod(pinned_to(raw, "n2")).required_terms
    assert terms is not None and len(terms) == 2
    assert all(t.match_fields[0].values == ("n2",) and t.match_expressions for t in terms)
