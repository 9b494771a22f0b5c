"""``models.formulation.capacity_rows``: the capacity and group-cap rows of every node role, and the one
place that writes them.

Each mode's semantics is a parameter of its role, not a copy: plan leaves out a row that can never
bind, rebalance lets a node already overcommitted by the pods that may move stay as it is,
consolidation's bought templates hold pods only when bought, preemption's level counts the victims
it may not evict once a pod of the level goes there. The structure check fails when a
product module outside the writer adds a row built from a node's room (``free``, ``allocatable``,
``capacity``), to any builder, but for the exceptions OTHER_ROWS names with their reasons.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from kubeplace.models.formulation.capacity_rows import (
    BuyableTemplates,
    ExistingNodes,
    Pairs,
    PreemptionLevel,
    RemovableNodes,
    bought_rows,
    capacity_rows,
    group_cap_rows,
    level_rows,
    removal_rows,
)
from kubeplace.models.linear import INF, LinearBuilder, LinearModel
from kubeplace.models.problem import GroupCap
from tests.test_structure import CHECKOUT, Module, product_modules

WRITER = "kubeplace.models.formulation.capacity_rows"
ROOM = frozenset({"free", "allocatable", "capacity"})
"""The attributes (and parameters) that hold a node's room: a row built from one is a capacity row."""
ADD_ROW = frozenset({"add_row", "add_rows", "add_le", "add_ge", "add_eq"})
"""How a row is added: a ``LinearBuilder``'s or ``HighsLp``'s ``add_row(s)``, an ``IntModel``'s ``add_le``..."""
OTHER_ROWS = {
    ("kubeplace.models.linear_terms", "balance_cut"):
        "not a capacity row: the balance term's tangent cuts read a node's load over its capacity",
    ("kubeplace.solver.cutting_stock_exact", "_pods"):
        "not a capacity row: an item's pods on a slot, at most as many as fit there alone, and none unless used",
}
"""Functions that build rows from a node's room outside the writer, each with why it is not a
capacity row. The cutting stock (its aggregated bound, its pricing knapsack, its exact model's
slots) and the pattern pricing's knapsack have their capacity rows from the writer too."""
def rows(model: LinearModel) -> list[tuple[list[tuple[int, int]], int, int]]:
    out = []
    for r in range(model.n_rows):
        cols, coefs = model.row(r)
        out.append((list(zip(cols.tolist(), coefs.tolist(), strict=True)), int(model.row_lb[r]),
                    int(model.row_ub[r])))
    return out


def two_nodes() -> tuple[LinearBuilder, Pairs]:
    """Classes 0 (2 CPU, 0 memory) and 1 (1 CPU, 4 memory) on nodes 0 and 1, at most 3 pods each."""
    lb = LinearBuilder()
    var = lb.add_vars(np.zeros(4, np.int64), np.full(4, 3))
    demand = np.array([[2, 0], [1, 4]], dtype=np.int64)
    return lb, Pairs(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), var, np.full(4, 3, np.int64), demand)


def test_a_row_per_node_and_requested_resource_within_its_room() -> None:
    lb, pairs = two_nodes()
    capacity_rows(lb, pairs, ExistingNodes(np.array([0, 1]), np.array([[4, 8], [100, 100]])))
    assert rows(lb.build(maximize=False)) == [
        ([(0, 2), (2, 1)], -INF, 4), ([(2, 4)], -INF, 8), ([(1, 2), (3, 1)], -INF, 100), ([(3, 4)], -INF, 100)]


def test_resource_major_changes_only_the_order_of_the_rows() -> None:
    lb, pairs = two_nodes()
    capacity_rows(lb, pairs, ExistingNodes(np.array([0, 1]), np.array([[4, 8], [100, 100]])), resource_major=True)
    assert rows(lb.build(maximize=False)) == [
        ([(0, 2), (2, 1)], -INF, 4), ([(1, 2), (3, 1)], -INF, 100), ([(2, 4)], -INF, 8), ([(3, 4)], -INF, 100)]


