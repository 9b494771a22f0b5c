"""Storage objects from files and the API: claims, volumes, classes, CSI objects, pods' claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import InputError
from kubeplace.kube.files import load_snapshot
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.objects import PodVolume, Requirement, SelectorTerm
from kubeplace.kube.storage_objects import ClaimRef, CSINodeDriver
from tests.builders import node, pod, snapshot_of
from tests.kube.fake_apiserver import FakeApiServer, serving
from tests.kube.test_kube_client import write_kubeconfig
from tests.volume_builders import (
    claim,
    csi_driver,
    csi_node,
    mounting,
    storage_capacity,
    storage_class,
    volume,
)

GI = 1 << 30


def without(spec: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != key}


def test_claims_volumes_and_classes_are_read() -> None:
    snapshot = snapshot_of(
        node("n1").cpu("4"),
        mounting(pod("web-0").cpu("1"), "data-web-0", ephemeral=["scratch"]),
        claim("data-web-0", size="1.5Gi", modes=("ReadWriteOncePod",), selector={"matchLabels": {"tier": "fast"}}),
        claim("data-db-0", volume="pv-1", storage_class=None),
        volume("pv-1", size="10Gi", node="n1", claim_ref=("default", "data-db-0"), labels={"tier": "fast"},
               csi=("ebs.csi.aws.com", "vol-1")),
        storage_class("local"),
        storage_class("gp3", provisioner="ebs.csi.aws.com", wait=False, zones=("a", "b")),
        csi_node("n1", ("ebs.csi.aws.com", 25), topology_keys=("topology.ebs.csi.aws.com/zone",)),
        csi_driver("ebs.csi.aws.com", storage_capacity=True),
        storage_capacity("cap-a", "gp3", "a", "100Gi"),
        {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va-1"},
         "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv-1"}}},
    )
    (web,) = snapshot.pending
    assert web.volumes == (PodVolume("v0", "data-web-0"), PodVolume("scratch", "web-0-scratch", ephemeral=True))
    storage = snapshot.storage
    data = storage.claim("default", "data-web-0")
    assert data is not None and data.request == 3 * GI // 2 and data.storage_class == "local"
    assert data.access_modes == ("ReadWriteOncePod",) and data.selector == (Requirement("tier", "In", ("fast",)),)
    assert not data.bound and data.selected_node is None
    bound = storage.claim("default", "data-db-0")
    assert bound is not None and bound.bound and bound.volume_name == "pv-1" and bound.storage_class == ""
    pv = storage.volumes["pv-1"]
    assert pv.capacity == 10 * GI and pv.claim_ref == ClaimRef("default", "data-db-0", "uid-pvc-default-data-db-0")
    assert pv.node_affinity == (SelectorTerm((Requirement("kubernetes.io/hostname", "In", ("n1",)),)),)
    assert (pv.csi_driver, pv.csi_handle, pv.labels) == ("ebs.csi.aws.com", "vol-1", {"tier": "fast"})
    assert storage.classes["local"].binding_mode == "WaitForFirstConsumer"
    gp3 = storage.classes["gp3"]
    assert gp3.binding_mode == "Immediate" and gp3.allowed_topologies == (
        SelectorTerm((Requirement("topology.kubernetes.io/zone", "In", ("a", "b")),)),)
    assert storage.csi_nodes["n1"].drivers == (CSINodeDriver("ebs.csi.aws.com", ("topology.ebs.csi.aws.com/zone",),
                                                             25),)
    assert storage.csi_drivers["ebs.csi.aws.com"].storage_capacity
    (capacity,) = storage.capacities
    assert capacity.limit == 100 * GI and capacity.node_topology == (
        Requirement("topology.kubernetes.io/zone", "In", ("a",)),)
    (attachment,) = storage.attachments
    assert (attachment.node, attachment.attacher, attachment.volume) == ("n1", "ebs.csi.aws.com", "pv-1")
    assert snapshot.skipped_kinds == {}


def test_defaults_as_the_api_server_sets_them() -> None:
    bare_class = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"},
                  "provisioner": "x"}
    bare_claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
                  "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Ki"}}}}
    storage = snapshot_of(node("n1"), bare_class, bare_claim).storage
    assert storage.classes["s"].binding_mode == "Immediate"
    made = storage.claim("default", "c")
    assert made is not None and (made.volume_mode, made.request, made.phase) == ("Filesystem", 1024, "Pending")


def test_live_snapshot_reads_storage_as_files_do(tmp_path: Path) -> None:
    claims = [claim("data-0"), claim("data-1", volume="pv-1")]
    volumes = [volume("pv-1", node="n1", claim_ref=("default", "data-1"))]
    storage = {"/apis/storage.k8s.io/v1/storageclasses": ("StorageClassList", [storage_class("local")]),
               "/apis/storage.k8s.io/v1/csinodes": ("CSINodeList", [csi_node("n1", ("d", 3))])}
    api = FakeApiServer([node("n1").manifest()], [mounting(pod("p"), "data-0").manifest()], [])
    api.lists |= {"/api/v1/persistentvolumeclaims": ("PersistentVolumeClaimList", "v1", claims),
                 "/api/v1/persistentvolumes": ("PersistentVolumeList", "v1", volumes),
                 **{path: (kind, "storage.k8s.io/v1", items) for path, (kind, items) in storage.items()}}
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all([node("n1").manifest(), mounting(pod("p"), "data-0").manifest(), *claims,
                                        *volumes, *(item for _, items in storage.values() for item in items)]))
    with serving(api) as url:
        live = load_live_snapshot(connect(str(write_kubeconfig(tmp_path / "config", url)), None))
    assert live.storage == load_snapshot([dump]).storage
    assert sorted(live.storage.claims) == ["default/data-0", "default/data-1"] and "n1" in live.storage.csi_nodes


@pytest.mark.parametrize(("document", "problem"), [
    (claim("c", size="ten"), "PersistentVolumeClaim default/c: spec.resources.requests.storage: invalid quantity"),
    (claim("c", modes=("ReadWriteSometimes",)),
     "PersistentVolumeClaim default/c: spec.accessModes[0]: unknown access mode 'ReadWriteSometimes'"),
    ({**storage_class("s"), "volumeBindingMode": "Later"}, "StorageClass s: volumeBindingMode: unknown"),
    ({**storage_class("s"), "provisioner": ""}, "StorageClass s: provisioner: missing provisioner"),
    (volume("v", terms=[{"matchExpressions": [{"key": "zone", "operator": "Near"}]}]),
     "PersistentVolume v: spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator: unknown"),
    ({**volume("v"), "spec": {**without(volume("v")["spec"], "nfs"), "local": {"path": "/mnt/v"}}},
     "PersistentVolume v: spec.nodeAffinity.required: a local volume has no node affinity"),
    ({**volume("v"), "spec": {**volume("v")["spec"], "csi": {"driver": "d", "volumeHandle": "h"}}},
     "PersistentVolume v: spec.csi: may not specify more than 1 volume type (nfs is set too)"),
    ({**volume("v"), "spec": without(volume("v")["spec"], "nfs")}, "PersistentVolume v: spec: no volume source"),
    ({**volume("v"), "spec": without(volume("v")["spec"], "accessModes")},
     "PersistentVolume v: spec.accessModes: at least 1 access mode is required"),
    ({**claim("c"), "spec": without(claim("c")["spec"], "resources")},
     "PersistentVolumeClaim default/c: spec.resources.requests.storage: missing storage request"),
    ({**claim("c"), "spec": {**claim("c")["spec"], "resources": {"requests": {"cpu": "1"}}}},
     "PersistentVolumeClaim default/c: spec.resources.requests.storage: missing storage request"),
    (claim("c", modes=()), "PersistentVolumeClaim default/c: spec.accessModes: at least 1 access mode is required"),
    (csi_node("n1", ("d", -1)), "CSINode n1: spec.drivers[0].allocatable.count: -1 is not a count"),
    (mounting(pod("p"), "").manifest(), "Pod default/p: spec.volumes[0].persistentVolumeClaim.claimName: missing"),
])  # fmt: skip
def test_bad_storage_objects_name_file_object_and_field(tmp_path: Path, document: Any, problem: str) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text(yaml.safe_dump_all([node("n1").manifest(), document]))
    with pytest.raises(InputError) as caught:
        load_snapshot([file])
    assert str(caught.value).startswith(f"{file}: {problem}")
    result = CliRunner().invoke(main, ["plan", str(file)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().count("\n") == 0 and problem in result.stderr and "Traceback" not in result.stderr


def test_duplicate_claims_are_refused(tmp_path: Path) -> None:
    file = tmp_path / "dup.yaml"
    file.write_text(yaml.safe_dump_all([claim("c"), claim("c")]))
    with pytest.raises(InputError, match="PersistentVolumeClaim default/c: duplicate PersistentVolumeClaim"):
        load_snapshot([file])
