"""The cluster as the kube-scheduler emulation sees it between two pods: free capacity, and the
pods of each node indexed for the stateful rules' checks and the scores
(``models.emulated_pods``)."""

from __future__ import annotations

import numpy as np

from kubeplace.kube.nominated import held_room
from kubeplace.kube.objects import CPU, MEMORY, Pod, Snapshot
from kubeplace.models.emulated_pods import EmulatedPods
from kubeplace.models.problem import IntArray

NON_ZERO_CPU = 100
"""milli-CPU the scheduler's scores assume for a pod without a CPU request (``schedutil``)."""
NON_ZERO_MEMORY = 200 * 1024 * 1024


class Cluster(EmulatedPods):
    def __init__(self, snapshot: Snapshot, pods: tuple[Pod, ...]) -> None:
        super().__init__(snapshot)
        names = {r for node in self.nodes for r in node.allocatable}
        names |= {r for pod in (*pods, *snapshot.bound, *snapshot.nominated) for r in pod.requests}
        self._held: dict[int, IntArray] = {}
        self.resources = tuple(sorted(names))
        self.allocatable = np.array([[node.allocatable.get(r, 0) for r in self.resources] for node in self.nodes],
                                    dtype=np.int64).reshape(self.n, len(self.resources))
        self.used = np.zeros_like(self.allocatable)
        self.cpu_memory = np.array([self.resources.index(CPU) if CPU in self.resources else -1,
                                    self.resources.index(MEMORY) if MEMORY in self.resources else -1])
        self.non_zero_used = np.zeros((self.n, 2), dtype=np.int64)
        for pod in snapshot.bound:
            if pod.node_name in self.index:
                self.commit(pod, self.index[pod.node_name])

    def requests(self, pod: Pod) -> IntArray:
        return np.array([pod.requests.get(r, 0) for r in self.resources], dtype=np.int64)

    def held(self, priority: int) -> IntArray:
        """(N, R) the requests of the pods nominated to each node with ``priority`` or more."""
        if priority not in self._held:
            rows = np.zeros_like(self.allocatable)
            for name, room in held_room(self.nominated, priority).items():
                if name in self.index:
                    rows[self.index[name]] = [room.get(r, 0) for r in self.resources]
            self._held[priority] = rows
        return self._held[priority]

    def non_zero_requests(self, pod: Pod) -> IntArray:
        """CPU and memory as the scores count them: a pod without a request counts the
        scheduler's defaults (per pod here, per container in the kube-scheduler)."""
        return np.array([pod.requests.get(CPU, 0) or NON_ZERO_CPU, pod.requests.get(MEMORY, 0) or NON_ZERO_MEMORY],
                        dtype=np.int64)

    def commit(self, pod: Pod, i: int) -> None:
        self.used[i] += self.requests(pod)
        self.non_zero_used[i] += self.non_zero_requests(pod)
        super().commit(pod, i)
