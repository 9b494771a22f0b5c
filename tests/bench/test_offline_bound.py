"""The offline bound of the FGD protocol: hand-checked optima, validity against brute force on
small random clusters, every offline placement replayed by the simulator, and the bound above
FGD's published figure on a real seed."""

from __future__ import annotations

import itertools
import random
import shutil

import numpy as np
import pytest

from kubeplace_bench.cluster_scenarios import default_openb_dir
from kubeplace_bench.commands_fgd import published_path
from kubeplace_bench.fgd_protocol import PUBLISHED_POLICY, protocol_run, read_published
from kubeplace_bench.gpusim import Cluster, NodeSpec, PodSpec
from kubeplace_bench.offline import checked, offline
from kubeplace_bench.offline_bound import shapes_of, upper_bound
from kubeplace_bench.offline_pricing import best_node
from kubeplace_bench.openb import read_nodes, read_pods


def node(name: str, gpus: int, cpu: int = 64000, mem: int = 262144, model: str = "V100") -> NodeSpec:
    return NodeSpec(name, cpu, mem, gpus, model)


def pod(name: str, gpus: int, milli: int = 1000, cpu: int = 4000, models: tuple[str, ...] = ()) -> PodSpec:
    return PodSpec(name, cpu, 1024, gpus, milli, models)


@pytest.mark.parametrize(("nodes", "pods", "optimum"), [
    # two 8-GPU nodes, 3-GPU pods: two per node, 12 of 16 GPUs (the summed capacity would say 15 of 16 or 100%)
    ([node("a", 8), node("b", 8)], [pod(f"p{j}", 3) for j in range(6)], 75.0),
    # shares of 600 milli: one per device, 1200 of 2000 milli
    ([node("a", 2)], [pod(f"p{j}", 1, 600) for j in range(4)], 60.0),
    # a 4-GPU pod cannot use two 2-GPU nodes; the 1-GPU pods fill one of them
    ([node("a", 2), node("b", 2)], [pod("big", 4), pod("s0", 1), pod("s1", 1)], 50.0),
    # pods asking for model T4 only: the V100 node stays empty
    ([node("t", 4, model="T4"), node("v", 4)], [pod(f"p{j}", 1, models=("T4",)) for j in range(8)], 50.0),
])
def test_the_bound_is_the_optimum_and_the_placement_reaches_it(nodes: list[NodeSpec], pods: list[PodSpec],
                                                               optimum: float) -> None:
    found = offline(nodes, pods, seconds=5)
    assert found.bound.converged
    assert found.bound_percent == found.placed_percent == optimum
    assert found.placed_milli == sum(pods[j].gpu_total for j, _, _ in found.placements)


def test_a_cpu_short_node_bounds_at_what_its_cpu_holds() -> None:
    nodes = [node("a", 2, cpu=8000)]  # two 1-GPU pods of 6 cores: one fits
    found = offline(nodes, [pod("p0", 1, cpu=6000), pod("p1", 1, cpu=6000)], seconds=5)
    assert found.placed_percent == 50.0
    assert upper_bound(shapes_of(nodes, [pod("p0", 1, cpu=6000), pod("p1", 1, cpu=6000)])).milli == 4000 / 3
    assert found.bound_percent == 50.0  # the pooled LP's 8 / 12 of two pods, cut by the pricing that keeps cpu per node


@pytest.mark.parametrize("seed", range(40))
def test_the_pricings_agree_and_bound_the_best_node(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 7))
    gpus = rng.choice([1, 1, 1, 2, 4], n)
    milli = np.where(gpus == 1, rng.choice([150, 250, 400, 600, 1000], n), 1000)
    cpu = rng.choice([1000, 3000, 5000, 9000], n)
    value, eligible, count = (gpus * milli).astype(np.float64), np.ones(n, dtype=np.bool_), rng.integers(1, 4, n)
    devices, node_cpu = int(rng.choice([1, 2, 4])), int(rng.choice([8000, 16000]))
    pooled = best_node(value, eligible, gpus, milli, count, devices)
    two_d = best_node(value, eligible, gpus, milli, count, devices, np.zeros(n, dtype=np.int64), 1)
    assert pooled[0] == pytest.approx(two_d[0]) == pytest.approx(value @ pooled[1])
    by_cpu = best_node(value, eligible, gpus, milli, count, devices, cpu, node_cpu)
    assert by_cpu[0] == pytest.approx(value @ by_cpu[1]) and by_cpu[0] <= pooled[0] + 1e-9
    pods = [PodSpec(f"c{c}-{k}", int(cpu[c]), 1024, int(gpus[c]), int(milli[c])) for c in range(n)
            for k in range(int(count[c]))]
    assert by_cpu[0] + 1e-6 >= best_by_search([NodeSpec("a", node_cpu, 262144, devices, "V100")], pods)


