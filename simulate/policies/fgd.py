"""FGD as the FGD authors' simulator runs it (Weng et al., USENIX ATC 2023;
hkust-adsl/kubernetes-scheduler-simulator, ``FGDScore``): for every node and device, the drop in
the node's fragmentation against the typical pods (``simulate.policies.typical``)
``d = F_before - F_after`` (milli), score ``int(100 * sigmoid(d / 1000))``; a node's score is its
best device's (the lowest index on ties), highest wins, ties to the first node of the tie order.
Where d is exactly 0 the simulator's float sums decide between 49 and 50
(``simulate.policies.go_score``), as they decide its ties. Whole GPUs take the lowest-index free
devices."""

from __future__ import annotations

import numpy as np

from kubeplace.models.gpu import WHOLE
from kubeplace.models.problem import IntArray
from kubeplace.simulate.policies.go_score import GoFragScore
from kubeplace.simulate.policies.go_score import score as go_score
from kubeplace.simulate.policies.node_view import (
    Choice,
    DeviceView,
    PodShape,
    TieOrder,
    is_share,
    lowest_devices,
)
from kubeplace.simulate.policies.policy import SimPolicy
from kubeplace.simulate.policies.typical import FragIndex, TaskDistribution

NAME = "fgd"


class Fgd:
    """FGD's score from the exact fragmentation (``FragIndex``, integers), except where the exact
    drop is 0: there the simulator's float sums decide between 49 and 50 when the placement moves
    amounts between its slots (a node whose free cpu crosses a typical pod's, or whose devices
    change)."""

    def __init__(self, view: DeviceView, typical: TaskDistribution, ties: TieOrder) -> None:
        self.view, self.ties = view, ties
        self.index = FragIndex(view, typical)
        self.go = GoFragScore(typical, typical.listed or typical.total, view.models)
        self.go_before = self.go.frag(view.cpu_free, view.dev_free, view.model_id)
        self.cpu_levels = np.unique(typical.cpu)

    def _score(self, nodes: IntArray, after: IntArray, cpu: int, dev_after: IntArray | None) -> IntArray:
        """``dev_after``: the candidates' free milli per device after, None when unchanged."""
        v = self.view
        drop = (self.index.scaled[nodes] - after) / max(self.index.w_total, 1)  # milli-GPU
        score: IntArray = (100.0 / (1.0 + np.exp(-drop / 1000.0))).astype(np.int64)
        zero = after == self.index.scaled[nodes]
        if dev_after is None:  # cpu only: the slots move only where the free cpu crosses a level
            free = v.cpu_free[nodes]
            zero &= (np.searchsorted(self.cpu_levels, free, side="right")
                     != np.searchsorted(self.cpu_levels, free - cpu, side="right"))
        if zero.any():
            at = nodes[zero]
            dev = v.dev_free[at] if dev_after is None else dev_after[zero]
            score[zero] = go_score(self.go_before[at], self.go.frag(v.cpu_free[at] - cpu, dev, v.model_id[at]))
        return score

    def choose(self, pod: PodShape, nodes: IntArray) -> Choice:
        v, index = self.view, self.index
        if is_share(pod):
            cand, devices = index.share_candidates(nodes, pod.gpu_milli)
            dev = v.dev_free[cand].copy()
            dev[np.arange(len(cand)), devices] -= pod.gpu_milli
            after = index.after_share(cand, devices, pod.cpu, pod.gpu_milli)
            k = self.ties.best(cand, self._score(cand, after, pod.cpu, dev))
            return int(cand[k]), (int(devices[k]),)
        if pod.num_gpu:
            dev = v.dev_free[nodes].copy()
            free = dev == WHOLE  # any free devices taken leave the same free values
            dev[free & (np.cumsum(free, axis=1) <= pod.num_gpu)] = 0
            score = self._score(nodes, index.after_whole(nodes, pod.cpu, pod.num_gpu), pod.cpu, dev)
        else:
            score = self._score(nodes, index.after_cpu_only(nodes, pod.cpu), pod.cpu, None)
        i = int(nodes[self.ties.best(nodes, score)])
        return i, lowest_devices(v, pod, i)

    def refresh(self, nodes: IntArray) -> None:
        v = self.view
        self.index.refresh(nodes)
        self.go_before[nodes] = self.go.frag(v.cpu_free[nodes], v.dev_free[nodes], v.model_id[nodes])


POLICY = SimPolicy(NAME, Fgd)
