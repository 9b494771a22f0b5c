"""models/plugins/node_volume_limits/: a node attaches at most its CSINode's count of a driver's
volumes, counting what it has attached (running pods' volumes, VolumeAttachments), in the model
and in the verifier's check over the plan."""

from __future__ import annotations

from typing import Any

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


def in_tree(name: str, source: dict[str, Any], zone: str = "") -> dict[str, Any]:
    """A PersistentVolume of an in-tree plugin bound to claim ``name``."""
    pv = volume(f"pv-{name}", storage_class="", claim_ref=("default", name),
                labels={"topology.kubernetes.io/zone": zone} if zone else None)
    pv["spec"].pop("nfs", None)
    pv["spec"].update(source)
    return pv


def test_in_tree_volumes_count_as_their_csi_driver_s() -> None:
    """The kube-scheduler counts a volume of an in-tree plugin it migrates (AWS EBS here: its
    translation to ebs.csi.aws.com, the handle without the aws:// prefix) against the CSI driver's
    limit, bound or provisioned by an in-tree class; an Azure disk of the default kind (Shared) is
    not translated, so not counted."""
    objects = [
        zoned("n1", "b", cpu="8"), storage_class("old", provisioner="kubernetes.io/aws-ebs"),
        csi_node("n1", (EBS, 2)),
        in_tree("a", {"awsElasticBlockStore": {"volumeID": "aws://zone-b/vol-0a"}}), claim("a", volume="pv-a"),
        in_tree("b", {"awsElasticBlockStore": {"volumeID": "vol-0b"}}), claim("b", volume="pv-b"),
        claim("c", storage_class="old"),
        in_tree("d", {"azureDisk": {"diskName": "d", "diskURI": "https://x.blob.core.windows.net/vhds/d.vhd"}}),
        claim("d", volume="pv-d"),
        *(mounting(pod(f"web-{k}").cpu("1"), k) for k in "abcd")]
    made = plan(snapshot_of(*objects))
    placed = set(where(made))
    assert "web-d" in placed and len(placed & {"web-a", "web-b", "web-c"}) == 2, why(made)
    assert "1 node(s) exceed max volume count" in " ".join(why(made).values())
    assert rules(snapshot_of(*objects), [("web-a", "n1"), ("web-b", "n1"), ("web-c", "n1")]) == [
        "NodeVolumeLimits: 3 volumes of ebs.csi.aws.com on the node, limit 2"]


def test_in_tree_sources_translate_as_csi_translation_lib_does() -> None:
    from kubeplace.kube.storage import _migrated

    gce = {"gcePersistentDisk": {"pdName": "d1"}}
    zone, beta = "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"
    assert _migrated(gce, {zone: "europe-west1-b"}) == ("pd.csi.storage.gke.io",
                                                        "projects/UNSPECIFIED/zones/europe-west1-b/disks/d1")
    assert _migrated(gce, {beta: "us-central1-a__us-central1-b"}) == (
        "pd.csi.storage.gke.io", "projects/UNSPECIFIED/regions/us-central1/disks/d1")
    assert _migrated(gce, {beta: "us-central1-a__europe-west1-b"}) == ("", "")  # no region: not translated
    assert _migrated(gce, {}) == ("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d1")
    assert _migrated({"azureDisk": {"diskName": "d", "diskURI": "/subscriptions/s/d", "kind": "Managed"}}, {}) == (
        "disk.csi.azure.com", "/subscriptions/s/d")
    assert _migrated({"cinder": {"volumeID": "v1"}}, {}) == ("cinder.csi.openstack.org", "v1")
    assert _migrated({"portworxVolume": {"volumeID": "p1"}}, {}) == ("pxd.portworx.com", "p1")
    assert _migrated({"nfs": {"server": "s", "path": "/"}}, {}) == ("", "")


def test_an_in_tree_source_without_its_volume_is_refused_as_the_api_server_refuses_it() -> None:
    import pytest

    from kubeplace.kube.errors import InputError
    from kubeplace.kube.storage import _migrated

    for source, key in (("awsElasticBlockStore", "volumeID"), ("gcePersistentDisk", "pdName"),
                        ("azureDisk", "diskURI"), ("cinder", "volumeID"), ("portworxVolume", "volumeID")):
        with pytest.raises(InputError, match=f"spec.{source}.{key}"):
            _migrated({source: {}}, {})
