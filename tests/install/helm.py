"""The chart, rendered by the helm that .ci/build-helm builds (pinned by tools/helm/), as
Python objects; shared by the chart tests and the e2e dry run."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "deploy" / "chart" / "kubeplace"
CUSTOM_VALUES = Path(__file__).resolve().parent / "values-custom.yaml"
BUILD_SCRIPT = REPO_ROOT / ".ci" / "build-helm"


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


class HelmUnavailable(Exception):
    """helm cannot be built here (no Go toolchain)."""


@functools.cache
def build_helm() -> Path | HelmUnavailable | RuntimeError:
    """The cached helm, built on first call (a cold build takes a few minutes); the outcome is
    remembered for the session. The root conftest calls it right after collection when a test
    marked ``helm`` is selected, so the build counts against no test's timeout."""
    if shutil.which(os.environ.get("GO", "go")) is None:
        return HelmUnavailable("Go is not installed: helm (tools/helm) cannot be built")
    out = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        return RuntimeError(f".ci/build-helm failed:\n{out.stderr[-3000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def locate_helm() -> Path:
    """The helm binary; skips without Go, except on CI where it fails."""
    result = build_helm()
    if isinstance(result, HelmUnavailable):
        if on_ci():
            pytest.fail(f"CI=true and {result}", pytrace=False)
        pytest.skip(str(result))
    if isinstance(result, RuntimeError):
        pytest.fail(str(result), pytrace=False)
    return result


def helm(binary: Path, *args: str) -> str:
    out = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"helm {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def render(binary: Path, release: str, namespace: str, *args: str) -> list[dict[str, Any]]:
    """``helm template`` of the chart as a list of objects."""
    text = helm(binary, "template", release, str(CHART), "--namespace", namespace, *args)
    return [d for d in yaml.safe_load_all(text) if d]


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    names = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(matches) == 1, f"{len(matches)} {kind} {name or ''} in {names}"
    return matches[0]
