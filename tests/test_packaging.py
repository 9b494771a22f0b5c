"""Installed names: the product is importable only as ``kubeplace.*``, the benchmarks only as
``kubeplace_bench``, and the scheduler's runtime never loads the benchmarks. The checkout holds
no symbolic link: pyproject.toml maps the top-level folders into the package. Installs
themselves (wheel, sdist, editable) are tests/install/test_distributions.py."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from unittest import mock

CHECKOUT = Path(__file__).resolve().parent.parent
PRODUCT = ("kube", "models", "solver", "plan", "cli", "serve", "rebalance", "report", "simulate")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
    names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names


def test_no_module_imports_a_bare_top_level_folder() -> None:
    bare = (*PRODUCT, "bench")
    offenders = []
    for folder in (*PRODUCT, "bench", "tests", "examples"):
        for path in (CHECKOUT / folder).rglob("*.py"):
            offenders += [f"{path.relative_to(CHECKOUT)}: {name}" for name in _imports(path)
                          if name.split(".")[0] in bare]
    assert offenders == []


def test_the_checkout_holds_no_symbolic_link() -> None:
    staged = subprocess.run(["git", "ls-files", "--stage"], cwd=CHECKOUT, capture_output=True, text=True, check=True)
    assert [line.split("\t")[1] for line in staged.stdout.splitlines() if line.startswith("120000")] == []


def test_pyproject_maps_every_product_folder_and_setup_derives_every_package() -> None:
    setuptools = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {f"kubeplace.{folder}": folder for folder in PRODUCT}
    assert "packages" not in setuptools  # derived by setup.py: a new subpackage needs no line
    packages = {"kubeplace"} | {
        ".".join(["kubeplace", *init.parent.relative_to(CHECKOUT).parts])
        for folder in PRODUCT for init in (CHECKOUT / folder).rglob("__init__.py")}
    spec = importlib.util.spec_from_file_location("kubeplace_setup", CHECKOUT / "setup.py")
    assert spec is not None and spec.loader is not None
    setup_py = importlib.util.module_from_spec(spec)
    with mock.patch("setuptools.setup"):  # read its list, build nothing
        spec.loader.exec_module(setup_py)
    assert setup_py.packages() == sorted(packages)  # a package left out is missing from the wheel
    assert {"kubeplace.models.plugins.node_ports", "kubeplace.solver.backends"} <= packages


def test_every_product_folder_is_a_subpackage_of_kubeplace() -> None:
    import kubeplace

    for folder in PRODUCT:
        module = __import__(f"kubeplace.{folder}", fromlist=["_"])
        assert Path(module.__file__ or "").resolve().parent == CHECKOUT / folder
    assert Path(kubeplace.__file__ or "").resolve().parent == CHECKOUT / "kubeplace"


def test_the_runtime_never_imports_the_benchmarks() -> None:
    code = (
        "import sys, kubeplace.cli.main, kubeplace.serve.loop, kubeplace.rebalance.apply, "
        "kubeplace.plan.pipeline\n"
        "from click.testing import CliRunner\n"
        "CliRunner().invoke(kubeplace.cli.main.main, ['plan', '--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('kubeplace_bench', 'tests'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"


def test_serve_never_loads_the_report_nor_matplotlib() -> None:
    code = (
        "import sys, kubeplace.cli.main, kubeplace.serve.app, kubeplace.serve.loop\n"
        "from click.testing import CliRunner\n"
        "CliRunner().invoke(kubeplace.cli.main.main, ['serve', '--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('kubeplace.report', 'matplotlib'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=CHECKOUT)
    assert out.stdout.strip() == "[]"


def test_the_example_plugin_imports_only_the_public_plugin_api() -> None:
    example = CHECKOUT / "examples" / "plugins" / "node_label_match.py"
    assert {name for name in _imports(example) if name.startswith("kubeplace")} == {"kubeplace.plugins"}


HELLO = '''
import click


@click.command()
def hello() -> None:
    """Say hello."""
    click.echo("hello")
'''


def _main_with_entry_points(tmp_path: Path, argv: list[str], *distributions: str) -> subprocess.CompletedProcess[str]:
    """``kubeplace ARGV`` in a fresh interpreter where the distributions given (their
    ``entry_points.txt``) are installed and no other distribution adds a command."""
    for i, entry_points in enumerate(distributions):
        info = tmp_path / f"extra{i}-1.0.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: extra{i}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    (tmp_path / "hello_commands.py").write_text(HELLO)
    code = (
        "import sys, importlib.metadata as md\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "found = md.entry_points\n"
        "md.entry_points = lambda **kw: [e for e in found(**kw) if e.dist.name.startswith('extra')]\n"
        "from kubeplace.cli.main import main\n"
        f"main({argv!r}, prog_name='kubeplace')\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=CHECKOUT, timeout=120)


def test_another_distribution_adds_commands_through_its_entry_points(tmp_path: Path) -> None:
    extra = """
        [kubeplace.commands]
        hello = hello_commands:hello
        """
    out = _main_with_entry_points(tmp_path, ["hello"], extra)
    assert (out.returncode, out.stdout) == (0, "hello\n"), out.stderr
    listed = _main_with_entry_points(tmp_path, ["--help"], extra).stdout
    assert "hello" in listed and "Say hello." in listed


def test_bench_without_the_benchmarks_says_in_one_line_what_it_needs(tmp_path: Path) -> None:
    for argv in (["bench", "throughput", "--nodes", "5"], ["openb", "--help"]):
        out = _main_with_entry_points(tmp_path, argv)
        assert (out.returncode, out.stdout) == (2, ""), argv
        assert out.stderr == (f"error: kubeplace {argv[0]} comes with kubeplace-bench, which is not installed; "
                              "from a kubeplace checkout: pip install -e ./bench\n")
    assert "bench" not in _main_with_entry_points(tmp_path, ["--help"]).stdout
    assert "No such command 'nope'" in _main_with_entry_points(tmp_path, ["nope"]).stderr
