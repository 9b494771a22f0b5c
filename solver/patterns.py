"""Column generation over node patterns per node kind (cutting stock, Gilmore-Gomory).

The kind model of solver/bound.py pools the capacity of all nodes of a kind and ignores
how GPU shares pack onto devices, so its plan cannot always be realised node by node.
Here a column is a whole node: a pattern says how many pods of each class ONE node
holds, with a feasible packing of its GPU pods onto the node's devices. The master LP

    max sum_{k,p} value(p) * lambda[k, p]
    s.t. sum_p lambda[k, p] <= nodes of kind k               (dual mu_k)
         sum_{k,p} pattern[k, p][c] * lambda[k, p] <= count[c] (dual pi_c)

is priced per kind by solver/pricing.py. For any pi >= 0 the Lagrangian bound
sum_c pi_c count_c + sum_k nodes_k * max_p sum_c (weight_c - pi_c) pattern_p[c] bounds
every placement from above, so each iteration where every kind's pricing returned a
bound gives a proved bound (at convergence it equals the LP value).

The integer answer is the better of a MIP over the generated columns and the rounded
LP, each completed by the greedy on the pods left, and is checked by ``_valid``.

Out of scope: problems with group caps (host ports), gangs or inter-pod rules get ``assignment=None``.
Kinds are those of solver/bound.py refined by the free milli of each device, so nodes
partly used by bound pods simply form their own kinds.
"""

from __future__ import annotations

import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from kubeplace.models.fragmentation import FloatArray
from kubeplace.models.problem import Assignment, DeviceUse, IntArray, Problem
from kubeplace.solver.backends.highs_lp import INF, HighsLp
from kubeplace.solver.backends.milp import LARGE_COEFFICIENT
from kubeplace.solver.budget import Budget
from kubeplace.solver.greedy import BEST_FIT, SPREAD, greedy
from kubeplace.solver.pricing import NodeShape, Pattern, Priced, canonical, price
from kubeplace.solver.shares import (
    BOUND_PASS_MIN_SECONDS,
    BOUND_SHARE,
    FILL_SECONDS,
    HIGHS_LP_MIN_SECONDS,
    HIGHS_MIP_MIN_SECONDS,
    PATTERN_END_SHARE,
    PATTERN_MIP_SHARE,
    PRICE_SECONDS,
)
from kubeplace.solver.state import PlacementState

log = logging.getLogger(__name__)
PRICING_THREADS = 2
TOL = 1e-7
"""Relative reduced profit below which a column does not count as improving."""


@dataclass(frozen=True)
class PatternResult:
    assignment: Assignment | None
    lp_value: float
    proved_bound: float | None  # upper bound on the placed weight of any placement
    iterations: int
    columns: int
    seconds: float


@dataclass(frozen=True)
class Kinds:
    """Nodes grouped by free resources, eligibility column and free milli per device."""

    of_node: IntArray  # (N,) kind per node
    nodes: list[IntArray]  # per kind: its nodes
    shapes: list[NodeShape]


def kinds_of(problem: Problem) -> Kinds:
    devs = -np.sort(-problem.device_free, axis=1) if problem.has_devices else np.zeros((problem.n_nodes, 0))
    keys = np.concatenate([problem.free, problem.eligible.T.astype(np.int64), devs.astype(np.int64)], axis=1)
    _, kind = np.unique(keys, axis=0, return_inverse=True)
    kind = kind.reshape(-1).astype(np.int64)
    nodes = [np.nonzero(kind == k)[0] for k in range(int(kind.max()) + 1 if len(kind) else 0)]
    shapes = [NodeShape(problem.free[ns[0]].copy(), _present(devs[ns[0]]), np.nonzero(problem.eligible[:, ns[0]])[0])
              for ns in nodes]
    return Kinds(kind, nodes, shapes)


def _present(row: IntArray) -> IntArray:
    return np.asarray(row[row >= 0], dtype=np.int64)


def device_slots(problem: Problem, node: int) -> IntArray:
    """The node's device indices in slot order (decreasing free milli, stable)."""
    if not problem.has_devices:
        return np.zeros(0, dtype=np.int64)
    row = problem.device_free[node]
    order = np.argsort(-row, kind="stable")
    return np.asarray(order[row[order] >= 0], dtype=np.int64)


