"""fgd-steered (``simulate.policies.fgd_steered``): FGD's score, a CPU-only pod's equal scores to the
node with the least free GPU milli; a GPU pod's placed exactly as FGD places it."""

from __future__ import annotations

from kubeplace.simulate.policies import POLICIES
from kubeplace.simulate.policies.typical import task_distribution
from kubeplace_bench.baselines import place_one_at_a_time
from kubeplace_bench.gpusim import Cluster, NodeSpec, PodSpec

# small (8 cores, 1 GPU) first on equal scores, big (16 cores, 1 GPU); typical pods: 1 GPU, 1 core
NODES = [NodeSpec("small", 8000, 65536, 1, "T4"), NodeSpec("big", 16000, 65536, 1, "T4")]
TYPICAL = task_distribution([PodSpec("t", 1000, 1024, 1, 1000)])


def gpu(name: str, cpu: int) -> PodSpec:
    return PodSpec(name, cpu, 1024, 1, 1000)


def run(policy: str, pods: list[PodSpec]) -> tuple[list[int], Cluster]:
    cluster = Cluster.build(NODES)
    return [j for j, _ in place_one_at_a_time(policy, cluster, pods, TYPICAL, tie_rank=(0, 1))], cluster


def test_a_cpu_only_pod_takes_the_cpu_of_the_node_whose_gpus_are_taken() -> None:
    """The 12-core GPU pod fits only the big node. The CPU-only pod then scores the same on both;
    FGD takes the small node (the order), whose GPU the 6-core pod then cannot use."""
    pods = [gpu("g0", 12000), PodSpec("c", 3000, 1024), gpu("g1", 6000)]
    assert run("fgd", pods)[0] == [0, 1]
    placed, cluster = run("fgd-steered", pods)
    assert placed == [0, 1, 2] and cluster.cpu_free.tolist() == [2000, 1000]
    assert "fgd-steered" in POLICIES


def test_gpu_pods_go_where_fgd_puts_them() -> None:
    pods = [gpu("g0", 1000), gpu("g1", 2000), PodSpec("c", 500, 512)]
    fgd, steered = run("fgd", pods), run("fgd-steered", pods)
    assert fgd[0] == steered[0] == [0, 1, 2]
    assert fgd[1].cpu_free.tolist() == steered[1].cpu_free.tolist()
