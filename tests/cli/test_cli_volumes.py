"""`kubeplace plan` with volumes: the volumes chosen are in the plan, and read back from a plan file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import InputError
from kubeplace.kube.storage_objects import ClaimChoice
from kubeplace.plan.plan import placements_from_dict
from tests.builders import node, pod
from tests.volume_builders import claim, mounting, storage_class, volume


def cluster(tmp_path: Path) -> Path:
    file = tmp_path / "cluster.yaml"
    file.write_text(yaml.safe_dump_all([
        node("n1").cpu("4").memory("4Gi").manifest(), storage_class("local"),
        storage_class("gp3", provisioner="ebs.csi.aws.com"), volume("pv-1", node="n1"),
        claim("data"), claim("scratch", storage_class="gp3"),
        mounting(pod("db").cpu("1"), "data", "scratch").manifest()]))
    return file


def test_the_plan_names_the_volume_of_each_unbound_claim(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["plan", str(cluster(tmp_path)), "-o", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    (placement,) = doc["placements"]
    assert placement["volumes"] == [{"claim": "data", "volume": "pv-1"}, {"claim": "scratch", "provision": True}]
    assert placements_from_dict(doc, "plan.json")[0].volumes == (ClaimChoice("data", "pv-1"), ClaimChoice("scratch"))
    wide = CliRunner().invoke(main, ["plan", str(cluster(tmp_path)), "-o", "wide"])
    assert "data=pv-1, scratch=(provision)" in wide.stdout


@pytest.mark.parametrize("entry", [{"claim": "d"}, {"claim": "d", "volume": "pv", "provision": True}, {"volume": "pv"},
                                   "d"])
def test_a_plan_files_volumes_are_checked(entry: object) -> None:
    doc = {"kind": "PlacementPlan", "placements": [{"namespace": "default", "name": "p", "node": "n1",
                                                    "volumes": [entry]}]}
    with pytest.raises(InputError, match=r"plan.yaml: placements\[0\].volumes\[0\]: expected"):
        placements_from_dict(doc, "plan.yaml")


def test_bind_dry_run_sends_the_volume_writes_as_dry_runs_too(tmp_path: Path) -> None:
    from tests.kube.fake_apiserver import FakeApiServer, serving
    from tests.kube.test_kube_client import write_kubeconfig

    claims = [claim("data"), claim("scratch", storage_class="gp3")]
    volumes = [volume("pv-1", node="n1")]
    api = FakeApiServer([node("n1").cpu("4").memory("4Gi").manifest()],
                        [mounting(pod("db").cpu("1"), "data", "scratch").manifest()], [])
    api.lists |= {"/api/v1/persistentvolumeclaims": ("PersistentVolumeClaimList", "v1", claims),
                  "/api/v1/persistentvolumes": ("PersistentVolumeList", "v1", volumes),
                  "/apis/storage.k8s.io/v1/storageclasses": ("StorageClassList", "storage.k8s.io/v1", [
                      storage_class("local"), storage_class("gp3", provisioner="ebs.csi.aws.com")])}
    api.objects = {"/api/v1/persistentvolumes/pv-1": volumes[0],
                   **{f"/api/v1/namespaces/default/persistentvolumeclaims/{c['metadata']['name']}": c for c in claims}}
    with serving(api) as url:
        config = write_kubeconfig(tmp_path / "config", url)
        result = CliRunner().invoke(main, ["bind", "--kubeconfig", str(config), "--dry-run", "server", "--yes",
                                           "-o", "json", "--time-limit", "5"])
    assert result.exit_code == 0, result.output
    assert [r["outcome"] for r in json.loads(result.stdout)["results"]] == ["bound"]
    writes = [(method, path, query.get("dryRun")) for method, path, query, _ in api.requests if method != "GET"]
    assert writes == [("PUT", "/api/v1/persistentvolumes/pv-1", ["All"]),
                      ("PUT", "/api/v1/namespaces/default/persistentvolumeclaims/scratch", ["All"]),
                      ("POST", "/api/v1/namespaces/default/pods/db/binding", ["All"])]
    assert "claimRef" not in api.objects["/api/v1/persistentvolumes/pv-1"]["spec"]  # nothing persisted


@pytest.mark.parametrize(("bad", "where"), [
    ({**claim("data"), "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local"}},
     "PersistentVolumeClaim default/data: spec.resources.requests.storage: missing storage request"),
    (claim("data", modes=()), "PersistentVolumeClaim default/data: spec.accessModes: at least 1 access mode"),
    ({**volume("pv-2"), "spec": {**volume("pv-2")["spec"], "hostPath": {"path": "/x"}}},
     "PersistentVolume pv-2: spec.nfs: may not specify more than 1 volume type (hostPath is set too)"),
])  # fmt: skip
def test_a_claim_or_volume_the_api_server_refuses_is_one_line_and_exit_2(tmp_path: Path, bad: dict[str, Any],
                                                                         where: str) -> None:
    """The bad object replaces the good one of its name (or is added)."""
    file = cluster(tmp_path)
    objects = [o for o in yaml.safe_load_all(file.read_text()) if o["metadata"]["name"] != bad["metadata"]["name"]]
    file.write_text(yaml.safe_dump_all([*objects, bad]))
    result = CliRunner().invoke(main, ["plan", str(file)])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {file}: {where}")


def test_a_duplicate_claim_is_refused_naming_both_files(tmp_path: Path) -> None:
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(claim("data")))
    result = CliRunner().invoke(main, ["plan", str(cluster(tmp_path)), str(again)])
    assert result.exit_code == 2
    assert result.stderr == (f"error: {again}: PersistentVolumeClaim default/data: duplicate PersistentVolumeClaim "
                             f"(first defined in {tmp_path / 'cluster.yaml'})\n")
