"""kubeplace online on FGD's protocol (``bench.online``): each window placed with FGD's score twice
(ties by the node order, ties to the node with the least free GPU milli; CPU-only pods' ties to
that node in both), the placement that allocates more kept."""

from __future__ import annotations

import shutil

import pytest

from kubeplace.simulate.policies.typical import task_distribution
from kubeplace_bench.baselines import place_one_at_a_time
from kubeplace_bench.cluster_scenarios import default_openb_dir
from kubeplace_bench.commands_fgd import published_path
from kubeplace_bench.fgd_protocol import PUBLISHED_POLICY, protocol_run, read_published, run_policy, typical_pods
from kubeplace_bench.gpusim import Cluster, NodeSpec, PodSpec
from kubeplace_bench.online import place_in_windows
from kubeplace_bench.openb import read_nodes, read_pods

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


def test_a_cpu_only_pod_takes_the_cpu_of_the_node_with_the_fewest_free_gpus() -> None:
    """The 12-core GPU pod fits only the big node; the CPU-only pod then scores the same on both
    (each still hosts a typical pod), and FGD's node order puts it on the small node, whose GPU
    the next 6-core pod then cannot use. kubeplace puts it on the big node, whose GPU is taken."""
    pods = [gpu("g0", 12000), PodSpec("c", 3000, 1024), gpu("g1", 6000)]
    rank = (0, 1)  # the small node first on equal scores
    cluster = Cluster.build(NODES)
    assert sum(pods[j].gpu_total for j, _ in place_one_at_a_time("fgd", cluster, pods, TYPICAL, tie_rank=rank)) == 1000
    cluster = Cluster.build(NODES)
    result = place_in_windows(cluster, pods, TYPICAL, 1, rank)
    assert result.placed == [0, 1, 2] and cluster.cpu_free.tolist() == [2000, 1000]


# two GPUs on "two" (first on equal scores), one V100 on "one"; the typical pods are 1-GPU pods
TWO_NODES = [NodeSpec("two", 16000, 65536, 2, "T4"), NodeSpec("one", 16000, 65536, 1, "V100")]


def fgd_and_online(pods: list[PodSpec]) -> tuple[int, int, Cluster]:
    cluster = Cluster.build(TWO_NODES)
    fgd = sum(pods[j].gpu_total for j, _ in place_one_at_a_time("fgd", cluster, pods, TYPICAL, tie_rank=(0, 1)))
    cluster = Cluster.build(TWO_NODES)
    result = place_in_windows(cluster, pods, TYPICAL, len(pods), (0, 1))
    return fgd, sum(pods[j].gpu_total for j in result.placed), cluster


def test_a_window_puts_a_gpu_pod_on_the_node_with_fewer_free_gpus_when_that_places_more() -> None:
    """FGD's equal scores put the 1-GPU pod on the two-GPU node (node order); the 2-GPU pod that
    follows then fits nowhere. The window's second placement (ties to the node with the least
    free GPU milli) places both, and is kept."""
    fgd, online, cluster = fgd_and_online([gpu("g1", 1000), PodSpec("p2", 1000, 1024, 2, 1000)])
    assert (fgd, online) == (1000, 3000)
    assert cluster.dev_free.sum(axis=1).tolist() == [0, 0]


def test_a_window_keeps_fgd_s_own_choice_where_it_is_better() -> None:
    """Here the V100 pod that follows needs the one-GPU node: the window keeps FGD's placement."""
    fgd, online, cluster = fgd_and_online([gpu("g1", 1000), PodSpec("v", 1000, 1024, 1, 1000, ("V100",))])
    assert (fgd, online) == (2000, 2000)
    assert cluster.dev_free.sum(axis=1).tolist() == [1000, 0]


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


# --- the FGD paper's protocol on a real list -----------------------------------------------------

OPENB = default_openb_dir()
PUBLISHED = published_path(None)


@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed (math/rand's table)")
@pytest.mark.skipif(OPENB is None or PUBLISHED is None, reason="the openb trace or the published figures are absent")
def test_on_gpushare80_seed_42_fgd_steered_allocates_more_than_fgd() -> None:
    """The published FGD figure is 89.20 (fgd-steered: 89.43); the earlier kubeplace online, with
    best-fit's leftover as its fuller-node ties (cpu counted), reached 88.91 there. (kubeplace
    online's own run is left out: twice the time, and its figure is not settled, see
    docs/scaling-and-benchmarks.md.)"""
    assert OPENB is not None and PUBLISHED is not None
    nodes = read_nodes(OPENB / "openb_node_list_gpu_node.csv")
    pods = read_pods(OPENB / "openb_pod_list_gpushare80.csv")
    fgd = read_published(PUBLISHED)[("openb_pod_list_gpushare80", PUBLISHED_POLICY["fgd"], 42)]
    steered = run_policy("fgd-steered", nodes, protocol_run(nodes, pods, 42), typical_pods(pods))
    assert steered > fgd, (steered, fgd)
