"""The mutable state a greedy placement works on: free capacity, group caps, GPU devices,
the inter-pod rules' counts.

Kept apart from the policies so every policy shares one definition of "fits" and of
"take": node resources, group caps (host ports, per node or per topology domain), per-device
GPU shares and the inter-pod rules (``solver.rules_state``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kubeplace.models.gpu import WHOLE, GpuNeed, first_fit, pods_fitting
from kubeplace.models.problem import UNCAPPED, Assignment, BoolArray, DeviceUse, GroupCap, IntArray, Problem
from kubeplace.solver.rules_state import RuleCounts

UNLIMITED = UNCAPPED


def _cap_index(cap: GroupCap, node: IntArray | int) -> IntArray:
    """Where a cap keeps count of ``node``: its node, or its domain (-1: not capped there)."""
    return np.asarray(node if cap.domain is None else cap.domain[node], dtype=np.int64)


@dataclass
class PlacementState:
    problem: Problem
    free: IntArray  # (N, R)
    cap_left: list[IntArray]  # per group cap: (N,), or (D,) per domain
    device_free: IntArray  # (N, D)
    caps_of: dict[int, list[int]]
    per_class: IntArray  # (K,) pods placed per class, fixed ones included
    rules: RuleCounts
    placed: dict[tuple[int, int], int] = field(default_factory=dict)
    devices: dict[tuple[int, int, int], int] = field(default_factory=dict)
    within: BoolArray | None = None
    """(N,) when set, pods go only to these nodes (a gang trying one topology domain)."""

    @staticmethod
    def start(problem: Problem, fixed: Assignment | None = None) -> PlacementState:
        caps_of: dict[int, list[int]] = {}
        for k, cap in enumerate(problem.group_caps):
            for c in cap.classes:
                caps_of.setdefault(c, []).append(k)
        state = PlacementState(problem, problem.free.copy(), [c.cap.copy() for c in problem.group_caps],
                               problem.device_free.copy(), caps_of, np.zeros(problem.n_classes, dtype=np.int64),
                               RuleCounts.start(problem))
        if fixed is not None:
            state.absorb(fixed)
        return state

    def copy(self) -> PlacementState:
        return PlacementState(self.problem, self.free.copy(), [c.copy() for c in self.cap_left],
                              self.device_free.copy(), self.caps_of, self.per_class.copy(), self.rules.copy(),
                              dict(self.placed), dict(self.devices), self.within)

    def need(self, c: int) -> GpuNeed:
        p = self.problem
        if not p.has_devices:
            return GpuNeed()
        return GpuNeed(int(p.gpu_count[c]), int(p.gpu_milli[c]))

    def fit(self, c: int, nodes: IntArray) -> IntArray:
        """How many more pods of class c fit on each of ``nodes``."""
        d = self.problem.demand[c]
        need_r = np.nonzero(d > 0)[0]
        if len(need_r):
            m = (self.free[np.ix_(nodes, need_r)] // d[need_r]).min(axis=1)
        else:
            m = np.full(len(nodes), UNLIMITED, dtype=np.int64)
        for k in self.caps_of.get(c, []):
            at = _cap_index(self.problem.group_caps[k], nodes)
            m = np.minimum(m, np.where(at >= 0, self.cap_left[k][np.maximum(at, 0)], UNLIMITED))
        if self.rules.roles:
            m = np.minimum(m, self.rules.cap(c, nodes))
        gpu = self.need(c)
        if gpu.count:
            m = np.minimum(m, self.device_fit(gpu, nodes))
        return np.asarray(np.clip(m, 0, None), dtype=np.int64)

    def device_fit(self, gpu: GpuNeed, nodes: IntArray) -> IntArray:
        free = self.device_free[nodes]
        if gpu.milli >= WHOLE:
            return np.asarray((free >= WHOLE).sum(axis=1) // gpu.count, dtype=np.int64)
        if gpu.count == 1:
            return np.asarray(np.where(free >= gpu.milli, free // gpu.milli, 0).sum(axis=1), dtype=np.int64)
        return np.array([pods_fitting(f, gpu) for f in free], dtype=np.int64)

    def take(self, c: int, node: int, k: int, devices: tuple[int, ...] | None = None) -> None:
        """Places k pods of class c on node (the caller checked that they fit); ``devices``
        chooses the devices of a single pod (else best-fit)."""
        if k <= 0:
            return
        self.free[node] -= self.problem.demand[c] * k
        for g in self.caps_of.get(c, []):
            at = int(_cap_index(self.problem.group_caps[g], node))
            if at >= 0:
                self.cap_left[g][at] -= k
        self.rules.take(c, node, k)
        self.placed[(c, node)] = self.placed.get((c, node), 0) + k
        self.per_class[c] += k
        gpu = self.need(c)
        for _ in range(k if gpu.count else 0):
            for dev in devices or first_fit(self.device_free[node], gpu):
                self.device_free[node, dev] -= gpu.milli
                key = (c, node, dev)
                self.devices[key] = self.devices.get(key, 0) + 1

    def absorb(self, a: Assignment) -> None:
        """Counts an existing assignment (with its devices) as taken; array updates at once,
        as the gang repair starts a state from a kept assignment every round."""
        p = self.problem
        self.free -= a.load(p)
        for g, cap in enumerate(p.group_caps):
            member = np.isin(a.cls, np.asarray(cap.classes, dtype=np.int64))
            at = _cap_index(cap, a.node[member])
            np.subtract.at(self.cap_left[g], at[at >= 0], a.counts[member][at >= 0])
        self.rules.absorb(a)
        np.add.at(self.per_class, a.cls, a.counts)
        for c, i, k in zip(a.cls.tolist(), a.node.tolist(), a.counts.tolist(), strict=True):
            self.placed[(c, i)] = self.placed.get((c, i), 0) + k
        d = a.devices
        np.subtract.at(self.device_free, (d.node, d.device), p.gpu_milli[d.cls] * d.counts if len(d.cls) else 0)
        for c, i, dev, k in zip(d.cls.tolist(), d.node.tolist(), d.device.tolist(), d.counts.tolist(), strict=True):
            self.devices[(c, i, dev)] = self.devices.get((c, i, dev), 0) + k

    def assignment(self) -> Assignment:
        items = [(c, i, k) for (c, i), k in self.placed.items() if k > 0]
        if not items:
            return Assignment.empty()
        arr = np.array(items, dtype=np.int64)
        dev = [(c, i, d, k) for (c, i, d), k in self.devices.items() if k > 0]
        darr = np.array(dev, dtype=np.int64).reshape(-1, 4)
        return Assignment(arr[:, 0], arr[:, 1], arr[:, 2],
                          DeviceUse(darr[:, 0], darr[:, 1], darr[:, 2], darr[:, 3]))
