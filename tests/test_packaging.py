"""Installed names: the product is importable only as ``kubeplace.*``, the benchmarks only as
``kubeplace_bench``, and the scheduler's runtime never loads the benchmarks."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
PRODUCT = ("kube", "models", "solver", "plan", "cli", "serve", "rebalance", "report")


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
