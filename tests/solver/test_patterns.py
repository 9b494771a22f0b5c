"""Column generation over node patterns: known optima with GPU shares, valid answers, bounds."""

from __future__ import annotations

import numpy as np
import pytest

from kubeplace.models import evaluate
from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.problem import Assignment, DeviceUse, Problem
from kubeplace.solver.budget import Budget
from kubeplace.solver.greedy import greedy
from kubeplace.solver.patterns import (
    Kinds,
    Master,
    _valid,
    device_slots,
    incumbent_patterns,
    kinds_of,
    pattern_placement,
)
from kubeplace.solver.pricing import Pattern, canonical
from kubeplace.solver.pricing_bound import node_bound
from kubeplace.solver.solve import solve
from tests.builders import NodeBuilder, PodBuilder, node, pod, snapshot_of

LIMIT = 3.0


def problem_of(*builders: NodeBuilder | PodBuilder) -> Problem:
    snap = snapshot_of(*builders)
    return aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem


def gpu_node(name: str, cpu: str, gpus: int) -> NodeBuilder:
    """A GPU node that also advertises the share resources (Koordinator's, as openb's do, and HAMi's)."""
    return (node(name).cpu(cpu).memory("32Gi").gpu(gpus).allocatable("koordinator.sh/gpu-core", 100 * gpus)
            .allocatable("koordinator.sh/gpu-memory-ratio", 100 * gpus).allocatable("nvidia.com/gpucores", 100 * gpus))


def share(name: str, percent: int, cpu: str = "1") -> PodBuilder:
    """A pod taking ``percent`` of one GPU (Koordinator convention)."""
    return (pod(name).cpu(cpu).memory("1Gi").request("koordinator.sh/gpu-core", str(percent))
            .request("koordinator.sh/gpu-memory-ratio", str(percent)))


def best_greedy(problem: Problem) -> Assignment:
    options = [greedy(problem, policy) for policy in ("best-fit", "spread")]
    return max(options, key=lambda a: evaluate.placed_weight(problem, a))


def exact_optimum(problem: Problem) -> int:
    report = solve(problem, (), SolverSettings(backend="cpsat", time_limit=10, workers=1))
    assert (report.bound is not None and report.placed_weight >= report.bound) or report.status == "optimal"
    return report.placed_weight


def test_share_pairs_fill_two_devices() -> None:
    p = problem_of(gpu_node("g", "8", 2),
                   share("a1", 60), share("a2", 60), share("b1", 40), share("b2", 40))
    result = pattern_placement(p, best_greedy(p), Budget.of(LIMIT))
    assert result.assignment is not None and _valid(p, result.assignment)
    assert evaluate.pods_placed(result.assignment) == 4
    assert result.proved_bound is not None and result.proved_bound >= 4 - 1e-6


def test_exact_fits_that_first_fit_decreasing_misses() -> None:
    """0.44 + 0.36 + 0.2 twice fills two GPUs; best-fit decreasing strands a 0.2."""
    pods = [share(f"{n}{i}", pc) for n, pc in (("a", 44), ("b", 36), ("c", 20)) for i in (1, 2)]
    p = problem_of(gpu_node("g", "16", 2), *pods)
    incumbent = greedy(p, "best-fit")
    assert evaluate.pods_placed(incumbent) == 5
    result = pattern_placement(p, incumbent, Budget.of(LIMIT))
    assert result.assignment is not None and _valid(p, result.assignment)
    assert evaluate.pods_placed(result.assignment) == 6
    assert result.proved_bound is not None and result.proved_bound >= 6 - 1e-6


def mixed_cluster() -> Problem:
    """Whole GPUs, multi-device shares (HAMi), shares, CPU pods, CPU as a binding resource."""
    hami = (pod("m").cpu("2").request("nvidia.com/gpu", "2").limit("nvidia.com/gpu", "2")
            .request("nvidia.com/gpucores", "30"))
    return problem_of(
        gpu_node("g4", "10", 4), gpu_node("g2", "6", 2), gpu_node("g2b", "6", 2), node("c").cpu("4").memory("8Gi"),
        pod("w1").cpu("3").gpu(2), pod("w2").cpu("3").gpu(2), pod("w3").cpu("1").gpu(1),
        share("s1", 70, "2"), share("s2", 70, "2"), share("s3", 30, "2"), share("s4", 50, "1"),
        share("s5", 50, "3"), hami, pod("cpu1").cpu("2"), pod("cpu2").cpu("3"),
    )


def test_matches_the_exact_optimum_on_a_mixed_cluster() -> None:
    p = mixed_cluster()
    optimum = exact_optimum(p)
    result = pattern_placement(p, best_greedy(p), Budget.of(LIMIT))
    assert result.assignment is not None and _valid(p, result.assignment)
    assert evaluate.placed_weight(p, result.assignment) == optimum
    assert result.proved_bound is not None and result.proved_bound >= optimum - 1e-6


