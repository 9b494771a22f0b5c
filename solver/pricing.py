"""Pricing for the node-pattern column generation: the best pods for ONE node of a kind.

Given a profit per class (weight minus the dual of the class row), find counts n_c of
pods on one node maximising sum_c profit_c * n_c within the node's free resources and
with an exact packing of GPU pods onto the node's devices:

- shares of one device (gpu_count 1, milli < 1000) are grouped by milli, as pods of
  equal milli are interchangeable on devices: z[m, d] pods of milli m on device d;
- shares of several devices: y[c, d] <= n_c pods of class c on device d with
  sum_d y[c, d] = count_c * n_c (such a y always splits into n_c pods on distinct
  devices: deal each device's slots round robin over the pods);
- whole GPUs: b[d] = 1 when device d is taken whole (it must be entirely free), and
  sum_d b[d] = sum_c count_c * n_c.

Devices with equal free milli are interchangeable, so their loads are kept
non-increasing (symmetry breaking). Profits are rounded UP to integers for CP-SAT, so
CP-SAT's objective bound, divided by the scale, bounds the true best profit from above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.models.formulation.capacity_rows import ExistingNodes, Pairs, capacity_rows
from kubeplace.models.gpu import WHOLE, GpuNeed, first_fit, pods_fitting
from kubeplace.models.problem import IntArray, Problem
from kubeplace.solver.backends.cpsat_model import IntModel
from kubeplace.solver.budget import Budget
from kubeplace.solver.pricing_bound import FloatArray, copies, knapsack_table, node_bound
from kubeplace.solver.shares import PRICING_MIN_SECONDS

PROFIT_SCALE = 1_000_000
"""The largest profit of a kind becomes this integer in the CP-SAT objective."""
MAX_COLUMNS = 6
"""Improving solutions kept per pricing call (CP-SAT finds several on its way)."""
GAP = 1e-4
"""Relative gap at which pricing stops: the +1 per pod of the GPU placement weight
makes many packings nearly tie, and closing that last gap takes seconds."""


@dataclass(frozen=True)
class NodeShape:
    """What every node of a kind offers: free resources, devices, eligible classes."""

    free: IntArray  # (R,)
    devices: IntArray  # (D,) free milli of the present devices, in decreasing order
    classes: IntArray  # eligible classes


@dataclass(frozen=True)
class Pattern:
    """Pods on one node: ``n[j]`` pods of class ``cls[j]``, of which ``slots[j, d]`` use
    device slot d (the node's d-th present device by decreasing free milli)."""

    cls: IntArray
    n: IntArray
    slots: IntArray  # (len(cls), D)

    def key(self) -> bytes:
        return self.cls.tobytes() + b"|" + self.n.tobytes() + b"|" + self.slots.tobytes()

    def counts(self, n_classes: int) -> IntArray:
        out = np.zeros(n_classes, dtype=np.int64)
        out[self.cls] = self.n
        return out


@dataclass(frozen=True)
class Priced:
    patterns: list[Pattern]
    bound: float  # upper bound on the best profit of one node (>= 0: the empty node)


def need_of(problem: Problem, c: int) -> GpuNeed:
    if not problem.has_devices:
        return GpuNeed()
    return GpuNeed(int(problem.gpu_count[c]), int(problem.gpu_milli[c]))


def canonical(pattern: Pattern, devices: IntArray, milli: IntArray) -> Pattern:
    """Same pattern with devices of equal free milli sorted by decreasing load, and
    empty classes dropped: equal patterns get equal keys."""
    keep = pattern.n > 0
    cls, n, slots = pattern.cls[keep], pattern.n[keep], pattern.slots[keep]
    order = np.argsort(cls, kind="stable")
    cls, n, slots = cls[order], n[order], slots[order]
    load = (milli[cls][:, None] * slots).sum(axis=0)
    perm = np.lexsort((-load, -devices))  # devices already descending: only ties move
    return Pattern(cls.astype(np.int64), n.astype(np.int64), slots[:, perm].astype(np.int64))


class _Fill:
    """One node being filled: free resources and device shares, pods per class."""

    def __init__(self, problem: Problem, shape: NodeShape) -> None:
        self.problem, self.free, self.dev = problem, shape.free.copy(), shape.devices.copy()
        self.start = shape.free
        self.n: dict[int, int] = {}
        self.slots: dict[int, IntArray] = {}

    def room(self, c: int) -> int:
        """Pods of class c that still fit (resources, devices, pods left in the class)."""
        d = self.problem.demand[c]
        k = int(self.problem.count[c]) - self.n.get(c, 0)
        pos = d > 0
        if pos.any():
            k = min(k, int((self.free[pos] // d[pos]).min()))
        need = need_of(self.problem, c)
        return max(0, min(k, pods_fitting(self.dev, need)) if need.count else k)

    def add(self, c: int, k: int, device: int | None = None) -> None:
        """k pods of class c: on ``device`` (shares) or first-fit devices."""
        self.free -= self.problem.demand[c] * k
        self.n[c] = self.n.get(c, 0) + k
        row = self.slots.setdefault(c, np.zeros(len(self.dev), dtype=np.int64))
        need = need_of(self.problem, c)
        if need.count and device is not None:
            self.dev[device] -= need.milli * k
            row[device] += k
            return
        for _ in range(k if need.count else 0):
            for d in first_fit(self.dev, need):
                self.dev[d] -= need.milli
                row[d] += 1

    def complete(self, profit: FloatArray, classes: IntArray) -> _Fill:
        """Adds what still fits, by profit per dominant share."""
        cand = classes[profit[classes] > 0]
        size = (self.problem.demand[cand] / np.maximum(self.free, 1)).max(axis=1) + 1e-12
        for c in cand[np.argsort(-profit[cand] / size, kind="stable")].tolist():
            k = self.room(c)
            if k > 0:
                self.add(c, k)
        return self

    def feasible(self) -> bool:
        """Every resource the pods take stays within the node's free capacity (a resource the
        node is overcommitted on already is fine as long as nothing more is taken of it)."""
        return bool(((self.free >= 0) | (self.free >= self.start)).all() and (self.dev >= 0).all())

    def pattern(self) -> Pattern:
        cls = sorted(c for c, k in self.n.items() if k > 0)
        slots = np.array([self.slots[c] for c in cls], dtype=np.int64).reshape(len(cls), len(self.dev))
        return Pattern(np.array(cls, dtype=np.int64), np.array([self.n[c] for c in cls], dtype=np.int64), slots)


def greedy_pattern(problem: Problem, shape: NodeShape, profit: FloatArray) -> Pattern:
    """A quick good node: classes by profit per dominant share, as many pods as fit."""
    return _Fill(problem, shape).complete(profit, shape.classes).pattern()


def knapsack(cap: int, size: IntArray, value: FloatArray, most: IntArray) -> IntArray:
    """Copies per item of the best bounded knapsack of capacity ``cap``."""
    return copies(knapsack_table(cap, size, value, most)[1], size, cap)


def device_dp_patterns(problem: Problem, shape: NodeShape, profit: FloatArray, steps: int = 8) -> list[Pattern]:
    """Lagrangian heuristic: with a price theta on the node's other resources, the node
    splits into devices, each filled by a knapsack DP over the shares (which finds the
    exact fits, 650 + 350, that a greedy misses); theta is bisected until the node's
    resources hold, and every node found is completed greedily."""
    cand = shape.classes[profit[shape.classes] > 0]
    if len(shape.devices) == 0 or len(cand) == 0:
        return [greedy_pattern(problem, shape, profit)]
    others = shape.free > 0
    usage = (problem.demand[cand][:, others] / shape.free[others]).sum(axis=1)
    lo, hi = 0.0, float((profit[cand] / np.maximum(usage, 1e-9)).max())
    found, theta = [], 0.0
    for _ in range(steps):
        fill = _device_fill(problem, shape, profit, cand, profit[cand] - theta * usage)
        ok = fill.feasible()
        found.append(fill.complete(profit, shape.classes).pattern() if ok else None)
        if ok and theta == 0.0:
            break
        lo, hi = (lo, theta) if ok else (theta, hi)
        theta = (lo + hi) / 2 if theta else hi / 2
    return [p for p in found if p is not None] or [greedy_pattern(problem, shape, profit)]


def _device_fill(problem: Problem, shape: NodeShape, profit: FloatArray, cand: IntArray, value: FloatArray) -> _Fill:
    """Whole-GPU pods worth more per device than the best share device, then each
    device's best shares (a device's fill is reused while the counts allow it)."""
    fill = _Fill(problem, shape)
    gc, milli = problem.gpu_count[cand], problem.gpu_milli[cand]
    share = (gc == 1) & (milli < WHOLE) & (value > 0)
    unit = int(np.gcd.reduce(np.concatenate([milli[share], shape.devices[shape.devices > 0], [WHOLE]])))
    cls, size, val = cand[share], milli[share] // unit, value[share]
    left = problem.count[cls].copy()
    per_device = float(val @ knapsack(WHOLE // unit, size, val, left)) if len(cls) else 0.0
    for j in np.argsort(-value / np.maximum(gc, 1), kind="stable").tolist():
        if milli[j] >= WHOLE and value[j] > per_device * gc[j]:
            fill.add(int(cand[j]), min(fill.room(int(cand[j])), int(problem.count[cand[j]])))
    last: tuple[int, IntArray] | None = None
    for d in range(len(fill.dev)):
        cap = int(fill.dev[d]) // unit
        if cap <= 0 or len(cls) == 0:
            continue
        if last is None or last[0] != cap or (last[1] > left).any():
            last = (cap, knapsack(cap, size, val, left))
        for i in np.nonzero(last[1])[0].tolist():
            fill.add(int(cls[i]), int(last[1][i]), d)
        left = left - last[1]
    return fill


class PricingModel:
    """The CP-SAT model of one node of a kind for given profits (see the module doc)."""

    def __init__(self, problem: Problem, shape: NodeShape, profit: FloatArray) -> None:
        self.problem, self.shape = problem, shape
        self.m = IntModel()
        cand = shape.classes[profit[shape.classes] > 0]
        self.cls = cand[[self._upper(c) > 0 for c in cand.tolist()]] if len(cand) else cand
        top = float(profit[self.cls].max()) if len(self.cls) else 1.0
        self.scale = PROFIT_SCALE / top
        self.q = [math.ceil(float(profit[c]) * self.scale) for c in self.cls.tolist()]
        self.n = [self.m.int_var(0, self._upper(c), f"n{c}") for c in self.cls.tolist()]
        self._resources()
        self._devices()
        self.m.maximize(list(zip(self.q, self.n, strict=True)))

    def _upper(self, c: int) -> int:
        d, free = self.problem.demand[c], self.shape.free
        k = int(self.problem.count[c])
        pos = d > 0
        if pos.any():
            k = min(k, int((free[pos] // d[pos]).min()))
        need = need_of(self.problem, c)
        return min(k, pods_fitting(self.shape.devices, need)) if need.count else k

    def _resources(self) -> None:
        """The node's room, as the capacity writer writes an existing node's (a row that can
        never bind left out)."""
        most = np.array([self._upper(c) for c in self.cls.tolist()], dtype=np.int64)
        pairs = Pairs(self.cls.astype(np.int64), np.zeros(len(self.cls), np.int64), np.array(self.n, dtype=np.int64),
                      most, self.problem.demand)
        capacity_rows(self.m, pairs, ExistingNodes(np.zeros(1, np.int64), self.shape.free[None, :], skip_slack=True))

    def _devices(self) -> None:
        """Per-device loads (z by milli group, y for multi-device shares, b for whole)."""
        p, devs = self.problem, self.shape.devices.tolist()
        self.groups: dict[int, list[int]] = {}  # milli -> positions in self.cls
        self.multi: list[int] = []
        self.whole: list[int] = []
        self.z: dict[tuple[int, int], int] = {}
        self.y: dict[tuple[int, int], int] = {}
        self.b: dict[int, int] = {}
        for j, c in enumerate(self.cls.tolist()):
            need = need_of(p, c)
            if need.count == 0:
                continue
            if need.milli >= WHOLE:
                self.whole.append(j)
            elif need.count == 1:
                self.groups.setdefault(need.milli, []).append(j)
            else:
                self.multi.append(j)
        if not devs or not (self.groups or self.multi or self.whole):
            return
        m = self.m
        self.z = {(mi, d): m.int_var(0, f // mi, f"z{mi}_{d}") for mi in self.groups for d, f in enumerate(devs)}
        self.y = {(j, d): m.int_var(0, self._upper(int(self.cls[j])), f"y{j}_{d}")
                  for j in self.multi for d in range(len(devs))}
        self.b = {d: m.bool_var(f"b{d}") for d, f in enumerate(devs) if f >= WHOLE and self.whole}
        for mi, js in self.groups.items():
            m.add_eq([*((1, self.z[mi, d]) for d in range(len(devs))), *((-1, self.n[j]) for j in js)], 0)
        for j in self.multi:
            g = int(p.gpu_count[self.cls[j]])
            m.add_eq([*((1, self.y[j, d]) for d in range(len(devs))), (-g, self.n[j])], 0)
            for d in range(len(devs)):
                m.add_le([(1, self.y[j, d]), (-1, self.n[j])], 0)
        if self.whole:
            m.add_eq([*((1, v) for v in self.b.values()),
                      *((-int(p.gpu_count[self.cls[j]]), self.n[j]) for j in self.whole)], 0)
        loads = [self._load(d) for d in range(len(devs))]
        for d, f in enumerate(devs):
            m.add_le(loads[d], f)
            if d + 1 < len(devs) and devs[d + 1] == f:
                m.add_ge([*loads[d], *((-c, v) for c, v in loads[d + 1])], 0)

    def _load(self, d: int) -> list[tuple[int, int]]:
        """The milli used on device d, as (coefficient, variable) terms."""
        p = self.problem
        terms = [(mi, self.z[mi, d]) for mi in self.groups]
        terms += [(int(p.gpu_milli[self.cls[j]]), self.y[j, d]) for j in self.multi]
        if d in self.b:
            terms.append((WHOLE, self.b[d]))
        return terms

    def variables(self) -> list[int]:
        return [*self.n, *self.z.values(), *self.y.values(), *self.b.values()]

    def hint(self, pattern: Pattern) -> None:
        """A complete hint from a pattern restricted to the model's classes."""
        at = {c: j for j, c in enumerate(self.cls.tolist())}
        keep = np.array([c in at for c in pattern.cls.tolist()], dtype=np.bool_)
        milli = self.problem.gpu_milli if self.problem.has_devices else np.zeros(self.problem.n_classes, np.int64)
        pattern = canonical(Pattern(pattern.cls[keep], pattern.n[keep], pattern.slots[keep]), self.shape.devices, milli)
        n = np.zeros(len(self.cls), dtype=np.int64)
        slots = np.zeros((len(self.cls), len(self.shape.devices)), dtype=np.int64)
        for c, k, row in zip(pattern.cls.tolist(), pattern.n.tolist(), pattern.slots, strict=True):
            n[at[c]], slots[at[c]] = k, row
        for j, v in enumerate(self.n):
            self.m.hint(v, int(n[j]))
        for (mi, d), v in self.z.items():
            self.m.hint(v, int(sum(slots[j, d] for j in self.groups[mi])))
        for (j, d), v in self.y.items():
            self.m.hint(v, int(slots[j, d]))
        for d, v in self.b.items():
            self.m.hint(v, int(any(slots[j, d] for j in self.whole)))

    def pattern(self, values: list[int]) -> Pattern:
        """The pattern of one solution (values in the order of ``variables()``)."""
        n = np.array(values[: len(self.n)], dtype=np.int64)
        slots = np.zeros((len(self.cls), len(self.shape.devices)), dtype=np.int64)
        it = iter(values[len(self.n):])
        z = {key: next(it) for key in self.z}
        y = {key: next(it) for key in self.y}
        b = {key: next(it) for key in self.b}
        self._deal_groups(n, z, slots)
        for (j, d), v in y.items():
            slots[j, d] = v
        self._deal_whole(n, b, slots)
        return Pattern(self.cls.astype(np.int64), n, slots)

    def _deal_groups(self, n: IntArray, z: dict[tuple[int, int], int], slots: IntArray) -> None:
        for mi, js in self.groups.items():
            left = {j: int(n[j]) for j in js}
            for d in range(slots.shape[1]):
                room = z[mi, d]
                for j in js:
                    k = min(room, left[j])
                    slots[j, d] += k
                    left[j] -= k
                    room -= k

    def _deal_whole(self, n: IntArray, b: dict[int, int], slots: IntArray) -> None:
        pool = iter([d for d, v in sorted(b.items()) if v])
        for j in self.whole:
            for _ in range(int(n[j]) * int(self.problem.gpu_count[self.cls[j]])):
                slots[j, next(pool)] += 1


def price(problem: Problem, shape: NodeShape, profit: FloatArray, dual: float, budget: Budget,
          tol: float, known: Sequence[Pattern] = (), seed: int = 0, bound_pass: bool = False) -> Priced:
    """Columns whose node profit exceeds ``dual`` (the kind row's dual) by more than
    ``tol``, and an upper bound on the best node profit. CP-SAT (for what ``budget`` has left
    on entry) runs only when the heuristics found no such column; in a ``bound_pass`` the
    Lagrangian bound comes first and CP-SAT only when that bound does not exclude an
    improving column."""
    seconds = budget.left()
    milli = problem.gpu_milli if problem.has_devices else np.zeros(problem.n_classes, dtype=np.int64)

    def value(p: Pattern) -> float:
        return float(profit[p.cls] @ p.n)

    quick = [canonical(p, shape.devices, milli) for p in device_dp_patterns(problem, shape, profit)]
    good = sorted(_unique([p for p in quick if value(p) > dual + tol]), key=value, reverse=True)
    bound = math.inf
    if not bound_pass and good:
        return Priced(good[:MAX_COLUMNS], bound)
    if bound_pass:
        bound = node_bound(problem, shape.free, shape.devices, shape.classes, profit, max(map(value, [*quick, *known])))
        if bound <= dual + tol:
            return Priced(good[:MAX_COLUMNS], bound)
    model = PricingModel(problem, shape, profit)
    if len(model.cls) == 0:
        return Priced([], 0.0)
    model.hint(max([*quick, *known], key=value))
    solved = model.m.solve(max(PRICING_MIN_SECONDS, seconds), workers=1, seed=seed, gap=GAP, collect=model.variables())
    found = [canonical(model.pattern(v), shape.devices, milli) for v in solved.found[::-1]]
    good = sorted(_unique([p for p in found + good if value(p) > dual + tol]), key=value, reverse=True)
    if solved.status.has_solution:
        bound = min(bound, max(0.0, solved.bound / model.scale))
    return Priced(good[:MAX_COLUMNS], bound)


def _unique(patterns: list[Pattern]) -> list[Pattern]:
    seen: set[bytes] = set()
    out = []
    for p in patterns:
        if p.key() not in seen:
            seen.add(p.key())
            out.append(p)
    return out
