"""models/plugins/node_volume_limits/: a node attaches at most its CSINode's count of a driver's
volumes, counting what it has attached (running pods' volumes, VolumeAttachments), in the model
and in the verifier's check over the plan."""

from __future__ import annotations

from tests.builders import pod, snapshot_of
from tests.models.plugins.volume_plans import EBS, cluster, plan, rules, where, why, zoned
from tests.volume_builders import claim, csi_node, mounting, storage_class, volume


def test_attachable_volume_limits_count_what_the_node_has_attached() -> None:
    made = plan(snapshot_of(
        zoned("n1", "a", cpu="16"), zoned("n2", "a", cpu="2"), storage_class("gp3", provisioner=EBS),
        csi_node("n1", (EBS, 3)), csi_node("n2", (EBS, 10)),
        volume("pv-run", storage_class="gp3", claim_ref=("default", "run"), csi=(EBS, "vol-run")),
        claim("run", volume="pv-run", storage_class="gp3"), mounting(pod("running").on("n1"), "run"),
        volume("pv-old", storage_class="gp3", claim_ref=("default", "old"), csi=(EBS, "vol-old")),
        {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va"},
         "spec": {"attacher": EBS, "nodeName": "n1", "source": {"persistentVolumeName": "pv-old"}}},
        *(claim(f"data-{i}", storage_class="gp3") for i in range(4)),
        *(mounting(pod(f"web-{i}").cpu("1"), f"data-{i}") for i in range(4))))
    assert sorted(where(made).values()) == ["n1", "n2", "n2"]  # n1: 3 - (1 running + 1 attachment) = 1 more
    assert list(why(made).values()) == ["0/2 nodes are available: 1 Insufficient cpu, "
                                        "1 node(s) exceed max volume count."]


def test_attachable_volume_limits() -> None:
    snapshot = cluster(csi_node("n2", (EBS, 2)),
                       volume("pv-run", storage_class="gp3", claim_ref=("default", "run"), csi=(EBS, "h-run")),
                       claim("run", volume="pv-run", storage_class="gp3"), mounting(pod("running").on("n2"), "run"),
                       claim("a", storage_class="gp3"), claim("b", storage_class="gp3"),
                       mounting(pod("p").cpu("1"), "a"), mounting(pod("q").cpu("1"), "b"),
                       mounting(pod("shares").cpu("1"), "run"))
    assert rules(snapshot, [("p", "n2"), ("shares", "n2")]) == []  # the shared volume is attached already
    assert rules(snapshot, [("p", "n2"), ("q", "n2")]) == ["NodeVolumeLimits: 3 volumes of ebs.csi.aws.com on the "
                                                           "node, limit 2"]


def test_a_volume_two_placed_pods_share_is_counted_once_per_node() -> None:
    """As the kube-scheduler counts unique volumes per node (nodevolumelimits/csi.go keys them by
    driver and handle): pods of the batch that share a claim (bound or not yet) attach it once,
    so a node with room for one volume takes all of them, as the second pod finds it attached."""
    for bound in (True, False):
        objects = [volume("pv-shared", storage_class="gp3", claim_ref=("default", "shared"), csi=(EBS, "vol-s")),
                   claim("shared", volume="pv-shared", storage_class="gp3")] if bound else [
                       claim("shared", storage_class="gp3")]
        made = plan(snapshot_of(
            zoned("n1", "b", cpu="8"), storage_class("gp3", provisioner=EBS), csi_node("n1", (EBS, 1)), *objects,
            *(mounting(pod(f"web-{i}").cpu("1"), "shared") for i in range(3))))
        assert where(made) == {f"web-{i}": "n1" for i in range(3)}, (bound, why(made))