def _milli(problem: Problem) -> IntArray:
    return problem.gpu_milli if problem.has_devices else np.zeros(problem.n_classes, dtype=np.int64)


class Master:
    """The master LP in HiGHS; columns are added as pricing finds them."""

    def __init__(self, problem: Problem, kinds: Kinds) -> None:
        self.problem, self.n_kinds = problem, len(kinds.nodes)
        self.h = HighsLp(maximize=True, options={"large_matrix_value": LARGE_COEFFICIENT,
                                                 "user_objective_scale": objective_scale(problem)})
        upper = np.concatenate([[len(ns) for ns in kinds.nodes], problem.count]).astype(np.float64)
        self.h.add_empty_rows(np.full(len(upper), -INF), upper)
        self.kind: list[int] = []
        self.patterns: list[Pattern] = []
        self.index: dict[tuple[int, bytes], int] = {}

    def add(self, k: int, pattern: Pattern) -> int:
        """Column index of the pattern in kind k (added when new)."""
        key = (k, pattern.key())
        if key not in self.index:
            rows = np.concatenate([[k], self.n_kinds + pattern.cls]).astype(np.int32)
            vals = np.concatenate([[1.0], pattern.n]).astype(np.float64)
            cost = float(self.problem.weight[pattern.cls] @ pattern.n)
            self.h.add_col(cost, 0.0, INF, rows, vals)
            self.index[key] = len(self.patterns)
            self.kind.append(k)
            self.patterns.append(pattern)
        return self.index[key]

    def of_kind(self, k: int) -> list[Pattern]:
        return [p for p, kk in zip(self.patterns, self.kind, strict=True) if kk == k]

    def solve(self, time_limit: float) -> tuple[float, FloatArray, FloatArray, FloatArray] | None:
        """(LP value, pi >= 0 per class, mu >= 0 per kind, lambda), or None when the time
        limit came first. HiGHS has no limit unless told: on openb gpuspec33 a degenerate
        master LP once ran 18.6 s past the generation's deadline, which left the LNS almost
        no time and the plan at or near the greedy's."""
        if not self.h.solve(max(HIGHS_LP_MIN_SECONDS, time_limit)):
            return None
        dual = np.maximum(self.h.row_duals(), 0.0)
        return self.h.objective(), dual[self.n_kinds:], dual[: self.n_kinds], self.h.values()

    def integer(self, hint: FloatArray, time_limit: float) -> FloatArray | None:
        """lambda of the MIP over the columns so far (started from ``hint``)."""
        n = len(self.patterns)
        self.h.set_integer(np.arange(n, dtype=np.int32))
        self.h.solve(max(HIGHS_MIP_MIN_SECONDS, time_limit), mip_gap=1e-5, hint=hint)
        values = self.h.values()
        return values if len(values) == n and self.h.feasible() else None


def objective_scale(problem: Problem) -> int:
    """The power of two HiGHS scales the master's costs by (results come back unscaled).
    With the GPU placement weight a column costs up to ~1e8 and HiGHS warns of excessively
    large costs; scaled, the master LPs of openb gpuspec33 each took under a second (the
    slowest unscaled one took 18.6 s) and the generation ran about twice as many
    iterations in the same time."""
    return -math.ceil(math.log2(max(1, int(problem.weight.max(initial=1)) * 10)))


def incumbent_patterns(problem: Problem, kinds: Kinds, a: Assignment) -> list[tuple[int, Pattern]]:
    """(kind, pattern) of every node, from an assignment's actual node contents."""
    d = a.devices
    out = []
    with_devices = problem.has_devices
    by_node = np.lexsort((a.cls, a.node))  # each node's pairs together, by class (pairs are unique)
    starts = np.searchsorted(a.node[by_node], np.arange(problem.n_nodes + 1))
    devices_by_node = np.argsort(d.node, kind="stable")
    device_starts = np.searchsorted(d.node[devices_by_node], np.arange(problem.n_nodes + 1))
    no_slots = np.zeros(0, dtype=np.int64)
    for i in range(problem.n_nodes):
        on = by_node[starts[i]:starts[i + 1]]
        cls, n = a.cls[on], a.counts[on]
        slot_of = {int(dev): s for s, dev in enumerate(device_slots(problem, i) if with_devices else no_slots)}
        slots = np.zeros((len(cls), len(slot_of)), dtype=np.int64)
        pos = {int(c): j for j, c in enumerate(cls)}
        used = devices_by_node[device_starts[i]:device_starts[i + 1]]
        for c, dev, k in zip(d.cls[used].tolist(), d.device[used].tolist(), d.counts[used].tolist(), strict=True):
            slots[pos[c], slot_of[dev]] += k
        k = int(kinds.of_node[i])
        out.append((k, canonical(Pattern(cls, n, slots), kinds.shapes[k].devices, _milli(problem))))
    return out


