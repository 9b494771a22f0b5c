"""An independent device-level GPU cluster simulator for the benchmarks.

It shares no code with ``models/`` or ``solver/``: it is the referee that every placement
(kubeplace's and the baselines') is checked against. A node has milli-CPU, MiB of memory and
``gpus`` devices of one model, each with 1000 milli-GPU; a pod asks for cpu, memory and

- nothing GPU (``num_gpu == 0``),
- a share of ONE device (``num_gpu == 1`` and ``gpu_milli < 1000``): ``gpu_milli`` on a device
  that still has that much free, or
- ``num_gpu`` whole devices (``gpu_milli == 1000``), each completely free,

and optionally a set of accepted GPU models (an empty set accepts every node; a non-empty one
only nodes of those models, as the converter's required node affinity says).

Device shares are kept per device in an ``(N, D)`` array padded with 0 for devices a node does
not have (a padded device never fits a request, since every request is > 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

WHOLE = 1000
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class NodeSpec:
    name: str
    cpu: int  # milli-CPU
    mem: int  # MiB
    gpus: int = 0
    model: str = ""


@dataclass(frozen=True)
class PodSpec:
    name: str
    cpu: int  # milli-CPU
    mem: int  # MiB
    num_gpu: int = 0
    gpu_milli: int = 0  # per device; 1000 for whole GPUs, 0 for CPU-only pods
    models: tuple[str, ...] = ()  # accepted GPU models; () = any
    creation: int = 0
    qos: str = ""
    phase: str = ""

    @property
    def gpu_total(self) -> int:
        """GPU milli the pod takes in all (``num_gpu * gpu_milli``)."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < WHOLE


class Workload:
    """A pod list as arrays, with GPU-model eligibility as (spec id x model id) booleans."""

    def __init__(self, pods: Sequence[PodSpec], models: Sequence[str]) -> None:
        self.pods = tuple(pods)
        self.names = [p.name for p in self.pods]
        self.cpu = np.array([p.cpu for p in self.pods], dtype=np.int64)
        self.mem = np.array([p.mem for p in self.pods], dtype=np.int64)
        self.num = np.array([p.num_gpu for p in self.pods], dtype=np.int64)
        self.milli = np.array([p.gpu_milli for p in self.pods], dtype=np.int64)
        specs: dict[tuple[str, ...], int] = {(): 0}
        self.spec = np.array([specs.setdefault(p.models, len(specs)) for p in self.pods], dtype=np.int64)
        self.specs = tuple(specs)
        # eligible[s, m]: a pod of spec s may run on a node of model m (model 0 is "", no GPU model)
        self.eligible = np.array([[not s or name in s for name in models] for s in self.specs], dtype=np.bool_)

    def __len__(self) -> int:
        return len(self.pods)


