"""models/plugins/volume_restrictions/: a ReadWriteOncePod claim has one user, in the model (the
first pod in queue order takes it, the others fail as the kube-scheduler leaves them) and in the
verifier's check over the plan."""

from __future__ import annotations

from tests.builders import pod, snapshot_of
from tests.models.plugins.volume_plans import EBS, cluster, plan, rules, where, why, zoned
from tests.volume_builders import claim, mounting, storage_class, volume


def test_read_write_once_pod() -> None:
    rwop = ("ReadWriteOncePod",)
    made = plan(snapshot_of(
        zoned("n1", "a"), zoned("n2", "a"), storage_class("gp3", provisioner=EBS),
        volume("pv-used", storage_class="gp3", claim_ref=("default", "used"), modes=rwop),
        claim("used", volume="pv-used", storage_class="gp3", modes=rwop), mounting(pod("holder").on("n1"), "used"),
        mounting(pod("second").cpu("1"), "used"),
        claim("fresh", storage_class="gp3", modes=rwop),
        mounting(pod("first").cpu("1").priority(5), "fresh"), mounting(pod("later").cpu("1"), "fresh")))
    assert where(made) == {"first": where(made)["first"]}
    conflict = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by "
                "another pod")
    assert why(made)["second"] == f"0/2 nodes are available: 2 {conflict}."
    assert why(made)["later"] == f"0/2 nodes are available: 2 {conflict}."



def test_read_write_once_pod_has_one_user() -> None:
    rwop = ("ReadWriteOncePod",)
    snapshot = cluster(claim("d", volume="pv", storage_class="gp3", modes=rwop),
                       volume("pv", storage_class="gp3", claim_ref=("default", "d"), modes=rwop),
                       mounting(pod("p").cpu("1"), "d"), mounting(pod("q").cpu("1"), "d"))
    assert rules(snapshot, [("p", "n1")]) == []
    assert rules(snapshot, [("p", "n1"), ("q", "n2")]) == [
        "VolumeRestrictions: ReadWriteOncePod claim d is used by pod default/p"]
    running = cluster(claim("d", volume="pv", storage_class="gp3", modes=rwop),
                      volume("pv", storage_class="gp3", claim_ref=("default", "d"), modes=rwop),
                      mounting(pod("holder").on("n1"), "d"), mounting(pod("p").cpu("1"), "d"))
    assert rules(running, [("p", "n1")]) == [
        "VolumeRestrictions: ReadWriteOncePod claim d is used by pod default/holder"]
