"""kubeplace installed three ways, each in a fresh virtualenv: from its wheel, from its sdist,
and editable; and the benchmarks' distribution (bench/) beside it.

The distributions are built with their backend's PEP 517 hooks (setuptools, as pyproject.toml
requires it), in the checkout's state as committed or not. Dependencies are not installed again:
``--no-deps``, and the running environment's site-packages on the venv's path (a ``.pth`` line,
which adds the directory and runs none of the ``.pth`` files in it, so the running environment's
own editable kubeplace stays out). Each install then runs its commands from ``/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
DEMO = CHECKOUT / "fixtures" / "demo"
BACKEND = "setuptools>=69"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def venv(where: Path) -> Path:
    """A fresh virtualenv with the build backend, seeing the running environment's packages."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True)
    python = where / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", BACKEND], check=True, capture_output=True, timeout=300)
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz-running-environment.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


def pip(python: Path, *args: str, cwd: Path | None = None) -> None:
    out = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", *args],
                         capture_output=True, text=True, cwd=cwd, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]


def build(python: Path, source: Path, hook: str, out_dir: Path) -> Path:
    """``build_wheel``/``build_sdist`` of ``source``'s backend; the file it wrote."""
    out_dir.mkdir(parents=True, exist_ok=True)
    code = f"from setuptools import build_meta as b; print(b.{hook}({str(out_dir)!r}))"
    out = subprocess.run([python, "-c", code], cwd=source, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out_dir / out.stdout.strip().splitlines()[-1]


def run(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``kubeplace`` command (``args[0] == "kubeplace"``) or a Python one-liner, from /."""
    bin_dir = python.parent
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(bin_dir.parent), "LANG": "C.UTF-8"}
    argv = [str(bin_dir / args[0]), *args[1:]] if args[0] == "kubeplace" else [str(python), "-c", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd="/", timeout=300)


def source_copy(where: Path) -> Path:
    """The checkout's files (as they are now, committed or not), without caches and builds."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=CHECKOUT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (CHECKOUT / name).is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(CHECKOUT / name, where / name)
    return where


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("distributions")


@pytest.fixture(scope="module")
def source(scratch: Path) -> Path:
    return source_copy(scratch / "src")


@pytest.fixture(scope="module")
def builder(scratch: Path) -> Path:
    return venv(scratch / "builder")


@pytest.fixture(scope="module")
def wheel(builder: Path, source: Path, scratch: Path) -> Path:
    return build(builder, source, "build_wheel", scratch / "dist")


@pytest.fixture(scope="module")
def from_wheel(wheel: Path, scratch: Path) -> Path:
    python = venv(scratch / "wheel-env")
    pip(python, str(wheel))
    return python


def test_the_wheel_holds_kubeplace_alone_with_its_folders_inside(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"kubeplace", "kubeplace-0.1.0.dist-info"}
    for folder in ("kube", "models", "models/plugins", "solver", "solver/backends", "plan", "serve", "rebalance",
                   "cli", "report"):
        assert f"kubeplace/{folder}/__init__.py" in names, folder
    rules = sorted(init.parent.name for init in (CHECKOUT / "models" / "plugins").glob("*/__init__.py"))
    assert rules  # every rule folder is a subpackage in the wheel, though pyproject.toml lists none
    for rule in rules:
        for module in sorted((CHECKOUT / "models" / "plugins" / rule).glob("*.py")):
            assert f"kubeplace/models/plugins/{rule}/{module.name}" in names, (rule, module.name)
    assert "kubeplace/plugins.py" in names and "kubeplace/_checkout.py" in names
    assert "kubeplace-0.1.0.dist-info/licenses/LICENSE" in names or "kubeplace-0.1.0.dist-info/LICENSE" in names


def test_the_sdist_builds_the_same_wheel(builder: Path, source: Path, wheel: Path, scratch: Path) -> None:
    sdist = build(builder, source, "build_sdist", scratch / "sdist")
    with tarfile.open(sdist) as archive:
        archive.extractall(scratch / "unpacked", filter="data")
        names = archive.getnames()
    root = scratch / "unpacked" / "kubeplace-0.1.0"
    assert not any("/bench/" in n or "/tests/" in n for n in names), "the sdist holds the product only"
    assert (root / "LICENSE").is_file() and (root / "README.md").is_file()
    rebuilt = build(builder, root, "build_wheel", scratch / "from-sdist")
    assert sorted(zipfile.ZipFile(rebuilt).namelist()) == sorted(zipfile.ZipFile(wheel).namelist())


def test_from_the_wheel_plan_works_and_bench_says_what_it_needs(from_wheel: Path) -> None:
    out = run(from_wheel, "kubeplace", "plan", str(DEMO))
    assert out.returncode == 0, out.stderr
    assert "Pods placed: 32" in out.stdout and "Verified:" in out.stdout
    where = run(from_wheel, "import kubeplace.kube.parse as p; print(p.__file__)").stdout
    assert "site-packages/kubeplace/kube/parse.py" in where
    for argv in (("bench", "throughput"), ("bench", "synthetic", "--nodes", "5"), ("openb", "convert")):
        out = run(from_wheel, "kubeplace", *argv)
        assert out.returncode == 2 and out.stdout == "", argv
        assert out.stderr.splitlines() == [
            f"error: kubeplace {argv[0]} comes with kubeplace-bench, which is not installed; from a kubeplace "
            "checkout: pip install -e ./bench"], argv
    assert "bench" not in run(from_wheel, "kubeplace", "--help").stdout
    assert "ModuleNotFoundError" in run(from_wheel, "import kubeplace_bench").stderr


def test_the_benchmarks_installed_from_a_wheel_say_they_need_a_checkout(from_wheel: Path, builder: Path,
                                                                         source: Path, scratch: Path) -> None:
    bench_wheel = build(builder, source / "bench", "build_wheel", scratch / "bench-dist")
    assert {n.split("/")[0] for n in zipfile.ZipFile(bench_wheel).namelist()} == {
        "kubeplace_bench", "kubeplace_bench-0.1.0.dist-info"}
    pip(from_wheel, str(bench_wheel))
    listed = run(from_wheel, "kubeplace", "--help").stdout
    assert "bench" in listed and "openb" in listed
    out = run(from_wheel, "kubeplace", "bench", "synthetic", "--nodes", "5", "--pods", "3", "--time-limit", "1")
    assert out.returncode == 0, out.stderr
    out = run(from_wheel, "kubeplace", "bench", "throughput", "--nodes", "5", "--pods", "5")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        f"error: deploy/rbac.yaml is not here ({next(from_wheel.parent.parent.glob('lib/python3.*'))}"
        "/deploy/rbac.yaml): this benchmark runs from a kubeplace checkout, with kubeplace-bench installed from it "
        "(pip install -e ./bench)"]


def test_editable_installs_run_from_the_checkout(source: Path, scratch: Path) -> None:
    python = venv(scratch / "editable-env")
    pip(python, "-e", ".", cwd=source)
    out = run(python, "kubeplace", "plan", str(DEMO))
    assert out.returncode == 0, out.stderr
    assert "Pods placed: 32" in out.stdout
    where = run(python, "import kubeplace.kube.parse as p, kubeplace.plugins as q; print(p.__file__, q.__file__)")
    assert where.stdout.split() == [str(source / "kube" / "parse.py"), str(source / "kubeplace" / "plugins.py")]
    assert run(python, "kubeplace", "bench", "synthetic").returncode == 2
    pip(python, "-e", "./bench", cwd=source)
    out = run(python, "kubeplace", "bench", "synthetic", "--nodes", "5", "--pods", "3", "--time-limit", "1")
    assert out.returncode == 0, out.stderr
    where = run(python, "import kubeplace_bench.throughput as t; print(t.RBAC_FILE)").stdout.strip()
    assert where == str(source / "deploy" / "rbac.yaml")


def test_an_editable_install_does_not_shadow_another_checkout(source: Path, scratch: Path) -> None:
    """A second checkout (a git worktree) beside the editable one imports its own folders when it
    is on sys.path first, as its tests are: kubeplace from it, and kubeplace.kube from it too."""
    python = venv(scratch / "worktree-env")
    pip(python, "-e", ".", cwd=source)
    other = source_copy(scratch / "worktree")
    env = {**os.environ, "PYTHONPATH": str(other)}
    env.pop("VIRTUAL_ENV", None)
    out = subprocess.run([python, "-c", "import kubeplace.kube.parse as p, kubeplace.cli.main; print(p.__file__)"],
                         cwd="/", env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(other / "kube" / "parse.py")