def test_plan_leaves_out_the_rows_that_can_never_bind() -> None:
    lb, pairs = two_nodes()  # node 1 holds 3 x 2 + 3 x 1 = 9 CPU and 12 memory at most: its rows never bind
    capacity_rows(lb, pairs, ExistingNodes(np.array([0, 1]), np.array([[4, 8], [9, 12]]), skip_slack=True))
    assert rows(lb.build(maximize=False)) == [([(0, 2), (2, 1)], -INF, 4), ([(2, 4)], -INF, 8)]


def test_rebalance_lets_an_overcommitted_node_stay_as_it_is() -> None:
    lb, pairs = two_nodes()  # node 0 holds 3 pods of class 0 now: 6 CPU on a room of 4
    role = ExistingNodes(np.array([0, 1]), np.array([[4, 8], [4, 8]]), current=np.array([3, 0, 0, 0]))
    capacity_rows(lb, pairs, role)
    assert [bound for _, _, bound in rows(lb.build(maximize=False))] == [6, 8, 4, 8]


def test_a_bought_template_holds_pods_only_when_bought() -> None:
    lb, pairs = two_nodes()
    (bought,) = lb.add_vars(np.zeros(1, np.int64), np.ones(1, np.int64))
    bought_rows(lb, pairs, BuyableTemplates(np.array([1]), np.array([bought]), np.array([[16, 32]])))
    assert rows(lb.build(maximize=False)) == [([(1, 2), (3, 1), (4, -16)], -INF, 0), ([(3, 4), (4, -32)], -INF, 0)]


def test_a_bought_template_holds_at_most_its_count_times_the_most_one_node_holds() -> None:
    lb, pairs = two_nodes()  # template node 1: at most 1 pod of class 0 and 3 of class 1 on one node
    (bought,) = lb.add_vars(np.zeros(1, np.int64), np.full(1, 5, np.int64))
    role = BuyableTemplates(np.array([1]), np.array([bought]), np.array([[16, 32]]), most=np.array([[1, 3]]))
    bought_rows(lb, pairs, role)  # class 1's maximum is its pairs' upper bound: no row
    assert rows(lb.build(maximize=False)) == [
        ([(1, 2), (3, 1), (4, -16)], -INF, 0), ([(3, 4), (4, -32)], -INF, 0), ([(1, 1), (4, -1)], -INF, 0)]


def test_a_removed_node_holds_nothing_a_kept_one_keeps_its_pods_and_the_others_keep_theirs() -> None:
    lb, pairs = two_nodes()  # node 0 may go (binary 4) and holds 2 pods of class 0; node 1 holds 1 of class 1
    (removed,) = lb.add_vars(np.zeros(1, np.int64), np.ones(1, np.int64))
    removal_rows(lb, pairs, RemovableNodes(np.array([0]), np.array([removed]), np.array([2, 0, 0, 1])))
    assert rows(lb.build(maximize=False)) == [
        ([(0, 1), (4, 3)], -INF, 3), ([(0, 1), (4, 2)], 2, INF),  # pair 0: removed -> 0; kept -> its 2 stay
        ([(2, 1), (4, 3)], -INF, 3),  # pair 2: nothing there now, nothing once removed
        ([(3, 1)], 1, INF)]  # node 1 keeps its pod


def test_group_caps_per_node_as_each_role_says() -> None:
    cap = GroupCap("hostPort TCP/80", (0, 1), np.array([1, 5]))
    lb, pairs = two_nodes()
    group_cap_rows(lb, pairs, ExistingNodes(np.array([0, 1]), np.zeros((2, 2), np.int64), skip_slack=True), [cap])
    assert rows(lb.build(maximize=False)) == [([(0, 1), (2, 1)], -INF, 1), ([(1, 1), (3, 1)], -INF, 5)]
    lb, pairs = two_nodes()  # 6 may go on node 1 (3 + 3): its cap of 5 binds; with skip_slack a cap of 6 would not
    role = ExistingNodes(np.array([0, 1]), np.zeros((2, 2), np.int64), current=np.array([0, 0, 2, 0]))
    group_cap_rows(lb, pairs, role, [cap])
    assert [bound for _, _, bound in rows(lb.build(maximize=False))] == [2, 5]


