"""Best-fit as the FGD authors' simulator runs it (hkust-adsl/kubernetes-scheduler-simulator,
``BestFitScore``): ``s = 0.5 (cpu_free - cpu) / 128000 + 0.5 (gpu_free - gpu) / 8000`` (milli,
node totals after the placement; memory only filters), node score ``int((1 - s) * 100)``, highest
wins, ties to the first node of the tie order. Device: a share takes the device with the least
free milli that fits (the simulator's "best" GPU selection), whole GPUs the lowest-index free
devices."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kubeplace.models.problem import IntArray
from kubeplace.simulate.policies.node_view import (
    Choice,
    DeviceView,
    PodShape,
    TieOrder,
    gpu_total,
    tightest_device,
)
from kubeplace.simulate.policies.policy import SimPolicy
from kubeplace.simulate.policies.typical import TaskDistribution

NAME = "best-fit"
MAX_SPEC_CPU = 128000
"""milli-CPU, the simulator's normaliser (the largest openb node)."""
MAX_SPEC_GPU = 8000
"""milli-GPU, the simulator's normaliser (8 GPUs)."""


def leftover(view: DeviceView, nodes: IntArray, cpu: int = 0, gpu_milli: int = 0) -> npt.NDArray[np.float64]:
    """Best-fit's measure: what ``nodes`` would have left after a pod of ``cpu`` and ``gpu_milli``,
    cpu and GPU milli each over the simulator's normaliser, weighted half and half (smaller:
    fuller)."""
    left: npt.NDArray[np.float64] = (0.5 * (view.cpu_free[nodes] - cpu) / MAX_SPEC_CPU
                                     + 0.5 * (view.dev_free[nodes].sum(axis=1) - gpu_milli) / MAX_SPEC_GPU)
    return left


class BestFit:
    def __init__(self, view: DeviceView, _typical: TaskDistribution, ties: TieOrder) -> None:
        self.view, self.ties = view, ties

    def choose(self, pod: PodShape, nodes: IntArray) -> Choice:
        v = self.view
        score = ((1.0 - leftover(v, nodes, pod.cpu, gpu_total(pod))) * 100).astype(np.int64)
        i = int(nodes[self.ties.best(nodes, score)])
        return i, tightest_device(v, pod, i)

    def refresh(self, nodes: IntArray) -> None:
        return None  # (it keeps nothing of the nodes)


POLICY = SimPolicy(NAME, BestFit)
