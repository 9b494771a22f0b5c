"""A configured GPU device resource (``gpu.deviceResource``) is used everywhere: the plan gives
devices, the verifier reads the same resource, and ``bind --plan`` binds with the device annotation."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.models.gpu import DEVICE_ALLOCATED
from tests.builders import namespace, node, pod
from tests.kube.fake_apiserver import FakeApiServer, serving
from tests.kube.test_kube_client import write_kubeconfig

DEVICE = "example.com/gpu"
FAST = ["--time-limit", "5", "--workers", "1"]


def test_a_non_default_device_resource_plans_verifies_and_binds(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementConfiguration",
                                      "gpu": {"deviceResource": DEVICE}}))
    nodes = [node("g").cpu("8").memory("8Gi").allocatable(DEVICE, "2").manifest()]
    pods = [pod("busy", "sys").scheduler("other").request(DEVICE, "1").limit(DEVICE, "1").on("g").manifest(),
            pod("train").cpu("1").request(DEVICE, "1").limit(DEVICE, "1").manifest(),
            pod("more").cpu("1").request(DEVICE, "1").limit(DEVICE, "1").manifest()]
    api = FakeApiServer(nodes, pods, [namespace("default").manifest(), namespace("sys").manifest()])
    runner = CliRunner()
    with serving(api) as url:
        kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", url))
        made = runner.invoke(main, ["plan", "--kubeconfig", kubeconfig, "--config", str(config), "-o", "json",
                                    *FAST])
        assert made.exit_code == 0, made.stderr
        doc = json.loads(made.stdout)
        assert [(p["name"], p["gpus"]) for p in doc["placements"]] == [("train", [1])] or \
            [(p["name"], p["gpus"]) for p in doc["placements"]] == [("more", [1])]
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(made.stdout)
        bound = runner.invoke(main, ["bind", "--kubeconfig", kubeconfig, "--config", str(config),
                                     "--plan", str(plan_file), "--yes"])
        assert bound.exit_code == 0, bound.stderr
    bindings = [body for method, path, _, body in api.requests if method == "POST" and path.endswith("/binding")]
    assert len(bindings) == 1
    note = json.loads(bindings[0]["metadata"]["annotations"][DEVICE_ALLOCATED])
    assert note["gpu"][0]["minor"] == 1 and note["gpu"][0]["resources"]["koordinator.sh/gpu-core"] == "100"