def test_a_preemption_level_holds_the_victims_it_may_not_evict_once_its_flag_is_set() -> None:
    lb, pairs = two_nodes()  # pairs 0 and 2 on node 0; a victim below the level (variable 4) is kept or not
    kept, flag = lb.add_vars(np.zeros(2, np.int64), np.array([1, 1]))
    here = Pairs(pairs.cls[[0, 2]], pairs.node[[0, 2]], pairs.var[[0, 2]], pairs.ub[[0, 2]], pairs.demand)
    level = PreemptionLevel(np.array([10, 20]), int(flag), np.array([3, 0]), np.array([kept]), np.array([[1, 2]]))
    level_rows(lb, here, level)  # memory: nothing held above the level, the capacity row says it all
    assert rows(lb.build(maximize=False)) == [([(0, 2), (2, 1), (4, 1), (5, 3)], -INF, 10)]


def room_rows(modules: dict[str, Module]) -> list[str]:
    """``path:line: function`` for every function outside the writer (and OTHER_ROWS) that adds a
    row (ADD_ROW) whose arguments read a node's room: an attribute or parameter in ROOM, or a local
    name assigned (directly or through other names) from an expression that reads one."""
    out = []
    for name, module in modules.items():
        if name == WRITER:
            continue
        for fn in ast.walk(ast.parse(module.path.read_text())):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and (name, fn.name) not in OTHER_ROWS \
                    and _adds_room_rows(fn):
                where = module.path.relative_to(CHECKOUT) if module.path.is_relative_to(CHECKOUT) else module.path
                out.append(f"{where}:{fn.lineno}: {fn.name}")
    return sorted(out)


def _adds_room_rows(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    tainted = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs] if a.arg in ROOM}

    def reads_room(expr: ast.AST) -> bool:
        return any((isinstance(n, ast.Attribute) and n.attr in ROOM) or (isinstance(n, ast.Name) and n.id in tainted)
                   for n in ast.walk(expr))

    assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.For)]
    while True:  # names assigned from the room, to a fixed point
        before = len(tainted)
        for node in assigns:
            value = node.iter if isinstance(node, ast.For) else node.value
            targets = [node.target] if not isinstance(node, ast.Assign) else node.targets
            if value is not None and reads_room(value):
                tainted |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if len(tainted) == before:
            break
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ADD_ROW]
    return any(reads_room(arg) for call in calls for arg in [*call.args, *(k.value for k in call.keywords)])


def test_only_the_writer_builds_rows_from_a_nodes_room() -> None:
    found = room_rows(product_modules())
    assert found == [], "capacity rows written outside models/formulation/capacity_rows.py:\n" + "\n".join(found)
    modules = product_modules()
    for (name, function), why in OTHER_ROWS.items():  # each still there and still adding rows from a room
        fns = [fn for fn in ast.walk(ast.parse(modules[name].path.read_text()))
               if isinstance(fn, ast.FunctionDef) and fn.name == function]
        assert len(fns) == 1 and _adds_room_rows(fns[0]), f"{name}.{function} ({why}): gone, drop it from OTHER_ROWS"


def test_the_room_check_sees_a_mode_writing_its_own_capacity_rows(tmp_path: Path) -> None:
    own = tmp_path / "own.py"
    own.write_text("def rows(lb, layout, cols, coefs, i, r):\n"
                   "    cap = max(int(layout.free[i, r]), 0)\n"
                   "    bound = cap\n"
                   "    lb.add_row(cols, coefs, -1, bound)\n"
                   "def fine(lb, layout, cols, coefs):\n"
                   "    lb.add_row(cols, coefs, -1, 0)\n"
                   "    return layout.free\n"
                   "def slots(m, capacity, terms, used):\n"  # another builder, the room as a parameter
                   "    m.add_le([*terms, (-int(capacity[0]), used)], 0)\n")
    modules = {**product_modules(), "kubeplace.rebalance.own": Module("kubeplace.rebalance.own", own, False)}
    assert [v.rsplit(": ", 1)[1] for v in room_rows(modules)] == ["rows", "slots"]