@dataclass
class Cluster:
    """Free capacity of every node, per device for GPUs. ``place`` is the only mutator."""

    nodes: tuple[NodeSpec, ...]
    models: tuple[str, ...]  # models[0] == ""
    model_id: IntArray
    cpu_cap: IntArray
    mem_cap: IntArray
    n_gpu: IntArray
    cpu_free: IntArray
    mem_free: IntArray
    dev_free: IntArray  # (N, D), 0 for devices a node does not have
    index: dict[str, int] = field(default_factory=dict)
    max_free: IntArray = field(init=False)  # per node, the most free milli on one device
    whole_free: IntArray = field(init=False)  # per node, devices completely free

    def __post_init__(self) -> None:
        self.max_free = self.dev_free.max(axis=1)
        self.whole_free = (self.dev_free == WHOLE).sum(axis=1)

    @staticmethod
    def build(nodes: Iterable[NodeSpec]) -> Cluster:
        nodes = tuple(nodes)
        models = ("", *sorted({n.model for n in nodes if n.model}))
        width = max((n.gpus for n in nodes), default=0)
        n_gpu = np.array([n.gpus for n in nodes], dtype=np.int64)
        dev = np.zeros((len(nodes), max(width, 1)), dtype=np.int64)
        dev[np.arange(dev.shape[1])[None, :] < n_gpu[:, None]] = WHOLE
        cpu = np.array([n.cpu for n in nodes], dtype=np.int64)
        mem = np.array([n.mem for n in nodes], dtype=np.int64)
        return Cluster(nodes, models, np.array([models.index(n.model) if n.gpus else 0 for n in nodes],
                                               dtype=np.int64),
                       cpu, mem, n_gpu, cpu.copy(), mem.copy(), dev, {n.name: i for i, n in enumerate(nodes)})

    def copy(self) -> Cluster:
        return Cluster(self.nodes, self.models, self.model_id, self.cpu_cap, self.mem_cap, self.n_gpu,
                       self.cpu_free.copy(), self.mem_free.copy(), self.dev_free.copy(), self.index)

    def workload(self, pods: Sequence[PodSpec]) -> Workload:
        return Workload(pods, self.models)

    @property
    def total_gpus(self) -> int:
        return int(self.n_gpu.sum())

    @property
    def gpu_free_total(self) -> IntArray:
        result: IntArray = self.dev_free.sum(axis=1)
        return result

    # --- feasibility ---------------------------------------------------------------------

    def feasible(self, w: Workload, j: int) -> BoolArray:
        """Nodes where pod ``j`` fits now (cpu, memory, GPU model, devices)."""
        ok: BoolArray = (self.cpu_free >= w.cpu[j]) & (self.mem_free >= w.mem[j]) & w.eligible[w.spec[j]][self.model_id]
        num, milli = int(w.num[j]), int(w.milli[j])
        if num == 0:
            return ok
        if milli < WHOLE:
            return ok & (self.max_free >= milli)
        return ok & (self.whole_free >= num)

    def check(self, pod: PodSpec, i: int, devices: Sequence[int]) -> str | None:
        """Why pod cannot go to node ``i`` on ``devices`` now, or None when it can."""
        node = self.nodes[i]
        if pod.cpu > self.cpu_free[i]:
            return f"Insufficient cpu: requests {pod.cpu}m, {int(self.cpu_free[i])}m free"
        if pod.mem > self.mem_free[i]:
            return f"Insufficient memory: requests {pod.mem}Mi, {int(self.mem_free[i])}Mi free"
        if pod.models and node.model not in pod.models:
            return f"GPU model {node.model or 'none'} not in {'|'.join(pod.models)}"
        if pod.num_gpu == 0:
            return f"a CPU-only pod was given GPU devices {list(devices)}" if devices else None
        if len(devices) != pod.num_gpu or len(set(devices)) != len(devices):
            return f"needs {pod.num_gpu} distinct device(s), got {list(devices)}"
        for d in devices:
            if not 0 <= d < node.gpus:
                return f"device {d} does not exist (node has {node.gpus} GPUs)"
            free = int(self.dev_free[i, d])
            if pod.gpu_milli >= WHOLE and free != WHOLE:
                return f"device {d} is not completely free ({free} milli free) for a whole-GPU pod"
            if free < pod.gpu_milli:
                return f"device {d} has {free} milli free, the pod needs {pod.gpu_milli}"
        return None

    def place(self, pod: PodSpec, i: int, devices: Sequence[int]) -> str | None:
        """Takes the pod's resources on node ``i`` when valid; returns the refusal otherwise."""
        reason = self.check(pod, i, devices)
        if reason is None:
            self.cpu_free[i] -= pod.cpu
            self.mem_free[i] -= pod.mem
            for d in devices:
                self.dev_free[i, d] -= pod.gpu_milli
            if devices:
                self.max_free[i] = self.dev_free[i].max()
                self.whole_free[i] = int((self.dev_free[i] == WHOLE).sum())
        return reason

    # --- device choice helpers ------------------------------------------------------------

    def first_fit_devices(self, pod: PodSpec, i: int) -> tuple[int, ...]:
        """Share: the lowest-index device with room; whole: the lowest-index free devices."""
        if pod.num_gpu == 0:
            return ()
        row = self.dev_free[i, : self.n_gpu[i]]
        room = np.flatnonzero(row >= WHOLE) if pod.gpu_milli >= WHOLE else np.flatnonzero(row >= pod.gpu_milli)
        return tuple(int(d) for d in room[: pod.num_gpu])

    def best_fit_device(self, pod: PodSpec, i: int) -> tuple[int, ...]:
        """Share: the device with the least free milli that still fits (lowest index on ties);
        whole: the lowest-index free devices."""
        if not pod.is_share:
            return self.first_fit_devices(pod, i)
        row = self.dev_free[i, : self.n_gpu[i]]
        masked = np.where(row >= pod.gpu_milli, row, WHOLE + 1)
        return (int(np.argmin(masked)),)


@dataclass(frozen=True)
class Placed:
    pod: str
    node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class Metrics:
    pods_placed: int
    gpu_milli_placed: int
    gpu_alloc_ratio: float
    cpu_milli_placed: int
    memory_mib_placed: int
    fragmentation_ratio: float
    fragmentation_milli: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "pods_placed": self.pods_placed,
            "gpu_milli_placed": self.gpu_milli_placed,
            "gpu_alloc_ratio": round(self.gpu_alloc_ratio, 6),
            "cpu_milli_placed": self.cpu_milli_placed,
            "memory_mib_placed": self.memory_mib_placed,
            "fragmentation_ratio": round(self.fragmentation_ratio, 6),
            "fragmentation_milli": round(self.fragmentation_milli, 1),
        }


def metrics(cluster: Cluster, placed_pods: Iterable[PodSpec], frag_milli: float) -> Metrics:
    """Figures for the pods placed on ``cluster``; ``frag_milli`` is the cluster's FGD
    fragmentation (see ``bench.fragmentation``) in its final state."""
    pods = list(placed_pods)
    gpu = sum(p.gpu_total for p in pods)
    capacity = WHOLE * cluster.total_gpus
    free = int(cluster.dev_free.sum())
    return Metrics(
        pods_placed=len(pods),
        gpu_milli_placed=gpu,
        gpu_alloc_ratio=gpu / capacity if capacity else 0.0,
        cpu_milli_placed=sum(p.cpu for p in pods),
        memory_mib_placed=sum(p.mem for p in pods),
        fragmentation_ratio=frag_milli / free if free else 0.0,
        fragmentation_milli=frag_milli,
    )
