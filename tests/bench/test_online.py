"""kubeplace online on FGD's protocol (``bench.online``): each window placed with FGD's score twice
(ties by the node order, ties to the fuller node), the placement that allocates more kept."""

from __future__ import annotations

import pytest

from kubeplace.simulate.policies.typical import task_distribution
from kubeplace_bench.baselines import place_one_at_a_time
from kubeplace_bench.gpusim import Cluster, NodeSpec, PodSpec
from kubeplace_bench.online import place_in_windows

# small (8 cores, 1 GPU) and big (16 cores, 1 GPU); the node order prefers big on equal scores
NODES = [NodeSpec("small", 8000, 65536, 1, "T4"), NodeSpec("big", 16000, 65536, 1, "T4")]
RANK = (1, 0)
TYPICAL = task_distribution([PodSpec("t", 1000, 1024, 1, 1000)])  # FGD expects 1-GPU, 1-core pods only
CPU_ONLY = PodSpec("c1", 7000, 1024)  # leaves both nodes able to host a typical pod: equal FGD scores


def gpu(name: str, cpu: int) -> PodSpec:
    return PodSpec(name, cpu, 1024, 1, 1000)


def fgd_gpu_milli(pods: list[PodSpec]) -> int:
    cluster = Cluster.build(NODES)
    return sum(pods[j].gpu_total for j, _ in place_one_at_a_time("fgd", cluster, pods, TYPICAL, tie_rank=RANK))


def online(pods: list[PodSpec], window: int) -> tuple[int, Cluster]:
    cluster = Cluster.build(NODES)
    result = place_in_windows(cluster, pods, TYPICAL, window, RANK)
    assert result.placed == sorted(result.placed) and sum(result.windows_won.values()) == -(-len(pods) // window)
    return sum(pods[j].gpu_total for j in result.placed), cluster


def test_a_window_keeps_the_cpu_only_pod_off_the_node_a_later_arrival_needs() -> None:
    """FGD puts the CPU-only pod on the big node (equal scores, node order); the 10-core GPU pod
    that arrives next then fits nowhere. In one window, ties to the fuller node put it on the
    small one and both are placed."""
    pods = [CPU_ONLY, gpu("g", 10000)]
    assert fgd_gpu_milli(pods) == 0
    placed, cluster = online(pods, window=2)
    assert placed == 1000
    assert cluster.cpu_free.tolist() == [1000, 6000] and cluster.dev_free[:, 0].tolist() == [1000, 0]


def test_a_window_keeps_fgd_s_own_choice_where_it_is_better() -> None:
    """Here the fuller node is the wrong one for the CPU-only pod (two 2-core GPU pods follow,
    one per node): the window keeps the node-order placement, as FGD places them."""
    pods = [CPU_ONLY, gpu("g1", 2000), gpu("g2", 2000)]
    assert fgd_gpu_milli(pods) == 2000
    assert online(pods, window=3)[0] == 2000


@pytest.mark.parametrize("window", [1, 2, 5])
def test_each_pod_is_placed_at_most_once_and_the_cluster_holds_the_kept_window_only(window: int) -> None:
    pods = [CPU_ONLY, gpu("g1", 2000), gpu("g2", 2000), gpu("g3", 1000), PodSpec("c2", 500, 512)]
    cluster = Cluster.build(NODES)
    result = place_in_windows(cluster, pods, TYPICAL, window, RANK)
    assert len(set(result.placed)) == len(result.placed)
    empty = Cluster.build(NODES)  # the discarded candidate of each window left nothing behind
    assert sum(pods[j].cpu for j in result.placed) == int(empty.cpu_free.sum() - cluster.cpu_free.sum())
    assert sum(pods[j].gpu_total for j in result.placed) == int(empty.dev_free.sum() - cluster.dev_free.sum())
    with pytest.raises(ValueError, match="window"):
        place_in_windows(Cluster.build(NODES), pods, TYPICAL, 0)