def test_cpu_only_pods_are_left_out_and_a_list_without_gpu_pods_bounds_at_zero() -> None:
    nodes = [node("a", 2)]
    found = offline(nodes, [PodSpec("cpu", 1000, 1024)], seconds=5)
    assert (found.bound_percent, found.placed_percent, found.placements) == (0.0, 0.0, ())


def test_a_share_of_several_devices_is_refused_not_left_out() -> None:
    with pytest.raises(ValueError, match="pod s: 2 GPUs of 500 milli"):
        shapes_of([node("a", 2)], [pod("s", 2, 500)])


def test_the_referee_refuses_an_infeasible_placement() -> None:
    nodes = [node("a", 2)]
    pods = [pod("p0", 1, 600), pod("p1", 1, 600)]
    assert checked(nodes, pods, [(0, 0, (0,)), (1, 0, (1,))]) == ((0, 0, (0,)), (1, 0, (1,)))
    with pytest.raises(ValueError, match="p1 on a \\[0\\]: device 0 has 400 milli free"):
        checked(nodes, pods, [(0, 0, (0,)), (1, 0, (0,))])
    with pytest.raises(ValueError, match="placed twice"):
        checked(nodes, pods, [(0, 0, (0,)), (0, 0, (1,))])


def best_by_search(nodes: list[NodeSpec], pods: list[PodSpec]) -> int:
    """The most GPU milli any placement of a subset of ``pods`` reaches (exhaustive)."""
    best = 0

    def go(j: int, cluster: Cluster, milli: int) -> None:
        nonlocal best
        best = max(best, milli)
        if j == len(pods) or milli + sum(p.gpu_total for p in pods[j:]) <= best:
            return
        go(j + 1, cluster, milli)
        for i, n in enumerate(nodes):
            for devices in itertools.combinations(range(n.gpus), pods[j].num_gpu):
                trial = cluster.copy()
                if trial.place(pods[j], i, devices) is None:
                    go(j + 1, trial, milli + pods[j].gpu_total)

    go(0, Cluster.build(nodes), 0)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_the_bound_is_never_below_the_best_placement_of_a_small_random_cluster(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [node(f"n{i}", rng.choice([1, 2, 4]), cpu=rng.choice([8000, 16000, 32000]),
                  mem=rng.choice([16384, 65536]), model=rng.choice(["T4", "V100"])) for i in range(rng.randint(1, 3))]
    pods = []
    for j in range(rng.randint(2, 6)):
        gpus = rng.choice([0, 1, 1, 1, 2, 4])
        milli = rng.choice([250, 500, 600, 1000]) if gpus == 1 else 1000 if gpus else 0
        pods.append(PodSpec(f"p{j}", rng.choice([2000, 6000, 12000]), rng.choice([4096, 16384]), gpus, milli,
                            rng.choice([(), (), ("T4",)]) if gpus else ()))
    optimum = best_by_search(nodes, pods)
    found = offline(nodes, pods, seconds=3)
    assert found.placed_milli <= optimum <= found.bound_milli + 1e-6, (found.placed_milli, optimum, found.bound_milli)
    assert upper_bound(shapes_of(nodes, pods)).milli + 1e-6 >= optimum


OPENB = default_openb_dir()
PUBLISHED = published_path(None)


@pytest.mark.skipif(shutil.which("go") is None or OPENB is None or PUBLISHED is None,
                    reason="Go, the openb trace or the published figures are absent")
def test_the_bound_is_above_fgd_and_best_fit_on_a_real_seed() -> None:
    assert OPENB is not None and PUBLISHED is not None
    nodes = read_nodes(OPENB / "openb_node_list_gpu_node.csv")
    run = protocol_run(nodes, read_pods(OPENB / "openb_pod_list_gpushare100.csv"), 42)
    bound = upper_bound(shapes_of(nodes, run.pods))
    assert bound.converged
    percent = 100 * bound.milli / (1000 * sum(n.gpus for n in nodes))
    published = read_published(PUBLISHED)
    for policy in ("fgd", "best-fit"):
        assert percent >= published[("openb_pod_list_gpushare100", PUBLISHED_POLICY[policy], 42)]
    assert percent < 95  # gpushare100 runs out of cpu and memory long before its devices are full
