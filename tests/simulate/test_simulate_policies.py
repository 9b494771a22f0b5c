"""``simulate``'s baselines are the FGD authors' FGD and best-fit (``simulate.policies``), the one
implementation the bench's device simulator runs too: on the same pods, nodes and tie order,
``simulate``'s engine (every pod at one instant, or one per second) binds exactly the pods, nodes
and devices the device simulator does."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from kubeplace.kube.parse import parse_pod
from kubeplace.models.gpu import DEFAULT_CONVENTIONS
from kubeplace.simulate.names import KUBE_SCHEDULER, KUBEPLACE, SCHEDULERS
from kubeplace.simulate.policies import POLICIES
from kubeplace.simulate.policies.cycle import ModelMarks, shape_of, trace_typical
from kubeplace.simulate.policies.node_view import Chooser, DeviceView, TieOrder
from kubeplace.simulate.policies.policy import SimPolicy
from kubeplace.simulate.policies.typical import TaskDistribution
from kubeplace.simulate.schedulers import PLACERS
from kubeplace.simulate.trace import Arrival, Trace
from kubeplace.simulate.world import arriving_pods
from kubeplace.solver.policies import POLICIES as SOLVER_POLICIES
from kubeplace_bench.baselines import place_one_at_a_time
from kubeplace_bench.fgd_protocol import ProtocolRun, typical_pods
from kubeplace_bench.fgd_simulate import placed_indices, simulate_run
from kubeplace_bench.gpusim import Cluster, NodeSpec, PodSpec
from kubeplace_bench.openb import MODEL_LABEL, pod_manifest

MARKS = ModelMarks(MODEL_LABEL, "kubeplace.io/gpu-model")


def test_the_simulated_policies_are_one_registry() -> None:
    assert (KUBEPLACE, KUBE_SCHEDULER, *POLICIES) == SCHEDULERS
    assert {"best-fit", "fgd"} <= set(POLICIES)
    assert set(PLACERS) == {KUBE_SCHEDULER, *POLICIES}
    assert "fgd" not in SOLVER_POLICIES  # the solver's FGD-style greedy is its warm start, by another name


def random_case(seed: int, n_nodes: int = 30, n_pods: int = 140) -> tuple[list[NodeSpec], ProtocolRun]:
    """Mixed nodes (no GPU, 2-8 GPUs of three models) and pods (shares, whole GPUs, CPU only, model
    lists), saturating the cluster; a random tie order."""
    rng = np.random.default_rng(seed)
    nodes = [NodeSpec(f"n{k:02d}", int(rng.choice([32000, 64000, 96000])), 262144, int(rng.choice([0, 2, 4, 8])),
                      str(rng.choice(["T4", "V100", "P100"]))) for k in range(n_nodes)]
    shapes = [(1, 1000, ()), (1, 500, ()), (1, 250, ("T4",)), (2, 1000, ()), (0, 0, ()), (4, 1000, ("V100", "P100")),
              (1, 300, ()), (0, 0, ())]
    pods = []
    for k in range(n_pods):
        n, m, models = shapes[int(rng.integers(len(shapes)))]
        pods.append(PodSpec(f"pod-{k:03d}", int(rng.choice([1000, 4000, 8000, 16000, 48000])),
                            int(rng.choice([1024, 8192, 65536])), n, m, models))
    return nodes, ProtocolRun(tuple(pods), tuple(int(r) for r in rng.permutation(n_nodes)))


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_simulate_binds_what_the_device_simulator_places(policy: str, seed: int) -> None:
    nodes, run = random_case(seed)
    typical = typical_pods(run.pods[:100])  # (the typical pods are given, not the trace's)
    cluster = Cluster.build(nodes)
    expected = place_one_at_a_time(policy, cluster, run.pods, typical, tie_rank=run.tie_rank)
    assert 0 < len(expected) < len(run.pods)  # (saturated: ties and refusals both matter)
    renamed = {n.name: f"{run.tie_rank[k]:04d}-{n.name}" for k, n in enumerate(nodes)}
    for at_once in (True, False):
        result = simulate_run(policy, nodes, run, typical, at_once)
        assert result.summary.refused == 0
        assert result.summary.cycles == (1 if at_once else len(run.pods))
        assert placed_indices(run, result) == [j for j, _ in expected]
        bound = {int(r.key.split("/", 1)[1][1:4]): r.node for r in result.pods if r.start is not None}
        if at_once:  # one plan: pods of one shape are one class, and which of them gets which node is the plan's
            assert Counter((shape(run.pods[j]), node) for j, node in bound.items()) == Counter(
                (shape(run.pods[j]), renamed[p.node]) for j, p in expected)
        else:
            assert bound == {j: renamed[p.node] for j, p in expected}


def shape(p: PodSpec) -> tuple[int, int, int, int, tuple[str, ...]]:
    return p.cpu, p.mem, p.num_gpu, p.gpu_milli, p.models


def test_devices_are_the_policys_own_from_cycle_to_cycle() -> None:
    """best-fit puts a share on the tightest device that fits, and the simulation keeps the
    devices of bound pods from cycle to cycle: "c" goes to device 1 (200 free), not device 0
    (500 free), so "d" (450) still fits on device 0."""
    nodes = [NodeSpec("a", 32000, 65536, 2, "T4")]
    pods = tuple(PodSpec(name, 1000, 1024, 1, milli) for name, milli in (("a", 500), ("b", 800), ("c", 150),
                                                                          ("d", 450)))
    run = ProtocolRun(pods, (0,))
    expected = place_one_at_a_time("best-fit", Cluster.build(nodes), pods, typical_pods(pods), tie_rank=[0])
    assert [p.gpus for _, p in expected] == [(0,), (1,), (1,), (0,)]
    for at_once in (True, False):
        assert placed_indices(run, simulate_run("best-fit", nodes, run, typical_pods(pods), at_once)) == [0, 1, 2, 3]


def test_typical_pods_of_a_trace_keep_the_gpu_models_as_written() -> None:
    written = {"kubeplace.io/gpu-model": "V100M16|V100M32|V100M32"}
    manifests = [pod_manifest(PodSpec("a", 4000, 1024, 1, 1000, ("V100M16", "V100M32"))),
                 pod_manifest(PodSpec("b", 4000, 1024, 1, 1000)),
                 pod_manifest(PodSpec("c", 2000, 1024)),
                 pod_manifest(PodSpec("d", 2000, 1024))]
    manifests[1]["metadata"]["annotations"] |= written
    manifests[3]["spec"]["affinity"] = manifests[0]["spec"]["affinity"]  # a CPU-only pod's models are ignored
    shapes = [shape_of(parse_pod(m, "t"), DEFAULT_CONVENTIONS, MARKS) for m in manifests]
    assert [s.models for s in shapes] == [("V100M16", "V100M32"), ("V100M16", "V100M32", "V100M32"), (), ()]
    typical = trace_typical(arriving_pods(Trace(tuple(Arrival(0.0, None, m) for m in manifests), "t")),
                            DEFAULT_CONVENTIONS, MARKS)
    assert typical.listed == 4 and sorted(typical.models) == [(), ("V100M16", "V100M32"),
                                                              ("V100M16", "V100M32", "V100M32")]
    assert sorted(typical.weight.tolist()) == [1, 1, 2]


def test_ties_go_to_the_smallest_name_as_go_compares_them() -> None:
    order = TieOrder.by_name(["b", "a", "B", "aa"])
    assert order.rank.tolist() == [3, 1, 0, 2]
    with pytest.raises(ValueError, match="permutation"):
        TieOrder([0, 0, 1])


@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_trace_without_gpu_pods_or_a_cluster_without_gpus(policy: str) -> None:
    """The typical pods may hold no GPU shape and the nodes no device: every pod still placed."""
    cpu_only = (PodSpec("a", 1000, 1024), PodSpec("b", 2000, 1024))
    for nodes in ([NodeSpec("x", 4000, 8192)], [NodeSpec("x", 4000, 8192, 2, "T4")]):
        run = ProtocolRun(cpu_only, (0,))
        assert placed_indices(run, simulate_run(policy, nodes, run, typical_pods(cpu_only))) == [0, 1]
        with_gpu = (*cpu_only, PodSpec("g", 1000, 1024, 1, 500))
        run = ProtocolRun(with_gpu, (0,))
        placed = placed_indices(run, simulate_run(policy, nodes, run, typical_pods(with_gpu)))
        assert placed == ([0, 1, 2] if nodes[0].gpus else [0, 1])


def test_typical_pods_given_even_empty_are_used_not_the_traces() -> None:
    """``Setup.typical`` is taken as given, even when it holds no shape (FGD then scores every
    candidate alike: the tie order decides); the trace's own would keep "g" off "y", where the
    3-cpu pods could no longer use the GPUs."""
    from kubeplace.simulate.policies.typical import task_distribution

    nodes = [NodeSpec("x", 4000, 8192, 2, "T4"), NodeSpec("y", 3500, 8192, 2, "T4")]
    pods = (PodSpec("g", 1000, 1024, 1, 500), PodSpec("h", 3000, 1024, 1, 500), PodSpec("i", 3000, 1024, 1, 500))
    run = ProtocolRun(pods, (1, 0))  # y first on ties
    node_of_g = {False: "0001-x", True: "0000-y"}
    for empty in (False, True):
        result = simulate_run("fgd", nodes, run, task_distribution([] if empty else pods))
        assert {r.key: r.node for r in result.pods}["openb/p0-g"] == node_of_g[empty]


@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_policys_chooser_is_kept_from_cycle_to_cycle_while_the_nodes_are_the_same(
        policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle per pod: the chooser is made once and refreshed on the nodes that changed since
    the last cycle (a saturating trace plans one pod per arrival on a cluster of thousands of
    nodes), and binds what the device simulator places."""
    made = []
    original = POLICIES[policy]

    def counting(view: DeviceView, typical: TaskDistribution, ties: TieOrder) -> Chooser:
        made.append(view)
        return original.chooser(view, typical, ties)

    nodes, run = random_case(4)
    typical = typical_pods(run.pods[:100])
    expected = place_one_at_a_time(policy, Cluster.build(nodes), run.pods, typical, tie_rank=run.tie_rank)
    monkeypatch.setitem(POLICIES, policy, SimPolicy(policy, counting))
    result = simulate_run(policy, nodes, run, typical, at_once=False)
    assert result.summary.cycles == len(run.pods) and len(made) == 1
    assert placed_indices(run, result) == [j for j, _ in expected]


