"""models/plugins/volume_zone/: a bound volume's zone labels must list the node's zone, on nodes
that have zone labels, in the model and in the verifier's check over the plan."""

from __future__ import annotations

from tests.builders import node, pod, snapshot_of
from tests.models.plugins.volume_plans import ZONE, cluster, plan, rules, where, why, zoned
from tests.volume_builders import claim, mounting, storage_class, volume


def test_volume_zone_labels_of_a_bound_volume() -> None:
    pv = volume("pv-1", storage_class="gp3", claim_ref=("default", "data"), labels={ZONE: "a__c"})
    pv["spec"].pop("nodeAffinity", None)
    made = plan(snapshot_of(zoned("n1", "a", cpu="2"), zoned("n2", "b"), node("plain").cpu("1"),
                            storage_class("gp3"), pv,
                            claim("data", volume="pv-1", storage_class="gp3"),
                            *(mounting(pod(f"db-{i}").cpu("1"), "data") for i in range(3))))
    assert sorted(where(made).values()) == ["n1", "n1", "plain"]  # a node without zone labels is not checked
    assert why(made) == {}
    blocked = plan(snapshot_of(zoned("n2", "b"), storage_class("gp3"), pv, claim("data", volume="pv-1",
                                                                                  storage_class="gp3"),
                               mounting(pod("db").cpu("1"), "data")))
    assert why(blocked) == {"db": "0/1 nodes are available: 1 node(s) had no available volume zone."}


def test_bound_volume_must_admit_the_node() -> None:
    snapshot = cluster(volume("pv", zone="a", storage_class="gp3", claim_ref=("default", "d"), labels={ZONE: "a"}),
                       claim("d", volume="pv", storage_class="gp3"), mounting(pod("p").cpu("1"), "d"))
    assert rules(snapshot, [("p", "n1")]) == []
    assert rules(snapshot, [("p", "n2")]) == [
        "VolumeBinding: volume pv of claim d: its node affinity excludes the node",
        "VolumeZone: volume pv is in topology.kubernetes.io/zone=a, the node in b"]
