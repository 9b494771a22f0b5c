"""GPU devices in the linear model: shares packed per device, whole GPUs on free devices.

Per node of the neighbourhood, with its devices' free milli f_d:

- ``z[c, d]`` counts the pods of share class c (milli < 1000) on device d; they add up
  to the class's count on the node (times its device count, each pod at most once per
  device), and ``sum_c milli_c z[c, d] <= f_d``;
- a device with nothing on it (f_d = 1000) that takes shares is marked ``u_d = 1``;
  whole-GPU classes then use ``count_c y[c, i] + sum_d u_d <= #free devices``.

"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from kubeplace.models.gpu import WHOLE
from kubeplace.models.linear import INF, LinearBuilder
from kubeplace.models.problem import Assignment, DeviceUse, IntArray, Problem


class PairModel(Protocol):
    """What the device rows read of the model being built: its (class, node) pairs and their
    ``y`` variables (``models.formulation.placement`` builds it)."""

    problem: Problem
    lb: LinearBuilder
    pair_cls: IntArray
    pair_node: IntArray
    y: IntArray
    y_ub: IntArray
    devices: DeviceVars | None


@dataclass
class DeviceVars:
    z_var: list[int] = field(default_factory=list)
    z_pair: list[int] = field(default_factory=list)  # index into the builder's pairs
    z_dev: list[int] = field(default_factory=list)
    u_var: list[int] = field(default_factory=list)
    u_node: list[int] = field(default_factory=list)
    u_dev: list[int] = field(default_factory=list)

    def arrays(self) -> tuple[IntArray, IntArray, IntArray]:
        return (np.asarray(self.z_var, dtype=np.int64), np.asarray(self.z_pair, dtype=np.int64),
                np.asarray(self.z_dev, dtype=np.int64))


def device_rows(b: PairModel) -> DeviceVars:
    p = b.problem
    out = DeviceVars()
    gpu_pairs = np.nonzero(p.gpu_count[b.pair_cls] > 0)[0]
    by_node: dict[int, list[int]] = {}
    for j in gpu_pairs.tolist():
        by_node.setdefault(int(b.pair_node[j]), []).append(j)
    for i, pairs in by_node.items():
        _node_rows(b, out, i, np.asarray(pairs, dtype=np.int64))
    return out


def _node_rows(b: PairModel, out: DeviceVars, i: int, pairs: IntArray) -> None:
    p = b.problem
    free = p.device_free[i]
    devs = np.nonzero(free >= 0)[0]
    full = [int(d) for d in devs if free[d] >= WHOLE]
    milli = p.gpu_milli[b.pair_cls[pairs]]
    count = p.gpu_count[b.pair_cls[pairs]]
    share_pairs, whole_pairs = pairs[milli < WHOLE], pairs[milli >= WHOLE]
    u_of: dict[int, int] = {}
    if len(share_pairs):
        for d in full:
            (u,) = b.lb.add_vars(np.array([0]), np.array([1]))
            u_of[d] = int(u)
            out.u_var.append(int(u))
            out.u_node.append(i)
            out.u_dev.append(d)
    load: dict[int, tuple[list[int], list[int]]] = {int(d): ([], []) for d in devs}
    for j in share_pairs.tolist():
        c = int(b.pair_cls[j])
        m, n = int(p.gpu_milli[c]), int(p.gpu_count[c])
        zs = []
        for d in devs.tolist():
            if free[d] < m:
                continue
            (z,) = b.lb.add_vars(np.array([0]), np.array([int(b.y_ub[j])]))
            zs.append(int(z))
            out.z_var.append(int(z))
            out.z_pair.append(j)
            out.z_dev.append(int(d))
            load[int(d)][0].append(int(z))
            load[int(d)][1].append(m)
            if n > 1:  # a pod uses a device at most once
                b.lb.add_row(np.array([z, b.y[j]]), np.array([1, -1]), -INF, 0)
        b.lb.add_row(np.array([*zs, b.y[j]]), np.array([1] * len(zs) + [-n]), 0, 0)
    for d, (zs, ms) in load.items():
        if not zs:
            continue
        if d in u_of:
            b.lb.add_row(np.array([*zs, u_of[d]]), np.array([*ms, -WHOLE]), -INF, 0)
        else:
            b.lb.add_row(np.array(zs), np.array(ms), -INF, int(free[d]))
    if len(whole_pairs):
        cols = [*b.y[whole_pairs].tolist(), *u_of.values()]
        coefs = [*count[milli >= WHOLE].tolist(), *([1] * len(u_of))]
        b.lb.add_row(np.array(cols), np.array(coefs), -INF, len(full))


def device_hint(b: PairModel, values: IntArray, hint: Assignment) -> None:
    """Fills z and u in ``values`` from the hint's device use."""
    dv = b.devices
    if dv is None or not dv.z_var:
        return
    z_var, z_pair, z_dev = dv.arrays()
    used = {(int(c), int(i), int(d)): int(k) for c, i, d, k in zip(
        hint.devices.cls, hint.devices.node, hint.devices.device, hint.devices.counts, strict=True)}
    for var, j, d in zip(z_var.tolist(), z_pair.tolist(), z_dev.tolist(), strict=True):
        values[var] = used.get((int(b.pair_cls[j]), int(b.pair_node[j]), d), 0)
    busy = {(i, d) for (c, i, d) in used if b.problem.gpu_milli[c] < WHOLE}
    for var, i, d in zip(dv.u_var, dv.u_node, dv.u_dev, strict=True):
        values[var] = 1 if (i, d) in busy else 0


def device_use(p: Problem, pair_cls: IntArray, pair_node: IntArray, y: IntArray, dv: DeviceVars | None,
               values: IntArray) -> DeviceUse:
    """Which devices the solution's GPU pods take: z for shares; whole GPUs on the free
    devices that hold no share, lowest index first."""
    rows: list[tuple[int, int, int, int]] = []
    share_busy: set[tuple[int, int]] = set()
    if dv is not None:
        z_var, z_pair, z_dev = dv.arrays()
        for var, j, d in zip(z_var.tolist(), z_pair.tolist(), z_dev.tolist(), strict=True):
            k = int(values[var])
            if k > 0:
                rows.append((int(pair_cls[j]), int(pair_node[j]), d, k))
                share_busy.add((int(pair_node[j]), d))
    whole = np.nonzero((p.gpu_count[pair_cls] > 0) & (p.gpu_milli[pair_cls] >= WHOLE) & (values[y] > 0))[0]
    taken: dict[int, list[int]] = {}
    for j in whole.tolist():
        i, c = int(pair_node[j]), int(pair_cls[j])
        if i not in taken:
            taken[i] = [int(d) for d in np.nonzero(p.device_free[i] >= WHOLE)[0] if (i, int(d)) not in share_busy]
        for _ in range(int(values[y[j]]) * int(p.gpu_count[c])):
            rows.append((c, i, taken[i].pop(0), 1))
    if not rows:
        return DeviceUse.empty()
    arr = np.array(rows, dtype=np.int64)
    return DeviceUse(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])