def test_the_trace_is_parsed_once_for_the_typical_pods_and_the_fragmentation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A saturating openb trace is 9,061 pods: FGD's typical pods and the replay's fragmentation
    measure read the same parsed pods."""
    from kubeplace.models.config import Configuration, Profile, SolverSettings
    from kubeplace.serve.settings import ServeSettings
    from kubeplace.simulate import world as world_module
    from kubeplace.simulate.engine import simulate
    from kubeplace.simulate.policies import cycle
    from kubeplace.simulate.schedulers import Setup
    from kubeplace_bench.fgd_simulate import protocol_world

    parsed = []

    def counting(raw: Any, source: str, *args: Any) -> Any:
        parsed.append(raw)
        return parse_pod(raw, source, *args)

    monkeypatch.setattr(world_module, "parse_pod", counting)
    monkeypatch.setattr(cycle, "parse_pod", counting, raising=False)
    nodes, run = random_case(5, n_nodes=4, n_pods=12)
    cluster, trace = protocol_world(nodes, run, at_once=False)
    setup = Setup(Configuration(), Profile(), SolverSettings(workers=1), ServeSettings(bind_workers=1))
    result = simulate(cluster, trace, "fgd", setup)  # (the typical pods: the trace's)
    assert result.summary.cycles == 12 and len(parsed) == 12
