"""`kubeplace plan` with resource claims: the allocations are in the plan (JSON, wide table), and a
malformed CEL selector is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from tests.builders import node, pod
from tests.device_builders import (
    DRIVER,
    FILTER_ERROR,
    claiming,
    device_class,
    gpu_slice,
    request,
    resource_claim,
    sub_request,
)


def cluster(tmp_path: Path, *extra: Any, selectors: tuple[str, ...] = (), claim: Any = None,
            slice_: Any = None, trainer: Any = None) -> Path:
    file = tmp_path / "cluster.yaml"
    file.write_text(yaml.safe_dump_all([
        node("n1").cpu("4").memory("4Gi").manifest(), device_class(), slice_ or gpu_slice("n1", 2),
        claim or resource_claim("train", requests=[request(count=2, selectors=selectors)]),
        trainer or claiming(pod("trainer").cpu("1"), claim="train").manifest(), *extra]))
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


TWO_ENTRIES = claiming(pod("trainer").cpu("1"), claim="train").spec("resourceClaims", [
    {"name": "gpu", "resourceClaimName": "train"}, {"name": "gpu", "resourceClaimName": "train"}]).manifest()


@pytest.mark.parametrize(("bad", "where"), [
    ({"claim": resource_claim("train", requests=[request(count=1), request(count=1)])},
     "ResourceClaim default/train: spec.devices.requests[1].name: duplicate request name 'gpu'"),
    ({"claim": resource_claim("train", requests=[{**request(), "firstAvailable": [sub_request("a")]}])},
     "ResourceClaim default/train: spec.devices.requests[0]: both exactly and firstAvailable are set"),
    ({"claim": resource_claim("train", requests=[request(first_available=[sub_request(f"s{i}") for i in range(9)])])},
     "ResourceClaim default/train: spec.devices.requests[0].firstAvailable: 9 subrequests"),
    ({"slice_": {**gpu_slice("n1", 2), "spec": {**gpu_slice("n1", 2)["spec"], "allNodes": True}}},
     "ResourceSlice n1-gpus: spec: nodeName and allNodes are all set"),
    ({"trainer": TWO_ENTRIES}, "Pod default/trainer: spec.resourceClaims[1].name: duplicate resourceClaims entry"),
])  # fmt: skip
def test_dra_objects_the_api_server_refuses_are_one_line_and_exit_2(tmp_path: Path, bad: dict[str, Any],
                                                                    where: str) -> None:
    file = cluster(tmp_path, **bad)
    result = CliRunner().invoke(main, ["plan", str(file), "-o", "json"])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {file}: {where}")


def test_a_v1beta1_claim_is_planned_as_the_v1_claim_it_converts_to(tmp_path: Path) -> None:
    old = {**resource_claim("train", requests=[{"name": "gpu", "deviceClassName": "gpu", "count": 2}]),
           "apiVersion": "resource.k8s.io/v1beta1"}
    (tmp_path / "v1").mkdir()
    runs = [CliRunner().invoke(main, ["plan", str(file), "-o", "json"])
            for file in (cluster(tmp_path / "v1"), cluster(tmp_path, claim=old))]
    assert [r.exit_code for r in runs] == [0, 0]
    first, second = (json.loads(r.stdout)["placements"][0]["claims"] for r in runs)
    assert second == first and len(first[0]["allocation"]["devices"]["results"]) == 2


def test_a_claim_failing_at_run_time_is_its_pods_reason_and_the_others_are_planned(tmp_path: Path) -> None:
    """Division by zero, a failing quantity(): no traceback, nothing of the CEL library on stderr;
    the poisoned pods are unplaced with the kube-scheduler's words, the others placed."""
    index = f'device.attributes["{DRIVER}"].index'
    file = cluster(tmp_path, resource_claim("poisoned", requests=[request(selectors=[f"{index} / 0 == 1"])]),
                   claiming(pod("victim").cpu("1"), claim="poisoned").manifest(),
                   resource_claim("odd", requests=[request(selectors=['quantity("lots") == quantity("1")'])]),
                   claiming(pod("odd").cpu("1"), claim="odd").manifest(), pod("plain").cpu("1").manifest())
    result = CliRunner().invoke(main, ["plan", str(file), "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    out = json.loads(result.stdout)
    assert sorted(p["name"] for p in out["placements"]) == ["plain", "trainer"]
    reasons = {u["name"]: u["reasons"] for u in out["unplaced"]}
    assert reasons["victim"] == [f"{FILTER_ERROR}claim default/poisoned: selector #0: "
                                 "CEL runtime error: division by zero"]
    assert reasons["odd"] == [f"{FILTER_ERROR}claim default/odd: selector #0: "
                              "CEL runtime error: quantity('lots'): invalid quantity 'lots'"]


def test_a_selector_over_the_api_servers_length_limit_is_refused_before_it_is_compiled(tmp_path: Path) -> None:
    """40 KB crashed the CEL library (SIGSEGV): the length is checked first, in the API server's words."""
    file = cluster(tmp_path, selectors=("+".join(["1"] * 20000) + " > 0",))
    result = CliRunner().invoke(main, ["plan", str(file)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: {file}: ResourceClaim default/train: spec.devices.requests[0].exactly.selectors[0].cel.expression: "
        "Too long: may not be more than 10240 bytes (expected a CEL expression within the API server's limits)")


def test_a_short_selector_too_costly_to_evaluate_is_refused(tmp_path: Path) -> None:
    items = "[" + ",".join(str(i) for i in range(100)) + "]"
    nested = f"{items}.all(a, {items}.all(b, {items}.all(c, a + b + c >= 0)))"
    result = CliRunner().invoke(main, ["plan", str(cluster(tmp_path, selectors=(nested,)))])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(
        "cel.expression: Forbidden: too complex, exceeds cost limit "
        "(expected a CEL expression within the API server's limits)")
