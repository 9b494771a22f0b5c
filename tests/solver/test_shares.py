"""Every solver phase's time share is named once, in ``solver.shares``: no bare time share or
time constant elsewhere in the solver phases.

What counts as a time expression (checked with the AST, so it is precise, not a grep):

in ``solver/`` (but its backends), ``plan/``, ``rebalance/`` and serve's cycle (what spends a solve's time):

- a module-level number named ``*_SHARE``, ``*_SHARES`` or ``*_SECONDS``;
- a number (but 0 and 1) in the arguments of a ``Budget`` method (``split``, ``part``, ``first``, ``within``,
  ``at_least``, ``shortened``, ``Budget.of``);
- a number in a ``time_limit=`` keyword (``replace(settings, time_limit=...)``, ``SolverSettings``);
- a number beside time (``time.monotonic()``, ``x.left()``, ``left``, ``seconds``,
  ``settings.time_limit``, ...) in arithmetic, a comparison, ``min`` or ``max``.

Run as a script it prints what it finds.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(CHECKOUT / "tests"))
from test_structure import product_modules  # noqa: E402

SHARES = CHECKOUT / "solver" / "shares.py"
PHASES = ("solver", "plan", "rebalance")
CYCLE = "serve/loop.py"
BACKENDS = "solver/backends/"
"""The backends turn a call's seconds into each library's own limit (CP-SAT's deterministic time,
the MILP's build time): their arithmetic is the library's, not a phase's share."""
BUDGET_METHODS = {"split", "part", "first", "within", "at_least", "shortened"}
NOT_TIME_SHARES = {
    ("solver/repair.py", "RUIN_SHARE"): "a share of the nodes a ruin frees, not of time",
    ("rebalance/apply.py", "LEASE_SECONDS"): "the Lease's duration on the API server, not solver time",
    ("rebalance/apply.py", "LEASE_RENEW_SECONDS"): "how often a held Lease is renewed, not solver time",
    ("rebalance/apply.py", "TARGETS_TTL_SECONDS"): "a ConfigMap's lifetime, not solver time",
}
"""Constants whose names say share or seconds but that are no part of a solve's time budget."""


def _numbers(node: ast.AST) -> bool:
    """A numeric literal anywhere in ``node`` but 0 and 1, which are no shares (``1 - SHARE`` is
    the rest of a named share, ``left() <= 0`` nothing left, ``max(n, 1)`` a guard)."""
    return any(isinstance(n, ast.Constant) and type(n.value) in (int, float) and n.value not in (0, 1)
               for n in ast.walk(node))


def _strings(node: ast.Call) -> bool:
    """A string argument: ``str.split(".", 1)``, not ``Budget.split``."""
    return any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)


TIME_NAMES = {"left", "seconds", "time_limit", "deadline", "limit", "budget", "left_over"}
"""Variables and attributes that hold a solve's time (``settings.time_limit``, ``left``, ...)."""


def _clock(node: ast.AST) -> bool:
    """Time: ``time.monotonic()``, ``time.perf_counter()``, ``<x>.left()``, or a name or attribute
    of TIME_NAMES, alone or in arithmetic."""
    if isinstance(node, ast.BinOp):
        return _clock(node.left) or _clock(node.right)
    if isinstance(node, ast.Name):
        return node.id in TIME_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in TIME_NAMES
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    f = node.func
    return f.attr == "left" or (isinstance(f.value, ast.Name) and f.value.id == "time"
                                and f.attr in ("monotonic", "perf_counter"))


def _time_arithmetic(node: ast.AST) -> bool:
    """Time and a number side by side: in arithmetic, a comparison, or ``min``/``max``."""
    if isinstance(node, ast.BinOp):
        sides = [node.left, node.right]
    elif isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        sides = list(node.args)
    else:
        return False
    return any(_clock(s) for s in sides) and any(_numbers(s) for s in sides if not _clock(s))


def bare_time_shares() -> Iterator[str]:
    for module in product_modules().values():
        path = module.path
        if path == SHARES:
            continue
        where = path.relative_to(CHECKOUT).as_posix()
        if (where.split("/")[0] not in PHASES and where != CYCLE) or where.startswith(BACKENDS):
            continue
        tree = ast.parse(path.read_text())
        for stmt in tree.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else (
                [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else [])
            value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
            for t in targets:
                if (isinstance(t, ast.Name) and t.id.endswith(("_SHARE", "_SHARES", "_SECONDS"))
                        and value is not None and _numbers(value) and (where, t.id) not in NOT_TIME_SHARES):
                    yield f"{where}:{stmt.lineno}: {t.id} belongs in solver/shares.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                budget_call = isinstance(f, ast.Attribute) and (
                    f.attr in BUDGET_METHODS or (f.attr == "of" and isinstance(f.value, ast.Name)
                                                 and f.value.id == "Budget"))
                if budget_call and not _strings(node) and any(_numbers(a) for a in node.args):
                    yield f"{where}:{node.lineno}: a number in a Budget's {ast.unparse(f)}(...)"
                for kw in node.keywords:
                    if kw.arg == "time_limit" and _numbers(kw.value):
                        yield f"{where}:{node.lineno}: a number in time_limit={ast.unparse(kw.value)}"
            if _time_arithmetic(node):
                yield f"{where}:{getattr(node, 'lineno', 0)}: a number in {ast.unparse(node)}"


def test_no_bare_time_share_outside_the_shares_module() -> None:
    found = sorted(set(bare_time_shares()))
    assert not found, "\n".join(found)


def test_the_check_finds_each_kind() -> None:
    """The checker itself: each kind of bare share it must refuse, in a module of its own."""
    samples = {
        "X_SHARE = 0.3": "belongs in solver/shares.py",
        "b = budget.split(0.5)": "a number in a Budget's",
        "s = replace(settings, time_limit=left * 0.6)": "a number in time_limit=",
        "if run.left() > 0.1: pass": "a number in",
        "d = time.monotonic() + 2.0": "a number in",
    }
    for source, words in samples.items():
        tree = ast.parse(source)
        hits = [n for n in ast.walk(tree) if _time_arithmetic(n)]
        call_hits = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
            any(kw.arg == "time_limit" and _numbers(kw.value) for kw in n.keywords)
            or (isinstance(n.func, ast.Attribute) and n.func.attr in BUDGET_METHODS
                and any(_numbers(a) for a in n.args)))]
        named = [s for s in tree.body if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
                 and s.targets[0].id.endswith("_SHARE")]
        assert hits or call_hits or named, (source, words)


if __name__ == "__main__":
    for line in sorted(set(bare_time_shares())):
        print(line)
