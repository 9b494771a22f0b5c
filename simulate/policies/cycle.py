"""A simulated policy in ``simulate``'s cycle: the pending pods one at a time in scheduling-queue
order (``solver.greedy.in_queue_order``: gangs whole, the inter-pod rules' limits), each to the
node the policy's chooser picks among the nodes where it fits now (``solver.placers.candidates``:
every filter of the profile, the free resources and devices), on the devices it picks.

The typical pods are the trace's (every pod it will bring, as the authors take them from the pod
list they replay) unless given; ties go to the smallest node name, as the authors' kube-scheduler
takes it (their simulator renames the nodes with a seeded prefix first: a trace's cluster renamed
that way, as ``bench fgd-protocol --via simulate`` does, gives their seeded tie order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kubeplace.kube.gpu_conventions import GpuConventions
from kubeplace.kube.objects import CPU, Pod, Snapshot
from kubeplace.models.aggregate import Aggregation
from kubeplace.models.config import Profile
from kubeplace.models.framework import PluginSet
from kubeplace.models.gpu import GpuRequestError, gpu_need
from kubeplace.models.plugins.gpu_model.args import GPUModelArgs
from kubeplace.models.plugins.gpu_model.plugin import NAME as GPU_MODEL
from kubeplace.models.problem import Assignment, IntArray, Problem
from kubeplace.simulate.policies.node_view import Chooser, TieOrder
from kubeplace.simulate.policies.policy import SimPolicy
from kubeplace.simulate.policies.typical import TaskDistribution, task_distribution
from kubeplace.solver.greedy import in_queue_order
from kubeplace.solver.placers import candidates
from kubeplace.solver.state import PlacementState

Placer = Callable[[Snapshot, Aggregation, PluginSet], Assignment]


@dataclass(frozen=True)
class Shape:
    """A pod as the policies read it (``node_view.PodShape``), and its GPU models as written."""

    cpu: int
    num_gpu: int = 0
    gpu_milli: int = 0
    models: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelMarks:
    """Where a node says its GPU model and a pod the models it accepts (GPUModel's args)."""

    node_label: str
    pod_annotation: str

    def accepted(self, pod: Pod) -> tuple[str, ...]:
        """The pod's models as written: GPUModel's annotation (``|``-separated), else its required
        node affinity's ``In`` on the model label; () accepts every model."""
        text = pod.annotations.get(self.pod_annotation, "").strip()
        if text:
            return tuple(m.strip() for m in text.split("|") if m.strip())
        for term in pod.required_terms or ():
            for r in term.match_expressions:
                if r.key == self.node_label and r.operator == "In":
                    return tuple(r.values)
        return ()


def shape_of(pod: Pod, conv: GpuConventions, marks: ModelMarks) -> Shape:
    try:
        need = gpu_need(pod.requests, conv)
    except GpuRequestError:  # (never placed: not one of the workload's shapes either)
        return Shape(pod.requests.get(CPU, 0))
    return Shape(pod.requests.get(CPU, 0), need.count, need.milli, marks.accepted(pod) if need.count else ())


def trace_typical(arriving: Sequence[Pod], conv: GpuConventions, marks: ModelMarks) -> TaskDistribution:
    """FGD's typical pods of every pod the trace brings (``arriving``: its pods as parsed,
    ``simulate.world.arriving_pods``)."""
    return task_distribution([shape_of(pod, conv, marks) for pod in arriving])


@dataclass
class StateView:
    """``node_view.DeviceView`` of a placement state, brought up to date by :meth:`sync`."""

    models: tuple[str, ...]
    model_id: IntArray
    n_gpu: IntArray
    cpu_free: IntArray
    dev_free: IntArray
    cpu_index: int | None

    @staticmethod
    def of(problem: Problem, node_models: Sequence[str]) -> StateView:
        n_gpu = (problem.device_free >= 0).sum(axis=1).astype(np.int64) if problem.device_free.shape[1] else (
            np.zeros(problem.n_nodes, dtype=np.int64))
        models = ("", *sorted({m for m, g in zip(node_models, n_gpu.tolist(), strict=True) if m and g}))
        model_id = np.array([models.index(m) if g and m else 0 for m, g in zip(node_models, n_gpu.tolist(),
                                                                                 strict=True)], dtype=np.int64)
        view = StateView(models, model_id, n_gpu, np.zeros(problem.n_nodes, dtype=np.int64),
                         np.zeros((problem.n_nodes, max(problem.device_free.shape[1], 1)), dtype=np.int64),
                         problem.resource_index(CPU))
        view.sync(PlacementState.start(problem))
        return view

    def sync(self, state: PlacementState) -> IntArray:
        """Takes the state's free cpu and devices; returns the nodes that changed."""
        cpu = state.free[:, self.cpu_index] if self.cpu_index is not None else np.zeros_like(self.cpu_free)
        dev = np.zeros_like(self.dev_free)
        dev[:, : state.device_free.shape[1]] = np.maximum(state.device_free, 0)
        changed: IntArray = np.flatnonzero((cpu != self.cpu_free) | (dev != self.dev_free).any(axis=1))
        self.cpu_free[changed] = cpu[changed]
        self.dev_free[changed] = dev[changed]
        return changed


def cycle_placer(policy: SimPolicy, typical: TaskDistribution, marks: ModelMarks) -> Placer:
    """``policy`` as a baseline's placer (``simulate.schedulers``). Its view and chooser are kept
    from one cycle to the next while the nodes are the same (names, GPU models, devices): the
    next cycle's state is synced into the view and the chooser refreshed on the nodes whose free
    cpu or devices changed, which is what a chooser made again would compute (its
    :meth:`~simulate.policies.node_view.Chooser.refresh` recomputes those nodes' rows, as it does
    between the pods of one cycle)."""
    kept = Kept()

    def place(snapshot: Snapshot, agg: Aggregation, _plugins: PluginSet) -> Assignment:
        p = agg.problem
        view, chooser = kept.for_problem(p, [n.labels.get(marks.node_label, "") for n in snapshot.nodes],
                                         [n.name for n in snapshot.nodes], policy, typical)

        def one_at_a_time(state: PlacementState, c: int, want: int) -> int:
            need = state.need(c)
            shape = Shape(int(p.demand[c, view.cpu_index]) if view.cpu_index is not None else 0,
                          need.count, need.milli)
            placed = 0
            while placed < want:
                changed = view.sync(state)  # (a gang's trial state, or one rolled back, differs)
                if len(changed):
                    chooser.refresh(changed)
                nodes, _ = candidates(state, c)
                if not len(nodes):
                    break
                i, devices = chooser.choose(shape, nodes)
                state.take(c, i, 1, devices or None)
                placed += 1
            return placed

        return in_queue_order(p, one_at_a_time)

    return place


class Kept:
    """The last cycle's view and chooser, and the nodes they were made for."""

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.view: StateView | None = None
        self.chooser: Chooser | None = None

    def for_problem(self, p: Problem, models: Sequence[str], names: Sequence[str], policy: SimPolicy,
                    typical: TaskDistribution) -> tuple[StateView, Chooser]:
        """The view and chooser for ``p`` (``models``: the GPU model of each of the snapshot's
        nodes ``names``), brought up to ``p``'s start state."""
        model_of = dict(zip(names, models, strict=True))
        node_models = tuple(model_of.get(name, "") for name in p.node_names)
        exists = p.device_free >= 0
        key = (tuple(p.node_names), node_models, exists.shape, exists.tobytes(), p.resource_index(CPU))
        if key == self.key and self.view is not None and self.chooser is not None:
            changed = self.view.sync(PlacementState.start(p))
            if len(changed):
                self.chooser.refresh(changed)
            return self.view, self.chooser
        self.view = StateView.of(p, node_models)
        self.chooser = policy.chooser(self.view, typical, TieOrder.by_name(p.node_names))
        self.key = key
        return self.view, self.chooser


def marks_of(profile: Profile) -> ModelMarks:
    """The profile's GPUModel args (its defaults when the profile gives none)."""
    args = profile.plugin_args.get(GPU_MODEL)
    if not isinstance(args, GPUModelArgs):
        args = GPUModelArgs()
    return ModelMarks(args.nodeLabel, args.podAnnotation)
