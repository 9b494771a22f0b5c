"""kubeplace's variant of FGD (``--scheduler fgd-steered``): the FGD authors' score
(``simulate.policies.fgd``, unchanged), with a CPU-only pod's equal scores broken to the node with
the least free GPU milli (then the tie order), where FGD takes the first node of the order.

FGD's score ties for a CPU-only pod on every node where it leaves each typical pod's cpu (the
fragmentation does not move), GPU nodes with idle GPUs among them. Taking the cpu of the node
whose GPUs are taken already keeps cpu beside the free GPUs for the GPU pods that come later.
On the FGD paper's protocol (``bench fgd-protocol``), measured in docs/scaling-and-benchmarks.md.
"""

from __future__ import annotations

import numpy as np

from kubeplace.models.problem import IntArray
from kubeplace.simulate.policies.fgd import Fgd
from kubeplace.simulate.policies.node_view import Choice, DeviceView, PodShape, TieOrder
from kubeplace.simulate.policies.policy import SimPolicy
from kubeplace.simulate.policies.typical import TaskDistribution

NAME = "fgd-steered"


def fewest_free_gpus(view: DeviceView, rank: IntArray, nodes: IntArray, tied: IntArray) -> int:
    """Position in ``nodes`` of the ``tied`` candidate with the least free GPU milli, the smallest
    ``rank`` among those."""
    at = nodes[tied]
    return int(tied[np.lexsort((rank[at], view.dev_free[at].sum(axis=1)))[0]])


class FewestFreeGpus(TieOrder):
    """The tie order, except (``cpu_only`` set) the node with the least free GPU milli first."""

    def __init__(self, view: DeviceView, ties: TieOrder) -> None:
        super().__init__(ties.rank.tolist())
        self.view = view
        self.cpu_only = False

    def best(self, nodes: IntArray, score: IntArray) -> int:
        if not self.cpu_only:
            return super().best(nodes, score)
        return fewest_free_gpus(self.view, self.rank, nodes, np.flatnonzero(score == score.max()))


class FgdSteered:
    def __init__(self, view: DeviceView, typical: TaskDistribution, ties: TieOrder) -> None:
        self.ties = FewestFreeGpus(view, ties)
        self.fgd = Fgd(view, typical, self.ties)

    def choose(self, pod: PodShape, nodes: IntArray) -> Choice:
        self.ties.cpu_only = pod.num_gpu == 0
        return self.fgd.choose(pod, nodes)

    def refresh(self, nodes: IntArray) -> None:
        self.fgd.refresh(nodes)


POLICY = SimPolicy(NAME, FgdSteered)
