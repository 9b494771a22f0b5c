"""The device simulator's validation rules, its metrics, and FGD fragmentation by hand."""

from __future__ import annotations

import numpy as np
import pytest

from kubeplace.simulate.policies.typical import FragIndex, TaskDistribution, node_fragmentation, task_distribution
from kubeplace_bench.fragmentation import (
    cluster_fragmentation,
    fragmentation_ratio,
)
from kubeplace_bench.gpusim import Cluster, NodeSpec, PodSpec, metrics

NODES = [NodeSpec("cpu", 8000, 16384), NodeSpec("t4", 32000, 65536, 2, "T4"), NodeSpec("v100", 32000, 65536, 4, "V100")]


def cluster() -> Cluster:
    return Cluster.build(NODES)


def test_cpu_and_memory() -> None:
    c = cluster()
    assert c.check(PodSpec("p", 9000, 1), 0, ()) == "Insufficient cpu: requests 9000m, 8000m free"
    assert c.check(PodSpec("p", 1, 20000), 0, ()) == "Insufficient memory: requests 20000Mi, 16384Mi free"
    assert c.place(PodSpec("p", 8000, 16384), 0, ()) is None
    assert (c.cpu_free[0], c.mem_free[0]) == (0, 0)
    assert c.check(PodSpec("q", 1, 0), 0, ()) is not None


def test_gpu_model_constraint() -> None:
    c = cluster()
    pod = PodSpec("p", 1, 1, 1, 1000, ("V100",))
    assert c.check(pod, 1, (0,)) == "GPU model T4 not in V100"
    assert c.check(pod, 2, (0,)) is None
    assert "GPU model none" in str(c.check(PodSpec("c", 1, 1, 0, 0, ("V100",)), 0, ()))


def test_share_takes_one_device_with_room() -> None:
    c = cluster()
    share = PodSpec("s", 1000, 1, 1, 600)
    assert c.place(share, 1, (0,)) is None
    assert list(c.dev_free[1, :2]) == [400, 1000]
    assert c.check(PodSpec("s2", 1000, 1, 1, 500), 1, (0,)) == "device 0 has 400 milli free, the pod needs 500"
    assert c.place(PodSpec("s3", 1000, 1, 1, 400), 1, (0,)) is None
    assert c.dev_free[1, 0] == 0
    assert c.check(share, 1, (0, 1)) == "needs 1 distinct device(s), got [0, 1]"


def test_whole_gpus_need_completely_free_distinct_devices() -> None:
    c = cluster()
    assert c.place(PodSpec("s", 1, 1, 1, 100), 2, (1,)) is None
    whole = PodSpec("w", 1, 1, 2, 1000)
    assert c.check(whole, 2, (0, 1)) == "device 1 is not completely free (900 milli free) for a whole-GPU pod"
    assert c.check(whole, 2, (0, 0)) == "needs 2 distinct device(s), got [0, 0]"
    assert c.check(whole, 2, (0,)) == "needs 2 distinct device(s), got [0]"
    assert c.check(whole, 2, (0, 4)) == "device 4 does not exist (node has 4 GPUs)"
    assert c.check(whole, 1, (0, 2)) == "device 2 does not exist (node has 2 GPUs)"
    assert c.place(whole, 2, (0, 2)) is None
    assert list(c.dev_free[2]) == [0, 900, 0, 1000]
    assert c.whole_free[2] == 1 and c.max_free[2] == 1000


def test_cpu_only_pod_takes_no_device_and_gpu_pod_needs_one() -> None:
    c = cluster()
    assert c.check(PodSpec("c", 1, 1), 1, (0,)) == "a CPU-only pod was given GPU devices [0]"
    assert c.check(PodSpec("g", 1, 1, 1, 1000), 0, ()) == "needs 1 distinct device(s), got []"
    before = c.dev_free.copy()
    assert c.place(PodSpec("c", 1, 1, 1, 1000), 1, (5,)) is not None
    assert (c.dev_free == before).all() and c.cpu_free[1] == 32000  # a refusal changes nothing


def test_feasible_agrees_with_check() -> None:
    c = cluster()
    c.place(PodSpec("a", 31000, 1, 1, 700), 1, (1,))
    pods = [PodSpec("cpu", 8000, 100), PodSpec("share", 500, 10, 1, 300), PodSpec("share-big", 500, 10, 1, 900),
            PodSpec("whole4", 100, 10, 4, 1000), PodSpec("t4", 100, 10, 1, 200, ("T4",))]
    w = c.workload(pods)
    for j, pod in enumerate(pods):
        expected = [any(c.check(pod, i, d) is None for d in _device_choices(c, pod, i)) for i in range(len(NODES))]
        assert list(c.feasible(w, j)) == expected, pod.name


def _device_choices(c: Cluster, pod: PodSpec, i: int) -> list[tuple[int, ...]]:
    if pod.num_gpu == 0:
        return [()]
    if pod.is_share:
        return [(d,) for d in range(c.n_gpu[i])]
    return [c.first_fit_devices(pod, i)]


def test_device_helpers() -> None:
    c = cluster()
    c.place(PodSpec("a", 1, 1, 1, 300), 2, (1,))
    c.place(PodSpec("b", 1, 1, 1, 600), 2, (2,))
    share = PodSpec("s", 1, 1, 1, 300)
    assert c.first_fit_devices(share, 2) == (0,)
    assert c.best_fit_device(share, 2) == (2,)  # 400 free: the tightest that fits
    assert c.first_fit_devices(PodSpec("w", 1, 1, 2, 1000), 2) == (0, 3)


