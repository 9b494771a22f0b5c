"""Every test module that uses helm declares it (marker ``helm``), so that the root conftest builds
helm before the tests run: a cold build inside a test would exceed that test's timeout."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _uses_helm(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.ImportFrom) and node.module == "tests.install.helm"
               and any(alias.name == "locate_helm" for alias in node.names) for node in ast.walk(tree))


def _marked_helm(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return "pytest.mark.helm" in ast.unparse(node.value)
    return False


def test_every_module_using_helm_is_marked_helm() -> None:
    unmarked = []
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        if _uses_helm(tree) and not _marked_helm(tree):
            unmarked.append(str(path.relative_to(TESTS)))
    assert not unmarked, f"modules calling locate_helm without pytestmark = pytest.mark.helm: {unmarked}"
