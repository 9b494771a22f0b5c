"""The runtime as the image installs it, and the kubectl plugin once installed.

The Containerfile's build stage is replayed in a fresh virtualenv (no container engine here): its
COPY sources into a scratch build context, its RUN steps with ``PREFIX`` set to a scratch prefix.
pip's cache is used (the Containerfile's ``ENV`` turning it off is not applied). Then what the
image would hold is checked: the serve/rebalance runtime works, the benchmarks and tests are not
there, and the kubectl plugin and its completion run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.install.containerfile import Stage, read_stages

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPO_ROOT / "Containerfile"
DEMO = REPO_ROOT / "fixtures" / "demo"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return read_stages(CONTAINERFILE)


@pytest.fixture(scope="module")
def prefix(stages: list[Stage], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build stage run here: its COPY sources copied, its RUN steps run; the prefix it made."""
    build = stages[0]
    scratch = tmp_path_factory.mktemp("image")
    context, prefix = scratch / "src", scratch / "opt" / "kubeplace"
    context.mkdir()
    for sources, destination in build.copies:
        for source in sources:
            target = context / destination if destination not in ("./", ".") else context / source
            if (REPO_ROOT / source).is_dir():
                shutil.copytree(REPO_ROOT / source, target, symlinks=True,
                                ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(REPO_ROOT / source, target)
    python_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PREFIX": str(prefix), "PATH": f"{python_dir}:{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    for command in build.runs:
        out = subprocess.run(["sh", "-c", command], cwd=context, env=env, capture_output=True, text=True,
                             timeout=800)
        assert out.returncode == 0, f"RUN {command}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    return prefix


def run(prefix: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path or f"{prefix / 'bin'}:/usr/bin:/bin", "HOME": str(prefix.parent), "LANG": "C.UTF-8"}
    return subprocess.run(list(args), capture_output=True, text=True, env=env, cwd="/", timeout=300)


def site_packages(prefix: Path) -> Path:
    return next((prefix / "lib").glob("python3.*/site-packages"))


def test_the_image_copies_no_tests_nor_benchmarks(stages: list[Stage]) -> None:
    copied = {source.rstrip("/") for sources, _ in stages[0].copies for source in sources}
    assert not copied & {"tests", "bench", "kubeplace_bench", "fixtures", "examples", "."}
    mapped = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    assert copied == {"pyproject.toml", "README.md", "LICENSE", "kubeplace", *mapped.values()}  # the product, whole
    assert stages[-1].copies_from == ["/opt/kubeplace /opt/kubeplace"]


def test_the_image_runs_as_the_charts_non_root_user(stages: list[Stage]) -> None:
    values = yaml.safe_load((REPO_ROOT / "deploy" / "chart" / "kubeplace" / "values.yaml").read_text())
    user, _, group = stages[-1].user.partition(":")
    assert int(user) == int(group) == values["runAsUser"] != 0
    assert stages[-1].entrypoint == ["kubeplace"]  # the chart's args start with the subcommand


def test_serve_and_rebalance_run_without_the_benchmarks_the_test_extra_or_ray(prefix: Path) -> None:
    for command in ("serve", "rebalance"):
        out = run(prefix, str(prefix / "bin" / "kubeplace"), command, "--help")
        assert out.returncode == 0, out.stderr
        assert f"Usage: kubeplace {command}" in out.stdout
    listed = run(prefix, str(prefix / "bin" / "kubeplace"), "--help").stdout
    assert "serve" in listed and "bench" not in listed and "openb" not in listed
    for module in ("kubeplace_bench", "tests", "pytest", "hypothesis", "ray"):
        probe = run(prefix, str(prefix / "bin" / "python"), "-c", f"import {module}")
        assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr, module
    installed = {p.name for p in site_packages(prefix).iterdir()}
    assert "kubeplace" in installed and not installed & {"kubeplace_bench", "tests", "bench"}


def test_kubectl_plugin_executable_plans_the_demo(prefix: Path) -> None:
    plugin = prefix / "bin" / "kubectl-kubeplace"
    assert plugin.is_file() and os.access(plugin, os.X_OK)
    out = run(prefix, str(plugin), "plan", str(DEMO))
    assert out.returncode == 0, out.stderr
    assert "Pods placed: 32" in out.stdout and "Verified:" in out.stdout
    usage = run(prefix, str(plugin), "plan", "--help").stdout
    assert usage.startswith("Usage: kubectl kubeplace plan")
    report = prefix.parent / "plan.html"  # the report's dependencies are the runtime's
    out = run(prefix, str(plugin), "plan", str(DEMO), "--report", str(report))
    assert out.returncode == 0, out.stderr
    assert report.read_text().count("<svg") == 7


def test_kubectl_plugin_completion(prefix: Path) -> None:
    complete = prefix / "bin" / "kubectl_complete-kubeplace"
    out = run(prefix, str(complete), "pl")
    assert out.stdout.splitlines() == ["plan\tShow where every pending pod would go, and...", ":4"]
    out = run(prefix, str(complete), "plan", "-o", "")
    assert out.stdout.splitlines() == ["table", "wide", "json", "yaml", ":4"]
    out = run(prefix, str(complete), "plan", "fix")  # SOURCE: file names, completed by the shell
    assert out.stdout.splitlines() == [":0"]


def test_bash_completion_of_the_installed_command(prefix: Path) -> None:
    script = run(prefix, str(prefix / "bin" / "kubeplace"), "completion", "bash").stdout
    assert "complete -o nosort -F _kubeplace_completion kubeplace" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    env = {"PATH": f"{prefix / 'bin'}:/usr/bin:/bin", "COMP_WORDS": "kubeplace rebalance --max-m", "COMP_CWORD": "2",
           "_KUBEPLACE_COMPLETE": "bash_complete"}
    out = subprocess.run([str(prefix / "bin" / "kubeplace")], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.split() == ["plain,--max-moves", "plain,--max-moves-per-node", "plain,--max-moves-per-namespace"]
    for shell, marker in (("zsh", "#compdef kubeplace"), ("fish", "complete --no-files --command kubeplace")):
        assert marker in run(prefix, str(prefix / "bin" / "kubeplace"), "completion", shell).stdout


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_finds_the_plugin_and_its_completion(prefix: Path) -> None:
    kubectl = shutil.which("kubectl") or "kubectl"
    path = f"{prefix / 'bin'}:/usr/bin:/bin"
    listed = run(prefix, kubectl, "plugin", "list", path=path)
    assert str(prefix / "bin" / "kubectl-kubeplace") in listed.stdout
    out = run(prefix, kubectl, "kubeplace", "plan", str(DEMO), path=path)
    assert out.returncode == 0, out.stderr
    assert "Pods placed: 32" in out.stdout
    completions = run(prefix, kubectl, "__complete", "kubeplace", "re", path=path).stdout.splitlines()
    assert completions[0].startswith("rebalance\t") and completions[-1] == ":4"
