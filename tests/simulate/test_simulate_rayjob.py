"""deploy/simulate-rayjob.yaml: the RayJob runs a command the CLI has, with flags it parses, on the
chart's image built with the kuberay extra, and its ConfigMap holds a sweep that reads."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import click
import yaml

from kubeplace.cli.main import main
from kubeplace.simulate.sweep import read_inputs, read_sweep

CHECKOUT = Path(__file__).resolve().parents[2]
MANIFEST = CHECKOUT / "deploy" / "simulate-rayjob.yaml"


def _documents() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text())}


def _extras() -> dict[str, list[str]]:
    extras: dict[str, list[str]] = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    return extras


def test_the_rayjob_runs_a_sweep_the_cli_parses_on_the_configmaps_files(tmp_path: Path) -> None:
    documents = _documents()
    job = documents["RayJob"]
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    mount = next(m["mountPath"] for m in head["containers"][0]["volumeMounts"] if m["name"] == "sweep")
    volume = next(v for v in head["volumes"] if v["name"] == "sweep")
    configmap = documents["ConfigMap"]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    for name, text in configmap["data"].items():
        (tmp_path / name).write_text(text)

    words = shlex.split(job["spec"]["entrypoint"])
    assert words[:3] == ["kubeplace", "simulate", "sweep"]
    args = [str(tmp_path / Path(w).relative_to(mount)) if w.startswith(mount + "/") else w for w in words[3:]]
    simulate = main.get_command(click.Context(main), "simulate")
    assert isinstance(simulate, click.Group)
    sweep = simulate.get_command(click.Context(simulate), "sweep")
    assert sweep is not None
    parsed = sweep.make_context("sweep", args).params
    assert parsed["ray_address"] == "auto"
    specs = read_sweep(parsed["sweep_path"])
    assert len(specs) == 16
    read_inputs(specs)  # (every file of the sweep reads)


def test_the_rayjob_uses_the_charts_image_with_the_kuberay_extra_and_its_ray() -> None:
    job = _documents()["RayJob"]
    cluster = job["spec"]["rayClusterSpec"]
    version = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["version"]
    chart_image = yaml.safe_load((CHECKOUT / "deploy" / "chart" / "kubeplace" / "values.yaml").read_text())["image"]
    pods = [cluster["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
    assert {c["image"] for pod in pods for c in pod["containers"]} == {f"{chart_image['repository']}-ray:{version}"}
    assert all(pod["securityContext"]["runAsUser"] == 65532 for pod in pods)
    pins = {re.sub(r"\[.*\]", "", p) for name in ("ray", "kuberay", "test") for p in _extras()[name] if "ray" in p}
    assert pins == {f"ray=={cluster['rayVersion']}"}
    assert "EXTRAS=[kuberay]" in MANIFEST.read_text() and "ARG EXTRAS=" in (CHECKOUT / "Containerfile").read_text()
