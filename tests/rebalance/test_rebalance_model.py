"""The move-aware model: budgets (total, per node, per namespace, per PDB), objective, make-room
optimality proved by the exact backends against brute force, and the descheduler baselines."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from kubeplace.models.config import Profile, SolverSettings
from kubeplace.models.config_load import load_configuration
from kubeplace.models.framework import Objective
from kubeplace.rebalance.baselines import LowNodeUtilization, evict_from_emptiest, low_node_utilization
from kubeplace.rebalance.cluster_state import ClusterState, state_of
from kubeplace.rebalance.layout import Layout, build_layout
from kubeplace.rebalance.makeroom import make_room
from kubeplace.rebalance.model import Budgets, candidate_pairs
from kubeplace.rebalance.movable import Rules
from kubeplace.rebalance.solve_moves import Settings, rebalance
from kubeplace_bench.rebalance_clusters import defrag, node, pdb, pod

CONFIG = load_configuration(None)
PROFILE = CONFIG.profile(None)
FAST = SolverSettings(time_limit=5.0, workers=1, seed=0)


def hot_cluster(pods_per_ns: int = 4, namespaces: int = 2, extra: list[dict[str, Any]] | None = None) -> ClusterState:
    """Four 4-CPU nodes; every pod (500m each) on node a."""
    objects = [node(n, 4000, 16384) for n in ("a", "b", "c", "d")]
    for k in range(namespaces):
        objects += [pod(f"p{k}-{i}", f"ns{k}", 500, 256, node_name="a", labels={"app": f"app{k}"},
                        owner=("ReplicaSet", f"rs{k}")) for i in range(pods_per_ns)]
    return state_of([(o, "test") for o in objects + (extra or [])])


def layout_of(state: ClusterState, rules: Rules | None = None, profile: Profile = PROFILE) -> Layout:
    return build_layout(state, rules or Rules(), CONFIG, profile)


def moved_from(plan: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in plan.moves:
        out[m.source] = out.get(m.source, 0) + 1
    return out


def test_unbounded_rebalance_spreads_the_hot_node_and_improves_the_exact_objective() -> None:
    lay = layout_of(hot_cluster())
    plan = rebalance(lay, Settings(solver=FAST))
    assert plan.objective_after < plan.objective_before
    assert len(plan.moves) == 6  # 8 pods of 500m on 4 nodes: 2 stay on a, 2 go to each other node
    assert {m.source for m in plan.moves} == {"a"}
    assert sorted(m.target for m in plan.moves) == ["b", "b", "c", "c", "d", "d"]
    assert plan.objective_after == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("budgets, check", [
    (Budgets(max_moves=3), lambda plan: len(plan.moves) == 3),
    (Budgets(per_node=2), lambda plan: moved_from(plan).get("a", 0) == 2),
    (Budgets(per_namespace=1), lambda plan: sorted(m.namespace for m in plan.moves) == ["ns0", "ns1"]),
    (Budgets(max_moves=0), lambda plan: plan.moves == ()),
])  # fmt: skip
def test_budgets_are_respected(budgets: Budgets, check: Any) -> None:
    plan = rebalance(layout_of(hot_cluster()), Settings(budgets=budgets, solver=FAST))
    assert check(plan), plan.moves
    assert plan.objective_after <= plan.objective_before


def test_pdb_disruptions_allowed_are_budgets() -> None:
    state = hot_cluster(extra=[pdb("one", "ns0", "app0", 1), pdb("none", "ns1", "app1", 0)])
    plan = rebalance(layout_of(state), Settings(solver=FAST))
    assert [m.namespace for m in plan.moves] == ["ns0"]
    ignored = rebalance(layout_of(state), Settings(budgets=Budgets(pdbs=False), solver=FAST))
    assert len(ignored.moves) == 6


def test_excluded_pods_stay_and_are_reported() -> None:
    state = hot_cluster()
    plan = rebalance(layout_of(state, Rules(exclude_namespaces=frozenset({"ns1"}))), Settings(solver=FAST))
    assert {m.namespace for m in plan.moves} == {"ns0"}
    assert len([k for k, _ in plan.excluded if k.startswith("ns1/")]) == 4


def test_binpack_empties_nodes() -> None:
    objects = [node(n, 4000, 16384) for n in ("a", "b", "c")]
    objects += [pod(f"p{i}", "ns", 1000, 256, node_name=n, owner=("ReplicaSet", "rs"))
                for i, n in enumerate(["a", "b", "c", "a"])]
    lay = layout_of(state_of([(o, "t") for o in objects]), profile=replace(PROFILE, objective=Objective.BINPACK))
    plan = rebalance(lay, Settings(solver=FAST))
    assert plan.objective_before == 3 and plan.objective_after == 1
    assert len(plan.moves) == 2 and {m.target for m in plan.moves} == {"a"}


def with_host_port(manifest: dict[str, Any], port: int) -> dict[str, Any]:
    manifest["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return manifest


@pytest.mark.parametrize("objective", [Objective.BINPACK, Objective.BALANCE])
def test_two_pods_of_one_class_with_a_host_port_never_move_onto_one_node(objective: Objective) -> None:
    """Two replicas holding hostPort 8080, one on each node, and a filler on b: packing wants a
    empty, balance wants one replica on a beside its twin; the kube-scheduler refuses either
    (NodePorts). The greedy moves ignored the cap and were kept over the exact answer, whose
    model had no row for one class alone on a node."""
    objects = [node(n, 4000, 16384) for n in ("a", "b")]
    objects += [with_host_port(pod(f"web-{i}", "ns", 500, 256, node_name=n, owner=("ReplicaSet", "web")), 8080)
                for i, n in enumerate(["a", "b"])]
    objects.append(pod("filler", "ns", 2000, 256, node_name="b", owner=("ReplicaSet", "filler")))
    lay = layout_of(state_of([(o, "t") for o in objects]), profile=replace(PROFILE, objective=objective))
    plan = rebalance(lay, Settings(solver=FAST))
    assert [(m.name, m.target) for m in plan.moves if m.name.startswith("web")] == []


def _brute_force_moves(state: ClusterState, key: str, limit: int) -> int | None:
    """The fewest 1-GPU pods to move (each to some node with room) so that the job fits; GPUs
    counted as the kubelet counts them (whole devices, here as many as the node's allocatable)."""
    lay = build_layout(state, Rules(), CONFIG, PROFILE, [])
    p = lay.problem
    g = p.resource_index("nvidia.com/gpu")
    job_gpus = 4
    pods = [(k, pd) for k, pd in enumerate(lay.pods)]
    now = lay.free - lay.x0.T @ lay.demand
    free = {n: int(now[i, g]) for i, n in enumerate(p.node_names)}
    for count in range(limit + 1):
        for chosen in itertools.combinations(pods, count):
            room = dict(free)
            for _, pd in chosen:
                room[pd.node_name] += int(pd.requests["nvidia.com/gpu"])
            for host in room:
                if room[host] < job_gpus:
                    continue
                rest = dict(room)
                rest[host] -= job_gpus
                needs = sorted((int(pd.requests["nvidia.com/gpu"]) for _, pd in chosen), reverse=True)
                if _pack(needs, {n: v for n, v in rest.items() if n != host}):
                    return count
    return None


def _pack(needs: list[int], room: dict[str, int]) -> bool:
    if not needs:
        return True
    for n in room:
        if room[n] >= needs[0]:
            room[n] -= needs[0]
            if _pack(needs[1:], room):
                return True
            room[n] += needs[0]
    return False


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_make_room_is_minimal_proved_by_the_exact_backend(seed: int, backend: str) -> None:
    objects, key = defrag(seed, n_nodes=4)
    state = state_of([(o, "t") for o in objects])
    settings = Settings(solver=SolverSettings(backend, 5.0, workers=1), max_targets=100)
    room = make_room(state, key, Rules(), CONFIG, PROFILE, settings)
    assert room.fits and room.proven
    assert len(room.moves) == _brute_force_moves(state, key, 4)
    greedy = evict_from_emptiest(build_layout(state, Rules(), CONFIG, PROFILE, room_targets(state, key)))
    assert greedy is not None and greedy >= len(room.moves)


def room_targets(state: ClusterState, key: str) -> list[Any]:
    from kubeplace.rebalance.makeroom import target_pods

    return target_pods(state, key)


def test_make_room_within_a_too_small_budget_says_none() -> None:
    objects, key = defrag(1, n_nodes=6, members=2)
    state = state_of([(o, "t") for o in objects])
    room = make_room(state, key, Rules(), CONFIG, PROFILE, Settings(budgets=Budgets(max_moves=0), solver=FAST))
    assert not room.fits and room.message == "none within the budget"
    full = make_room(state, key, Rules(), CONFIG, PROFILE, Settings(solver=FAST))
    assert full.fits and len(full.placements) == 2 and len({n for _, n in full.placements}) == 2


def test_low_node_utilization_emulation_moves_from_hot_to_cold_nodes() -> None:
    lay = layout_of(hot_cluster())
    y, evictions = low_node_utilization(lay, LowNodeUtilization((20, 20, None), (50, 50, None)))
    assert evictions > 0
    assert lay.value(y) < lay.value(lay.x0)
    plan = rebalance(lay, Settings(budgets=Budgets(max_moves=evictions), solver=FAST))
    assert plan.objective_after <= lay.value(y) + 1e-9
    assert len(plan.moves) <= evictions


def test_a_pod_without_cpu_request_may_move_to_a_cpu_overcommitted_node() -> None:
    # b's CPU is overcommitted by a pod that stays (bare: nothing would recreate it); the pods
    # on a request memory only, which b has: the kubelet checks only what a pod requests
    objects = [node("a", 4000, 16384), node("b", 1000, 16384),
               pod("stuck", "sys", 2000, 256, node_name="b", owner=None)]
    objects += [pod(f"m{i}", "ns", 0, 4096, node_name="a") for i in range(3)]
    objects += [pod("c", "ns", 100, 64, node_name="a")]  # a movable pod requests CPU: CPU is modelled
    lay = layout_of(state_of([(o, "t") for o in objects]))
    memory_only = int(lay.pod_class[[p.name for p in lay.pods].index("m0")])
    cls, nodes = candidate_pairs(lay, 10)
    assert sorted(lay.problem.node_names[i] for i in nodes[cls == memory_only]) == ["a", "b"]
    for budgets in (Budgets(), Budgets(max_moves=1)):
        plan = rebalance(lay, Settings(budgets=budgets, solver=FAST))
        assert [m.target for m in plan.moves] == ["b"], budgets


def test_make_room_refuses_a_pod_with_inter_pod_rules() -> None:
    """plan models required pod (anti-)affinity and hard spread; the move model does not, so it
    does not make room for such a pod rather than plan moves that could break them."""
    from kubeplace.kube.errors import InputError

    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    objects = [node("n1", 4000, 8192), pod("busy", "apps", 3500, 1024, node_name="n1"),
               pod("web-0", "apps", 1000, 512, scheduler="kubeplace", labels={"app": "web"}, affinity=anti)]
    state = state_of([(o, "t") for o in objects])
    with pytest.raises(InputError, match="rules the move model does not model"):
        make_room(state, "apps/web-0", Rules(), CONFIG, PROFILE, Settings(solver=FAST))