@dataclass
class _Generation:
    lp_value: float = 0.0
    bound: float | None = None
    iterations: int = 0
    lam: FloatArray | None = None


def generate(problem: Problem, kinds: Kinds, master: Master, budget: Budget, seed: int) -> _Generation:
    """Column generation until no kind prices out or the budget is spent.

    Pricing is heuristic first (CP-SAT only for kinds where the heuristics find no
    column); when an iteration finds none at all, a bound pass gives CP-SAT the time
    left, by kind size, to find columns or prove the bound."""
    out, started, exact = _Generation(), time.monotonic(), False
    weight = np.array([len(ns) * (len(sh.devices) + 1) for ns, sh in zip(kinds.nodes, kinds.shapes, strict=True)])
    with ThreadPoolExecutor(PRICING_THREADS) as pool:
        while True:
            solved = master.solve(budget.left())
            if solved is None:
                return out
            out.lp_value, pi, mu, out.lam = solved
            left = budget.left()
            if left <= 0:
                return out
            out.iterations += 1
            share = BOUND_SHARE * left * PRICING_THREADS * weight / weight.sum()
            limits = np.clip(share, BOUND_PASS_MIN_SECONDS, BOUND_SHARE * left) if exact \
                else np.full(len(weight), PRICE_SECONDS)
            results = _price_all(problem, kinds, master, pool, problem.weight - pi, mu, limits, budget, seed, exact)
            if results is None:
                return out
            before = len(master.patterns)
            for k, res in results.items():
                for pattern in res.patterns:
                    master.add(k, pattern)
            bound = float(pi @ problem.count) + sum(len(kinds.nodes[k]) * r.bound for k, r in results.items())
            out.bound = bound if out.bound is None or not np.isfinite(out.bound) else min(out.bound, bound)
            log.debug("iteration %d: lp %.8g bound %.8g columns %d %.1fs%s", out.iterations, out.lp_value, bound,
                      len(master.patterns), time.monotonic() - started, " (bound pass)" if exact else "")
            if len(master.patterns) == before:
                if exact or all(r.bound <= mu[k] * (1 + TOL) + TOL for k, r in results.items()):
                    return out
                exact = True
            else:
                exact = False


def _price_all(problem: Problem, kinds: Kinds, master: Master, pool: ThreadPoolExecutor, profit: FloatArray,
               mu: FloatArray, limits: FloatArray, budget: Budget, seed: int,
               bound_pass: bool) -> dict[int, Priced] | None:
    """Every kind priced (largest first, in parallel), each within its ``limits``; None when the
    budget was spent first."""
    def one(k: int) -> Priced | None:
        if budget.left() <= 0:
            return None
        return price(problem, kinds.shapes[k], profit, float(mu[k]), budget.within(float(limits[k])),
                     TOL * max(1.0, float(mu[k])), master.of_kind(k), seed, bound_pass)

    order = np.argsort(-limits * [len(ns) for ns in kinds.nodes], kind="stable").tolist()
    results = dict(zip(order, pool.map(one, order), strict=True))
    return None if any(r is None for r in results.values()) else results


def realise(problem: Problem, kinds: Kinds, master: Master, lam: FloatArray) -> Assignment:
    """Patterns onto concrete nodes: ``lam[j]`` nodes of column j's kind each hold it."""
    cls: list[int] = []
    node: list[int] = []
    cnt: list[int] = []
    dev: list[tuple[int, int, int, int]] = []
    free_nodes = [list(ns.tolist()) for ns in kinds.nodes]
    for j in np.argsort(-lam, kind="stable").tolist():
        k, pattern = master.kind[j], master.patterns[j]
        for _ in range(int(np.floor(lam[j] + 1e-6))):
            if not free_nodes[k]:
                break
            i = free_nodes[k].pop(0)
            order = device_slots(problem, i)
            for row, (c, n) in enumerate(zip(pattern.cls.tolist(), pattern.n.tolist(), strict=True)):
                cls.append(c)
                node.append(i)
                cnt.append(n)
                dev += [(c, i, int(order[d]), int(v)) for d, v in enumerate(pattern.slots[row].tolist()) if v]
    arr = np.array(dev, dtype=np.int64).reshape(-1, 4)
    return Assignment(np.array(cls, dtype=np.int64), np.array(node, dtype=np.int64), np.array(cnt, dtype=np.int64),
                      DeviceUse(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]))


