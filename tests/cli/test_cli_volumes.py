"""`kubeplace plan` with volumes: the volumes chosen are in the plan, and read back from a plan file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import InputError
from kubeplace.kube.volumes import ClaimChoice
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
