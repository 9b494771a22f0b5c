"""FGD's node score as the authors' simulator computes it, floating point included.

``utils.NodeGpuShareFragAmount`` (hkust-adsl/kubernetes-scheduler-simulator) walks the typical
pods in their list order and adds ``freq * milli`` (float64) into one of seven slots per node, by
the pod's fragment type (Q1 lack both, Q2 lack GPU, Q3 satisfied, Q4 lack cpu, XL/XR CPU-only with
or without cpu, no access); a satisfied pod adds its unusable milli to Q2 and the rest to Q3. The
node's fragmentation is the sum of the slots except Q3, in slot order, and FGD's score is
``int(100 * sigmoid((F_before - F_after) / 1000))``.

The exact value of F is :func:`simulate.policies.typical.node_fragmentation`'s; the float one matters
where the true drop is 0 and the score 50: when a placement only moves amounts between slots
(a CPU-only pod that leaves a node short of cpu turns XL into XR and Q2 into Q1), the two float
sums round differently and the simulator scores 49 or 50, which decides ties. This module adds
in the simulator's order, so those scores are its own: on cpu250 five of ten published FGD
seeds need it.

``freq`` is the simulator's: ``(count / total) / (kept / total)`` (float64), ``total`` the pods of
the original list and ``kept`` those the typical shapes cover.
"""

from __future__ import annotations

import math

import numpy as np

from kubeplace.models.gpu import WHOLE
from kubeplace.models.problem import IntArray
from kubeplace.simulate.policies.typical import FloatArray, TaskDistribution

Q1, Q2, Q3, Q4, XL, XR, NO_ACCESS = range(7)
SLOTS = 7


class GoFragScore:
    """The simulator's float fragmentation of nodes, for a typical-pod list and the node models."""

    def __init__(self, dist: TaskDistribution, total_pods: int, node_models: tuple[str, ...]) -> None:
        kept, total = float(dist.total), float(total_pods)
        weights = dist.weight.astype(np.float64)
        self.freq = (weights / total) / (kept / total) if kept != total else weights / total  # (M,)
        self.cpu = dist.cpu.astype(np.int64)
        self.num = dist.num.astype(np.int64)
        self.cpu_only = dist.milli == 0
        self.groups = sorted({int(m) for m in dist.milli if m}) or [WHOLE]  # the per-device milli asked
        # (a list of CPU-only pods has none: one group that no shape reads keeps the arrays whole)
        self.group_of = np.array([self.groups.index(int(m)) if m else 0 for m in dist.milli], dtype=np.int64)
        # access[m, model id]: typical pod m may run on a node of that model ("" for no GPU model)
        self.access = np.array([[not models or name in models for name in node_models] for models in dist.models],
                               dtype=np.bool_).reshape(len(dist.weight), len(node_models))

    def frag(self, cpu_left: IntArray, dev: IntArray, model_id: IntArray) -> FloatArray:
        """F (float64, milli) of each state: free cpu, free milli per device (padded with 0); the
        slots summed over the typical pods in list order (a running sum, as Go adds)."""
        total = dev.sum(axis=1).astype(np.float64)  # (C,)
        count = np.array([(dev >= g).sum(axis=1) for g in self.groups]).reshape(len(self.groups), len(dev))
        small = np.array([np.where(dev >= g, 0, dev).sum(axis=1) for g in self.groups],
                         dtype=np.float64).reshape(len(self.groups), len(dev))
        cpu_ok = cpu_left[None, :] >= self.cpu[:, None]  # (M, C)
        room = count[self.group_of] >= self.num[:, None]
        gpu_cat = np.where(room, np.where(cpu_ok, Q3, Q4), np.where(cpu_ok, Q2, Q1))
        gpu_cat = np.where(self.access[:, model_id], gpu_cat, NO_ACCESS)
        cat = np.where(self.cpu_only[:, None], np.where(cpu_ok, XL, XR), gpu_cat)
        satisfied = cat == Q3
        amount = np.where(satisfied, small[self.group_of], total[None, :])
        value = self.freq[:, None] * amount
        slot = np.where(satisfied, Q2, cat)
        out = np.zeros(len(dev), dtype=np.float64)
        for s in (Q1, Q2, Q4, XL, XR, NO_ACCESS):
            out += np.cumsum(np.where(slot == s, value, 0.0), axis=0)[-1] if len(value) else 0.0
        return out


def score(before: FloatArray, after: FloatArray) -> IntArray:
    """``int64(sigmoid((before - after) / 1000) * 100)`` as Go computes it."""
    drop = (before - after) / 1000
    result: IntArray = np.array([int(1.0 / (1.0 + math.exp(-x)) * 100) for x in drop.tolist()], dtype=np.int64)
    return result