def complete(problem: Problem, fixed: Assignment) -> Assignment:
    """The pods left over, by the greedy (best of best-fit and spread) around ``fixed``."""
    state = PlacementState.start(problem, fixed)
    options = [greedy(problem, policy, state=state.copy()) for policy in (BEST_FIT, SPREAD)]
    return max(options, key=lambda a: int((problem.weight[a.cls] * a.counts).sum()))


def _valid(problem: Problem, a: Assignment) -> bool:
    """Independent check: counts, eligibility, node capacity and per-device shares."""
    if len(a.cls) and (a.counts.min() <= 0 or not problem.eligible[a.cls, a.node].all()):
        return False
    if (a.placed_per_class(problem.n_classes) > problem.count).any():
        return False
    if len(np.unique(a.cls * problem.n_nodes + a.node)) != len(a.cls):
        return False
    load = a.load(problem)
    if ((load > 0) & (load > problem.free)).any():
        return False
    return _devices_valid(problem, a)


def _devices_valid(problem: Problem, a: Assignment) -> bool:
    d = a.devices
    if not problem.has_devices:
        return len(d.cls) == 0
    if len(d.cls) and (d.counts.min() <= 0 or (problem.device_free[d.node, d.device] < 0).any()):
        return False
    per_pair = np.zeros((problem.n_classes, problem.n_nodes), dtype=np.int64)
    np.add.at(per_pair, (d.cls, d.node), d.counts)
    pods = a.dense(problem.n_classes, problem.n_nodes)
    if (per_pair != problem.gpu_count[:, None] * pods).any() or (d.counts > pods[d.cls, d.node]).any():
        return False  # a pod on count distinct devices: at most one slot per pod per device
    used = np.zeros_like(problem.device_free)
    np.add.at(used, (d.node, d.device), problem.gpu_milli[d.cls] * d.counts)
    return bool((used <= np.maximum(problem.device_free, 0)).all())


def _weight(problem: Problem, a: Assignment) -> int:
    return int((problem.weight[a.cls] * a.counts).sum())


def pattern_placement(problem: Problem, incumbent: Assignment, budget: Budget, seed: int = 0) -> PatternResult:
    """Column generation within ``budget``, then the best integer placement
    found from its columns (None when out of scope or when it fails the check)."""
    started = time.monotonic()
    out_of_scope = problem.group_caps or problem.gangs or problem.has_domain_rules
    if out_of_scope or problem.n_nodes == 0 or problem.n_classes == 0:
        return PatternResult(None, 0.0, None, 0, 0, 0.0)
    kinds = kinds_of(problem)
    master = Master(problem, kinds)
    used = [master.add(k, p) for k, p in incumbent_patterns(problem, kinds, incumbent)]
    gen = generate(problem, kinds, master, budget.first(1 - PATTERN_MIP_SHARE), seed)
    hint = np.bincount(used, minlength=len(master.patterns)).astype(np.float64)
    candidates = [] if gen.lam is None else [np.floor(gen.lam + 1e-6)]
    lam = master.integer(hint, budget.first(PATTERN_END_SHARE).left() - FILL_SECONDS)
    if lam is not None:
        candidates.insert(0, lam)
    log.debug("mip %s after %.1fs", lam is not None, time.monotonic() - started)
    best: Assignment | None = None
    for lam in candidates:
        a = complete(problem, realise(problem, kinds, master, lam))
        if _valid(problem, a) and (best is None or _weight(problem, a) > _weight(problem, best)):
            best = a
        if budget.left() < FILL_SECONDS:
            break
    bound = gen.bound if gen.bound is not None and np.isfinite(gen.bound) else None
    return PatternResult(best, gen.lp_value, bound, gen.iterations, len(master.patterns), time.monotonic() - started)