def test_never_worse_than_the_incumbent() -> None:
    p = mixed_cluster()
    incumbent = best_greedy(p)
    result = pattern_placement(p, incumbent, Budget.of(LIMIT))
    assert result.assignment is not None
    assert evaluate.placed_weight(p, result.assignment) >= evaluate.placed_weight(p, incumbent)


def test_checker_rejects_overfull_devices() -> None:
    p = problem_of(gpu_node("g", "8", 2), share("a1", 60), share("a2", 60))
    one = np.array([0]), np.array([0]), np.array([2])

    def on(*devices: int) -> Assignment:
        k = len(devices)
        return Assignment(*one, DeviceUse(np.zeros(k, np.int64), np.zeros(k, np.int64), np.array(devices),
                                          np.full(k, 2 // k)))

    assert _valid(p, on(0, 1))
    assert not _valid(p, on(0))  # 1.2 GPUs on device 0


def test_host_ports_are_out_of_scope() -> None:
    p = problem_of(node("n").cpu("4"), pod("a").cpu("1").host_port(80), pod("b").cpu("1").host_port(80))
    assert p.group_caps
    assert pattern_placement(p, greedy(p), Budget.of(LIMIT)).assignment is None


@pytest.mark.parametrize("seed", range(4))
def test_node_bound_is_above_every_node(seed: int) -> None:
    """The Lagrangian node bound is above the best single node, for random profits."""
    p = mixed_cluster()
    rng = np.random.default_rng(seed)
    profit = p.weight * rng.uniform(0.1, 1.0, p.n_classes)
    for i in range(p.n_nodes):
        classes = np.nonzero(p.eligible[:, i])[0]
        single = p.eligible & (np.arange(p.n_nodes) == i)[None, :]
        alone = Problem(p.resources, p.node_names, p.capacity, p.used, p.demand, p.count,
                        np.maximum(1, np.round(profit * 1000)).astype(np.int64), single, p.members,
                        gpu_count=p.gpu_count, gpu_milli=p.gpu_milli, device_free=p.device_free)
        best = exact_optimum(alone) / 1000
        devices = p.device_free[i][p.device_free[i] >= 0]
        assert node_bound(p, p.free[i], devices, classes, alone.weight / 1000, 0.0) >= best - 1e-6


def test_the_master_lp_gets_the_time_left() -> None:
    # HiGHS has no limit unless told; a degenerate master LP once ran 18.6 s past the
    # column generation's deadline on openb gpuspec33
    p = mixed_cluster()
    kinds = kinds_of(p)
    master = Master(p, kinds)
    for k, pattern in incumbent_patterns(p, kinds, best_greedy(p)):
        master.add(k, pattern)
    assert master.solve(2.5) is not None
    assert master.h.option("time_limit") == 2.5


def test_the_master_costs_are_scaled_to_about_one() -> None:
    p = mixed_cluster()
    master = Master(p, kinds_of(p))
    scale = master.h.option("user_objective_scale")
    assert 0.05 <= float(p.weight.max()) * 2.0 ** scale <= 0.1


def _patterns_node_by_node(p: Problem, kinds: Kinds, a: Assignment) -> list[tuple[int, Pattern]]:
    """Each node's pattern read plainly, node by node (what ``incumbent_patterns`` reads at once)."""
    d, out = a.devices, []
    for i in range(p.n_nodes):
        on = a.node == i
        cls, n = a.cls[on], a.counts[on]
        order = np.argsort(cls)
        cls, n = cls[order], n[order]
        slot_of = {int(dev): s for s, dev in enumerate(device_slots(p, i))}
        slots = np.zeros((len(cls), len(slot_of)), dtype=np.int64)
        pos = {int(c): j for j, c in enumerate(cls)}
        for c, dev, k in zip(d.cls[d.node == i].tolist(), d.device[d.node == i].tolist(),
                             d.counts[d.node == i].tolist(), strict=True):
            slots[pos[c], slot_of[dev]] += k
        k = int(kinds.of_node[i])
        out.append((k, canonical(Pattern(cls, n, slots), kinds.shapes[k].devices, p.gpu_milli)))
    return out


def test_incumbent_patterns_are_each_nodes_contents_whatever_the_pairs_order() -> None:
    p = mixed_cluster()
    kinds = kinds_of(p)
    a = best_greedy(p)
    rng = np.random.default_rng(5)
    shuffled = rng.permutation(len(a.cls))
    d = a.devices
    devices = rng.permutation(len(d.cls))
    mixed = Assignment(a.cls[shuffled], a.node[shuffled], a.counts[shuffled],
                       DeviceUse(d.cls[devices], d.node[devices], d.device[devices], d.counts[devices]))
    assert len(d.cls) and len(set(a.node.tolist())) > 1
    for found, plain in zip(incumbent_patterns(p, kinds, mixed), _patterns_node_by_node(p, kinds, a), strict=True):
        assert found[0] == plain[0] and found[1].key() == plain[1].key()
