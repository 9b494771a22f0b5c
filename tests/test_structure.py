"""The product's module structure: its packages import only downwards through the layers (the
layer contracts), no import cycle among its modules, and no private name (``_x``) used outside
the module that defines it.

Every import counts, at module level, inside functions and under ``if TYPE_CHECKING:``: an
import moved into a function or behind TYPE_CHECKING hides a cycle, it does not remove it.
Run as a script (``python tests/test_structure.py``) it prints the layer violations, the
cycles, the private names and the module count.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
PRODUCT = ("kube", "models", "solver", "plan", "cli", "serve", "rebalance", "report", "simulate")

LAYERS: tuple[tuple[str, ...], ...] = (
    ("kube",),                # Kubernetes objects, parsed and validated
    ("models",),              # the aggregated model and its plugins (models/plugins)
    ("plugins",),             # kubeplace.plugins: the plugins' public API, over models
    ("solver",),              # greedy and the exact backends
    ("plan",),                # plan, preemption, the independent verifier
    ("rebalance",),           # moves (serve steers by its utilisation targets)
    ("serve", "report"),      # the scheduler loop; the HTML report
    ("simulate",),            # replays traces with serve's cycle and the baselines
    ("cli",),
)
"""The layer contracts, lowest first: a package imports its own modules and those of lower
layers, never a package of its layer or above (``plugins`` is the module kubeplace.plugins)."""

SOLVER_LIBRARIES = ("ortools", "pulp", "highspy")
"""Imported by kubeplace.solver.backends only: the model, its plugins and every search (column
generation, pricing, the exact provisioning model) stay solver-agnostic."""
BACKENDS = "kubeplace.solver.backends"
RAY_RUNNER = "kubeplace.simulate.ray_sweep"
"""The one module that imports Ray (the optional extra kubeplace[ray]): nothing else needs it."""


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


def layer_of(module: str) -> int | None:
    """The index in LAYERS of a product module's package (``kubeplace.models.x`` -> 1); None for
    the package ``kubeplace`` itself and its import machinery, which sit under every layer."""
    part = module.split(".")[1] if module.count(".") else ""
    return next((i for i, layer in enumerate(LAYERS) if part in layer), None)


def layer_violations(modules: dict[str, Module]) -> list[str]:
    """``path:line: a imports b`` for every import that goes sideways or up the layers."""
    out = []
    for name, module in modules.items():
        mine = layer_of(name)
        for target, _, line in imports(module, modules):
            theirs = layer_of(target)
            same_package = name.split(".")[:2] == target.split(".")[:2]
            if mine is not None and theirs is not None and theirs >= mine and not same_package:
                where = module.path.relative_to(CHECKOUT) if module.path.is_relative_to(CHECKOUT) else module.path
                out.append(f"{where}:{line}: {name} imports {target}")
    return sorted(set(out))


def library_imports(modules: dict[str, Module], libraries: tuple[str, ...], allowed: str) -> list[str]:
    """``path:line: library`` for every import of one of ``libraries`` outside the modules named
    ``allowed`` or under it."""
    out = []
    for name, module in modules.items():
        if name == allowed or name.startswith(allowed + "."):
            continue
        where = module.path.relative_to(CHECKOUT) if module.path.is_relative_to(CHECKOUT) else module.path
        for node in ast.walk(ast.parse(module.path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            out += [f"{where}:{node.lineno}: {n}" for n in names
                    if n.split(".")[0] in libraries]
    return sorted(out)


def solver_library_imports(modules: dict[str, Module]) -> list[str]:
    """``path:line: library`` for every import of a solver library outside kubeplace.solver.backends."""
    return library_imports(modules, SOLVER_LIBRARIES, BACKENDS)


def test_every_product_package_has_a_layer() -> None:
    assert sorted(p for layer in LAYERS for p in layer if p != "plugins") == sorted(PRODUCT)
    assert {layer_of(m) for m in product_modules()} == {None, *range(len(LAYERS))}


def test_packages_import_only_down_the_layers() -> None:
    found = layer_violations(product_modules())
    assert found == [], "\n".join(found)


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    upward = tmp_path / "upward.py"
    upward.write_text("def f() -> None:\n    from kubeplace.solver.backends import BACKENDS\n")
    modules = {**product_modules(), "kubeplace.models.upward": Module("kubeplace.models.upward", upward, False)}
    assert [v.split(": ", 1)[1] for v in layer_violations(modules)] == [
        "kubeplace.models.upward imports kubeplace.solver.backends"]


def test_only_the_backends_import_a_solver_library_so_nothing_else_calls_a_solver_directly() -> None:
    found = solver_library_imports(product_modules())
    assert found == [], "\n".join(found)
    modules = product_modules()
    assert any(name.startswith("kubeplace.models.plugins.") for name in modules)
    assert library_imports(modules, SOLVER_LIBRARIES, "kubeplace.no_such_package") != []  # (it sees the backends')


def test_the_solver_library_check_sees_a_search_calling_highs_itself(tmp_path: Path) -> None:
    search = tmp_path / "search.py"
    search.write_text("def f() -> None:\n    import highspy\n\n    highspy.Highs()\n")
    modules = {**product_modules(), "kubeplace.solver.search": Module("kubeplace.solver.search", search, False)}
    assert [v.split(": ", 1)[1] for v in solver_library_imports(modules)] == ["highspy"]


def test_only_the_ray_runner_imports_ray_so_nothing_else_needs_the_extra() -> None:
    modules = product_modules()
    assert RAY_RUNNER in modules
    assert library_imports(modules, ("ray",), RAY_RUNNER) == []
    assert library_imports(modules, ("ray",), "kubeplace.solver") != []  # (the check sees the runner's import)


def _rule_verifier(name: str) -> bool:
    return name.startswith("kubeplace.models.plugins.") and name.endswith(".verify")


def rule_verifier_imports(modules: dict[str, Module]) -> list[str]:
    """``path:line: target`` for every product import of a rule's verifier check
    (``models/plugins/<rule>/verify.py``) outside ``kubeplace.kube`` and the other rules' checks:
    the check is independent of the model it verifies."""
    out = []
    for name, module in modules.items():
        if _rule_verifier(name):
            where = module.path.relative_to(CHECKOUT) if module.path.is_relative_to(CHECKOUT) else module.path
            out += [f"{where}:{line}: {target}"
                    for target, _, line in imports(module, modules)
                    if not target.startswith("kubeplace.kube") and not _rule_verifier(target)]
    return sorted(out)


def test_a_rules_verifier_imports_only_kube() -> None:
    modules = product_modules()
    assert any(name.endswith(".verify") for name in modules if name.startswith("kubeplace.models.plugins."))
    assert rule_verifier_imports(modules) == []


def test_the_verifier_import_check_sees_a_model_import(tmp_path: Path) -> None:
    check = tmp_path / "verify.py"
    check.write_text("from kubeplace.models.problem import Rule\n")
    name = "kubeplace.models.plugins.sample.verify"
    modules = {**product_modules(), name: Module(name, check, False)}
    assert [v.split(": ", 1)[1] for v in rule_verifier_imports(modules)] == ["kubeplace.models.problem"]


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
    violations = layer_violations(mods)
    print(f"layer violations: {len(violations)}")
    for v in violations:
        print("  " + v)
    found = cycles(import_graph(mods))
    print(f"product modules: {len(mods)}")
    print(f"import cycles (strongly connected components): {len(found)}")
    for c in found:
        print("  " + " <-> ".join(c))
    uses = private_uses(mods)
    print(f"private names used across modules: {len(uses)}")
    for u in uses:
        print("  " + u)


RULE_FOLDER_FILES = {"plugin", "args", "score", "verify", "emulate"}
"""The files every rule's folder may hold (``models/plugins/<rule>/``): the same names by design."""


def repeated_module_names(modules: dict[str, Module]) -> dict[str, list[str]]:
    """File names that two product modules share, outside the rule folders' own files and the
    command-line modules (``cli.serve`` is the command of the ``serve`` package, by design)."""
    by_file: dict[str, list[str]] = {}
    for name, module in modules.items():
        parts = name.split(".")
        if module.package or parts[1] == "cli" or (parts[1:3] == ["models", "plugins"] and
                                                   len(parts) == 5 and parts[-1] in RULE_FOLDER_FILES):
            continue
        by_file.setdefault(parts[-1], []).append(name)
    return {file: names for file, names in by_file.items() if len(names) > 1}


def test_no_two_product_modules_share_a_file_name() -> None:
    """A name says which concept a module holds: ``preempt.py`` in three packages said none."""
    assert repeated_module_names(product_modules()) == {}


def test_the_name_check_sees_a_repeated_name() -> None:
    modules = {n: Module(n, Path(n), False) for n in ("kubeplace.solver.greedy", "kubeplace.rebalance.greedy",
                                                      "kubeplace.models.plugins.tenant.verify")}
    assert repeated_module_names(modules) == {"greedy": ["kubeplace.solver.greedy", "kubeplace.rebalance.greedy"]}
