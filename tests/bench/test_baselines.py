"""The one-at-a-time baselines on tiny clusters whose right answer is known by hand, the LP
bound, the saturation sample, the validation of kubeplace's placements, and the replay."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kubeplace.plan.plan import Placement
from kubeplace.simulate.policies.typical import TaskDistribution, task_distribution
from kubeplace_bench.baselines import lp_bound, measure, place_one_at_a_time, run_baseline
from kubeplace_bench.gpusim import Cluster, NodeSpec, Placed, PodSpec
from kubeplace_bench.report import replay, saturation_sample, validate

TWO = [NodeSpec("a", 32000, 65536, 2, "T4"), NodeSpec("b", 32000, 65536, 2, "T4")]
ONE_GPU = TaskDistribution(cpu=np.array([1000]), milli=np.array([1000]), num=np.array([1]), models=((),),
                           weight=np.array([1]))


def nodes_of(result: list[tuple[int, Placed]]) -> list[str]:
    return [p.node for _, p in result]


def test_best_fit_packs_and_default_spreads() -> None:
    pods = [PodSpec("first", 8000, 1024, 1, 1000), PodSpec("second", 4000, 1024, 1, 1000)]
    dist = task_distribution(pods)
    best = nodes_of(place_one_at_a_time("best-fit", Cluster.build(TWO), pods, dist))
    assert best == ["a", "a"]  # tie -> smallest name; then the fuller node
    default = nodes_of(place_one_at_a_time("default-scheduler", Cluster.build(TWO), pods, dist, seed=3))
    assert default[0] != default[1]  # LeastAllocated: the emptier node


def test_default_scheduler_least_allocated_uses_memory_too() -> None:
    c = Cluster.build(TWO)
    pods = [PodSpec("mem-heavy", 1000, 60000), PodSpec("next", 1000, 1000)]
    placed = nodes_of(place_one_at_a_time("default-scheduler", c, pods, task_distribution(pods), seed=0))
    assert placed[1] != placed[0]


def test_best_fit_takes_the_tightest_device() -> None:
    c = Cluster.build(TWO)
    c.place(PodSpec("old", 0, 0, 1, 400), 0, (1,))  # a: [1000, 600]
    (placed,) = place_one_at_a_time("best-fit", c, [PodSpec("s", 1000, 10, 1, 500)], ONE_GPU)
    assert (placed[1].node, placed[1].gpus) == ("a", (1,))


def test_fgd_keeps_a_whole_gpu_free_for_the_common_shape() -> None:
    c = Cluster.build(TWO)
    c.place(PodSpec("old", 0, 0, 1, 400), 1, (1,))  # b: [1000, 600]
    share = PodSpec("s", 1000, 10, 1, 500)
    (fgd,) = place_one_at_a_time("fgd", c.copy(), [share], ONE_GPU)
    assert (fgd[1].node, fgd[1].gpus) == ("b", (1,))  # b: [1000, 100], both nodes keep a free GPU
    (default,) = place_one_at_a_time("default-scheduler", c.copy(), [share], ONE_GPU, seed=0)
    if default[1].node == "b":
        assert default[1].gpus == (0,)  # first fit breaks b's whole GPU; fgd does not


def test_fgd_prefers_the_node_whose_fragmentation_drops() -> None:
    nodes = [NodeSpec("a", 32000, 65536, 2, "T4"), NodeSpec("b", 32000, 65536, 2, "T4")]
    c = Cluster.build(nodes)
    c.place(PodSpec("old", 0, 0, 1, 700), 0, (0,))  # a: [300, 1000]: 300 fragmented for 1-GPU tasks
    (placed,) = place_one_at_a_time("fgd", c, [PodSpec("s", 100, 10, 1, 300)], ONE_GPU)
    assert (placed[1].node, placed[1].gpus) == ("a", (0,))


def test_baselines_respect_the_simulator_and_report() -> None:
    rng = np.random.default_rng(0)
    nodes = [NodeSpec(f"n{i}", 32000, 131072, int(rng.choice([0, 2, 8])), "G") for i in range(12)]
    pods = [PodSpec(f"p{j}", int(rng.choice([1000, 4000, 8000])), 4096, *((1, int(rng.choice([250, 500])))
            if j % 3 == 0 else (int(rng.choice([0, 1, 2])), 1000))) for j in range(120)]
    pods = [p if p.num_gpu else PodSpec(p.name, p.cpu, p.mem) for p in pods]
    dist = task_distribution(pods)
    bound = lp_bound(nodes, pods)
    for policy in ("default-scheduler", "best-fit", "fgd"):
        r = run_baseline(policy, nodes, pods, dist=dist)
        figures = r.as_dict()
        assert figures["pods_placed"] == len(r.placements) <= bound.pods
        assert figures["gpu_milli_placed"] <= bound.gpu_milli
        assert figures["seconds"] >= 0 and figures["peak_mib"] >= 0
        c = Cluster.build(nodes)  # every placement replays cleanly in order
        by_name = {p.name: p for p in pods}
        for p in r.placements:
            assert c.place(by_name[p.pod], c.index[p.node], p.gpus) is None


def test_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        place_one_at_a_time("worst-fit", Cluster.build(TWO), [], ONE_GPU)


def test_lp_bound_by_hand() -> None:
    nodes = [NodeSpec("g", 10000, 1000, 2, "T4"), NodeSpec("c", 4000, 1000)]
    pods = ([PodSpec(f"w{i}", 1000, 1, 1, 1000) for i in range(3)] + [PodSpec("s", 1000, 1, 1, 500)]
            + [PodSpec(f"c{i}", 3000, 1) for i in range(2)] + [PodSpec("a100", 1, 1, 1, 1000, ("A100",))])
    bound = lp_bound(nodes, pods)
    assert bound.gpu_milli == 2000  # two T4s; the A100 pod fits nowhere
    assert bound.pods == 4  # 0.5 + 1 + 1 GPU pods' shares of 2000 milli -> 2.5, plus both CPU pods: floor(4.5)


def test_measure_reports_time_and_memory() -> None:
    for trace in (False, True):
        with measure(trace) as m:
            block = np.ones(4 << 20, dtype=np.int64)  # 32 MiB
            del block
        assert m.seconds > 0 and m.peak_mib >= (31 if trace else 0)


def test_saturation_sample() -> None:
    pods = [PodSpec("cpu", 100, 1), PodSpec("share", 100, 1, 1, 500), PodSpec("whole", 100, 1, 2, 1000)]
    sample = saturation_sample(pods, total_gpus=4, seed=5)
    requested = sum(p.gpu_total for p in sample)
    assert requested >= 1.3 * 4000
    assert len({p.name for p in sample}) == len(sample)
    order = [next(k for k, q in enumerate(pods) if p.name.startswith(q.name + "-s")) for p in sample]
    assert order == sorted(order)  # arrival (list) order
    assert [p.name for p in saturation_sample(pods, 4, seed=5)] == [p.name for p in sample]
    shuffled = saturation_sample(pods, total_gpus=4, seed=5, shuffle=True)
    assert {"cpu", "share", "whole"} <= {p.name.rsplit("-s", 1)[0] for p in shuffled}
    assert 1.3 * 4000 - 2000 < sum(p.gpu_total for p in shuffled) <= 1.3 * 4000
    with pytest.raises(ValueError, match="no pod requests GPUs"):
        saturation_sample([PodSpec("cpu", 1, 1)], 4, seed=1)


def test_validate_refuses_bad_placements_and_fills_devices() -> None:
    pods = [PodSpec("w0", 1000, 1, 1, 1000), PodSpec("s1", 1000, 1, 1, 500), PodSpec("w2", 1000, 1, 1, 1000),
            PodSpec("c3", 1000, 1)]
    plan = SimpleNamespace(placements=[
        Placement("openb", "w0", "a", gpus=(0,)),
        Placement("openb", "s1", "a", gpus=(0,)),  # device 0 is taken by w0
        Placement("openb", "w2", "a"),  # no devices from the plan: first fit -> 1
        Placement("openb", "c3", "b"),
        Placement("openb", "ghost", "b"),
    ])
    c = Cluster.build(TWO)
    v = validate(c, pods, plan)
    assert [(pods[j].name, p.node, p.gpus) for j, p in v.placed] == [
        ("w0", "a", (0,)), ("c3", "b", ()), ("w2", "a", (1,))]
    assert [(f["pod"], f["reason"]) for f in v.failures] == [
        ("s1", "device 0 has 0 milli free, the pod needs 500"), ("ghost", "unknown pod")]
    assert (v.devices_from_plan, v.devices_by_harness) == (2, 1)


def test_replay_shape() -> None:
    pods = [PodSpec(f"p{j}", 2000, 1024, *[(1, 1000), (1, 500), (0, 0), (2, 1000)][j % 4]) for j in range(8)]
    doc = replay(TWO, pods, seeds=[1, 2], window=4, time_limit=0.5)
    assert doc["input"]["seeds"] == [1, 2] and doc["input"]["window"] == 4
    assert list(doc["policies"]) == ["kubeplace", "default-scheduler", "best-fit", "fgd", "fgd-steered"]
    for figures in doc["policies"].values():
        assert 0 < figures["gpu_alloc_ratio"] <= 1
        assert len(figures["per_seed"]) == 2
    assert doc["policies"]["kubeplace"]["failures"] == 0
