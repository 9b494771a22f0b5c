"""`kubeplace plan` with resource claims: the allocations are in the plan (JSON, wide table), and a
malformed CEL selector is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from tests.builders import node, pod
from tests.device_builders import DRIVER, claiming, device_class, gpu_slice, request, resource_claim


def cluster(tmp_path: Path, *extra: Any, selectors: tuple[str, ...] = ()) -> Path:
    file = tmp_path / "cluster.yaml"
    file.write_text(yaml.safe_dump_all([
        node("n1").cpu("4").memory("4Gi").manifest(), device_class(), gpu_slice("n1", 2),
        resource_claim("train", requests=[request(count=2, selectors=selectors)]),
        claiming(pod("trainer").cpu("1"), claim="train").manifest(), *extra]))
    return file


def test_the_plan_lists_each_claims_allocation(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["plan", str(cluster(tmp_path)), "-o", "json"])
    assert result.exit_code == 0, result.stderr
    (placement,) = json.loads(result.stdout)["placements"]
    assert placement["claims"] == [{"claim": "train", "allocation": {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": f"gpu-{i}"}
                                for i in range(2)]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}]
    wide = CliRunner().invoke(main, ["plan", str(cluster(tmp_path)), "-o", "wide"])
    assert "train=gpu-0+gpu-1" in wide.stdout


def test_a_malformed_cel_selector_is_one_line_and_exit_2(tmp_path: Path) -> None:
    file = cluster(tmp_path, selectors=(f'device.attributes["{DRIVER}"].model ==',))
    result = CliRunner().invoke(main, ["plan", str(file)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: {file}: ResourceClaim default/train: spec.devices.requests[0].exactly.selectors[0].cel.expression: "
        "CEL compile error: ")
