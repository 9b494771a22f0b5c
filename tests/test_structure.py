"""The product's module structure: no import cycle among its modules, and no private name
(``_x``) used outside the module that defines it.

Every import counts, at module level, inside functions and under ``if TYPE_CHECKING:``: an
import moved into a function or behind TYPE_CHECKING hides a cycle, it does not remove it.
Run as a script (``python tests/test_structure.py``) it prints the cycles, the private names
and the module count.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
PRODUCT = ("kube", "models", "solver", "plan", "cli", "serve", "rebalance", "report")


@dataclass(frozen=True)
class Module:
    name: str  # kubeplace.models.config
    path: Path
    package: bool


def product_modules() -> dict[str, Module]:
    out = {"kubeplace": Module("kubeplace", CHECKOUT / "kubeplace" / "__init__.py", True)}
    for path in sorted((CHECKOUT / "kubeplace").glob("*.py")):
        if path.stem != "__init__":
            out[f"kubeplace.{path.stem}"] = Module(f"kubeplace.{path.stem}", path, False)
    for folder in PRODUCT:
        for path in sorted((CHECKOUT / folder).rglob("*.py")):
            parts = ["kubeplace", *path.relative_to(CHECKOUT).with_suffix("").parts]
            package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if package else parts)
            out[name] = Module(name, path, package)
    return out


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    base = base if module.package else base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _target(name: str, modules: dict[str, Module]) -> str | None:
    """The product module that importing ``name`` loads last (the most specific one)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: Module, modules: dict[str, Module]) -> Iterator[tuple[str, str, int]]:
    """(imported product module, imported name or "", line) for every import in ``module``."""
    tree = ast.parse(module.path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _target(alias.name, modules)
                if target:
                    yield target, "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in modules:
                    yield submodule, "", node.lineno
                else:
                    target = _target(source, modules)
                    if target:
                        yield target, alias.name, node.lineno


def import_graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, module in modules.items():
        for target, _, _ in imports(module, modules):
            if target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(modules: dict[str, Module]) -> list[str]:
    """``from x import _name`` and ``x._name`` where x is another product module."""
    out = []
    for name, module in modules.items():
        where = module.path.relative_to(CHECKOUT)
        aliases: dict[str, str] = {}
        for target, imported, line in imports(module, modules):
            if imported and _private(imported) and target != name:
                out.append(f"{where}:{line}: from {target} import {imported}")
        tree = ast.parse(module.path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(module, node)
                for alias in node.names:
                    if f"{source}.{alias.name}" in modules:
                        aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and aliases[node.value.id] != name):
                out.append(f"{where}:{node.lineno}: {aliases[node.value.id]}.{node.attr}")
    return sorted(out)


def test_no_import_cycle_among_product_modules() -> None:
    found = cycles(import_graph(product_modules()))
    assert found == [], "\n".join(" <-> ".join(c) for c in found)


def test_no_private_name_is_used_outside_its_module() -> None:
    assert private_uses(product_modules()) == []


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    modules = product_modules()
    solve = modules["kubeplace.solver.solve"]
    assert {t for t, _, _ in imports(solve, modules)} >= {"kubeplace.models.evaluate"}


if __name__ == "__main__":
    mods = product_modules()
    found = cycles(import_graph(mods))
    print(f"product modules: {len(mods)}")
    print(f"import cycles (strongly connected components): {len(found)}")
    for c in found:
        print("  " + " <-> ".join(c))
    uses = private_uses(mods)
    print(f"private names used across modules: {len(uses)}")
    for u in uses:
        print("  " + u)