def test_metrics() -> None:
    c = cluster()
    placed = [PodSpec("w", 1000, 10, 2, 1000), PodSpec("s", 500, 5, 1, 250)]
    c.place(placed[0], 2, (0, 1))
    c.place(placed[1], 1, (0,))
    m = metrics(c, placed, frag_milli=1000.0)
    assert (m.pods_placed, m.gpu_milli_placed, m.cpu_milli_placed, m.memory_mib_placed) == (2, 2250, 1500, 15)
    assert m.gpu_alloc_ratio == pytest.approx(2250 / 6000)
    assert m.fragmentation_ratio == pytest.approx(1000 / 3750)


# --- fragmentation ------------------------------------------------------------------------------


def dist_of(*shapes: tuple[int, int, int, tuple[str, ...], int]) -> TaskDistribution:
    return TaskDistribution(cpu=np.array([s[0] for s in shapes]), milli=np.array([s[1] for s in shapes]),
                            num=np.array([s[2] for s in shapes]), models=tuple(s[3] for s in shapes),
                            weight=np.array([s[4] for s in shapes]))


DIST = dist_of(
    (4000, 500, 1, (), 2),  # fits: only the 300 left on device 1 is fragmented
    (2000, 0, 0, (), 1),  # CPU-only: cannot use any GPU -> all 1300
    (16000, 1000, 1, (), 1),  # lacks cpu -> all 1300
)


def test_node_fragmentation_by_hand() -> None:
    frag = node_fragmentation(np.array([8000]), np.array([[1000, 300]]), ["T4"], DIST)
    assert frag[0] == pytest.approx((2 * 300 + 1300 + 1300) / 4)


def test_fragmentation_cases() -> None:
    one_gpu = dist_of((1000, 1000, 1, (), 1))
    cpu, model = np.array([8000]), ["T4"]
    # a whole-GPU task: the partly used device is fragmented, the free one is not
    assert node_fragmentation(cpu, np.array([[1000, 400]]), model, one_gpu)[0] == 400
    # no completely free device: the task cannot run, everything free is fragmented
    assert node_fragmentation(cpu, np.array([[600, 400]]), model, one_gpu)[0] == 1000
    # two GPUs needed, only one fits
    two = dist_of((1000, 500, 2, (), 1))
    assert node_fragmentation(cpu, np.array([[600, 400]]), model, two)[0] == 1000
    assert node_fragmentation(cpu, np.array([[600, 500, 100]]), model, two)[0] == 100
    # wrong model: no access, all fragmented
    v100 = dist_of((1000, 100, 1, ("V100",), 1))
    assert node_fragmentation(cpu, np.array([[1000, 400]]), model, v100)[0] == 1400
    assert node_fragmentation(cpu, np.array([[1000, 400]]), ["V100"], v100)[0] == 0
    # a node without free GPU has no fragmentation
    assert node_fragmentation(cpu, np.array([[0, 0]]), model, DIST)[0] == 0


def test_cluster_fragmentation_and_ratio() -> None:
    c = cluster()
    one_gpu = dist_of((1000, 1000, 1, (), 1))
    c.place(PodSpec("s", 1000, 1, 1, 300), 1, (0,))  # t4: 700 fragmented, 1000 usable
    c.place(PodSpec("w", 31500, 1, 1, 1000), 2, (0,))  # v100: 500 cpu left < 1000: 3000 fragmented
    assert cluster_fragmentation(c, one_gpu) == 700 + 3000
    assert fragmentation_ratio(c, one_gpu) == pytest.approx(3700 / 4700)


def test_task_distribution_keeps_the_popular_shapes() -> None:
    pods = ([PodSpec(f"a{i}", 1000, 5, 1, 500) for i in range(10)]
            + [PodSpec(f"b{i}", 2000, i, 0, 0) for i in range(9)]  # memory is not part of a shape
            + [PodSpec("c", 3000, 1, 2, 1000, ("T4",))])
    dist = task_distribution(pods)
    assert list(dist.weight) == [10, 9] and list(dist.milli) == [500, 0]  # 19/20 = 95%: c is left out
    assert dist.prob.sum() == pytest.approx(1.0)
    assert len(task_distribution(pods, popularity=1.0)) == 3


def test_frag_index_matches_the_definition() -> None:
    rng = np.random.default_rng(7)
    nodes = [NodeSpec(f"n{i}", 32000, 1, int(rng.choice([0, 1, 2, 4, 8])), str(rng.choice(["A", "B"])))
             for i in range(40)]
    c = Cluster.build(nodes)
    for i, n in enumerate(nodes):
        c.cpu_free[i] = int(rng.integers(0, 32001))
        c.dev_free[i, : n.gpus] = rng.choice([0, 100, 250, 500, 700, 1000], n.gpus)
    dist = dist_of((4000, 500, 1, (), 5), (0, 0, 0, (), 2), (12000, 1000, 1, (), 4), (2000, 250, 1, ("B",), 3),
                   (30000, 1000, 2, ("A", "B"), 1))
    index = FragIndex(c, dist)
    models = [n.model if n.gpus else "" for n in nodes]
    expected = node_fragmentation(c.cpu_free, c.dev_free, models, dist)
    assert np.allclose(index.scaled / dist.total, expected)
    nodes_ = np.arange(len(nodes))
    cand, dev = index.share_candidates(nodes_, 250)
    after = index.after_share(cand, dev, 1000, 250)
    for k in range(len(cand)):
        i = cand[k]
        cpu, devs = c.cpu_free[i : i + 1] - 1000, c.dev_free[i : i + 1].copy()
        devs[0, dev[k]] -= 250
        assert after[k] / dist.total == pytest.approx(node_fragmentation(cpu, devs, [models[i]], dist)[0])
