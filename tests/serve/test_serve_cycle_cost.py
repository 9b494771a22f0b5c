"""What keeps a serve cycle's cost down at cluster scale gives the same plan as the plain path.

A cycle at 5,000 nodes spends its time on work proportional to the cluster: per running pod
(its gang, its shape, its usage), per node, and the verifier's replay. The per-object work is
remembered across cycles (``kube.memo``: keyed by the typed object the informer store keeps);
the preemption scan, the replay and the running pods' inter-pod and gang summaries are skipped
where they provably find nothing. These tests compare each with the computation it replaces: a
warm memo with a cold one and with fresh copies of every object, on random clusters, and each
serve cycle's plan with the plan made from scratch."""

from __future__ import annotations

import copy
import gc
from dataclasses import fields, replace
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.kube import memo
from kubeplace.kube.gangs import gang_of
from kubeplace.kube.objects import CPU, MEMORY, PODS, Node, Pod, Snapshot
from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, Profile, SolverSettings, instantiate
from kubeplace.models.preemption import candidates, powers
from kubeplace.models.problem import FULL, Problem
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.plan import Placement
from kubeplace.plan.preemption_plan import make_preemption_plan
from kubeplace.plan.verify import replay_plan
from kubeplace.serve.settings import cycle_options
from tests.builders import PodBuilder, node, pod, snapshot_of
from tests.serve.test_serve_loop import member, scheduler

EXAMPLES = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SOLVER = SolverSettings(time_limit=5, workers=1, seed=0)
ZONES = ("a", "b", "c")


def anti_affinity(app: str, preferred: bool = False) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "zone"}
    if preferred:
        return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "podAffinityTerm": term}]}}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


@st.composite
def pods(draw: st.DrawFn, name: str, nodes: list[str], bound: bool) -> PodBuilder:
    gang = draw(st.sampled_from((None, "g1", "g2")))
    b = (member(name, gang, draw(st.integers(1, 3)), cpu=draw(st.sampled_from(("500m", "1", "2"))))
         if gang else pod(name).cpu(draw(st.sampled_from(("250m", "1", "2")))).memory("1Gi"))
    b = b.label("app", draw(st.sampled_from(("web", "db")))).priority(draw(st.sampled_from((0, 0, 100))))
    rule = draw(st.sampled_from((None, None, None, "anti", "preferred")))
    if rule is not None:
        b = b.spec("affinity", anti_affinity(draw(st.sampled_from(("web", "db"))), rule == "preferred"))
    if draw(st.sampled_from((False, False, False, True))) and not bound:
        b = b.spec("topologySpreadConstraints", [{"maxSkew": 1, "topologyKey": "zone",
                                                  "whenUnsatisfiable": "DoNotSchedule",
                                                  "labelSelector": {"matchLabels": {"app": "web"}}}])
    if bound:
        b = b.on(draw(st.sampled_from(nodes)))
    return b


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    names = [f"n{i}" for i in range(draw(st.integers(1, 5)))]
    nodes = [node(n).cpu(draw(st.sampled_from(("2", "4")))).memory("8Gi").label("zone", draw(st.sampled_from(ZONES)))
             for n in names]
    bound = [draw(pods(f"r{i}", names, True)) for i in range(draw(st.integers(0, 6)))]
    pending = [draw(pods(f"p{i}", names, False)) for i in range(draw(st.integers(1, 6)))]
    return snapshot_of(*nodes, *bound, *pending)


def fresh(snapshot: Snapshot) -> Snapshot:
    """The same snapshot made of new objects (nothing a memo has seen)."""
    return copy.deepcopy(snapshot)


def same_problem(a: Problem, b: Problem) -> None:
    for f in fields(Problem):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert x is not None and y is not None and np.array_equal(x, y), f.name
        elif f.name == "workload" and (x is None or y is None):
            assert x is y, f.name
        elif f.name == "workload":
            for g in fields(x):
                assert np.array_equal(getattr(x, g.name), getattr(y, g.name)), g.name
        else:
            assert repr(x) == repr(y), f.name


def plan_of(snapshot: Snapshot) -> tuple[Any, ...]:
    planned = make_preemption_plan(snapshot, Configuration(), Profile(), SOLVER)
    plan = planned.plan
    return (plan.placements, plan.unplaced, plan.preemptions, planned.violations)


@EXAMPLES
@given(clusters())
def test_a_warm_memo_aggregates_and_plans_as_a_cold_one_and_as_fresh_objects(snapshot: Snapshot) -> None:
    memo.clear_all()
    plugins = instantiate(Configuration(), Profile(), snapshot)
    cold = aggregate(snapshot, plugins)
    assert any(len(m) for m in memo.MEMOS) or not snapshot.bound
    warm = aggregate(snapshot, plugins)  # every running pod's shape remembered
    copied = fresh(snapshot)
    same_problem(cold.problem, warm.problem)
    same_problem(cold.problem, aggregate(copied, instantiate(Configuration(), Profile(), copied)).problem)
    warm_plan = plan_of(snapshot)
    memo.clear_all()
    assert warm_plan == plan_of(fresh(snapshot))


@EXAMPLES
@given(clusters())
def test_the_victim_scan_is_skipped_only_where_it_finds_nobody(snapshot: Snapshot) -> None:
    power = powers(snapshot, Configuration().gpu)
    # a running pod of the lowest priority on no node of the snapshot: the scan runs, and skips it
    sentinel = Pod("default", "sentinel", "uid-sentinel", node_name="nowhere", priority=-(1 << 31))
    scanned = candidates(replace(snapshot, bound=(*snapshot.bound, sentinel)), power, Configuration().gpu)
    assert candidates(snapshot, power, Configuration().gpu) == scanned


@EXAMPLES
@given(clusters())
def test_without_domain_rules_the_replay_finds_nothing(snapshot: Snapshot) -> None:
    """The verifier skips the replay when no pending pod has a hard spread or a pod (anti-)affinity
    term and no running pod an anti-affinity term: then no placement fails it, wherever it goes."""
    plain = replace(snapshot, pending=tuple(replace(p, affinity=(), anti_affinity=(), spread=())
                                            for p in snapshot.pending),
                    bound=tuple(replace(p, anti_affinity=()) for p in snapshot.bound))
    nodes = [n.name for n in plain.nodes]
    placements = [(p.namespace, p.name, nodes[k % len(nodes)]) for k, p in enumerate(plain.pending)]
    assert replay_plan(plain, placements).violations == ()


@EXAMPLES
@given(clusters(), st.randoms(use_true_random=False))
def test_the_verifier_reports_every_replay_violation(snapshot: Snapshot, rng: Any) -> None:
    nodes = [n.name for n in snapshot.nodes]
    placements = [Placement(p.namespace, p.name, rng.choice(nodes), p.uid) for p in snapshot.pending]
    found = {(v.namespace, v.name, v.rule) for v in verify_plan(snapshot, placements, Configuration(), Profile())}
    replayed = replay_plan(snapshot, [(p.namespace, p.name, p.node) for p in placements]).violations
    assert {(v.namespace, v.name, v.rule) for v in replayed} <= found


def test_a_running_pods_anti_affinity_alone_is_still_replayed() -> None:
    snapshot = snapshot_of(node("a1").cpu("4").memory("8Gi").label("zone", "a"),
                           node("a2").cpu("4").memory("8Gi").label("zone", "a"),
                           pod("running").cpu("1").label("app", "db").spec("affinity", anti_affinity("web")).on("a1"),
                           pod("web").cpu("1").label("app", "web"))
    found = verify_plan(snapshot, [Placement("default", "web", "a2", "uid-default-web")], Configuration(), Profile())
    assert [v.rule for v in found] == ["InterPodAffinity"]


def test_usage_beyond_int64_saturates() -> None:
    huge = [Pod("default", f"r{i}", f"u{i}", node_name="a", requests={MEMORY: 1 << 62, CPU: 100}) for i in range(2)]
    nodes = (Node("a", allocatable={CPU: 4000, MEMORY: 1 << 34, PODS: 110}),
             Node("b", allocatable={CPU: 4000, MEMORY: 1 << 34, PODS: 110}))
    pending = (Pod("default", "p", "u", requests={MEMORY: 1 << 30, CPU: 100}),)
    snapshot = Snapshot(nodes=nodes, pending=pending, bound=tuple(huge))
    problem = aggregate(snapshot, instantiate(Configuration(), Profile(), snapshot)).problem
    memory = problem.resources.index(MEMORY)
    assert problem.used[0, memory] == FULL and problem.used[1, memory] == 0
    assert problem.used[0, problem.resources.index(CPU)] == 200


def test_gang_of_is_remembered_per_object_not_per_equal_object() -> None:
    a = pod("a").label("kubeplace.io/gang", "g").build()
    b = replace(a, labels={})  # a new object: computed again
    assert gang_of(a) is not None and gang_of(b) is None and gang_of(a) == gang_of(a)
    calls = []

    def size(obj: Sized, k: int) -> int:
        calls.append(obj)
        return obj.n * k

    sizes = memo.IdentityMemo(size)
    x, y = Sized(1), Sized(2)
    assert (sizes(x, 2), sizes(y, 2), sizes(x, 3), sizes(x, 2)) == (2, 4, 3, 2) and len(calls) == 3
    assert sizes(Sized(1), 2) == 2 and len(calls) == 4  # an equal object is another object
    calls.clear()
    del x, y
    gc.collect()
    assert len(sizes) == 0  # an entry lives as long as its object
    lengths: memo.IdentityMemo[list[int], int] = memo.IdentityMemo(len)
    assert lengths([1, 2]) == 2 and len(lengths) == 0  # not weakly referable: computed, not remembered


def test_an_object_that_lives_long_keeps_a_few_argument_tuples_only() -> None:
    """A running pod is the same object for weeks, and the resources of each batch (an argument
    of its requests row) change with the batch: one value per batch it ever met grew for ever."""
    rows = memo.IdentityMemo(lambda obj, names: (obj.n, names))
    x = Sized(1)
    for batch in range(1000):
        names = ("cpu", "memory", f"example.com/r{batch}")
        assert rows(x, names) == (1, names)
    assert len(rows) == memo.VARIANTS
    assert rows(x, ("cpu", "memory", "example.com/r999")) == (1, ("cpu", "memory", "example.com/r999"))
    del x
    gc.collect()
    assert len(rows) == 0


class Sized:
    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sized) and other.n == self.n

    __hash__ = None  # type: ignore[assignment]


def test_each_serve_cycle_plans_as_a_plan_from_scratch() -> None:
    """Gangs arriving cycle after cycle on a cluster that fills: each cycle's placements are
    those of a plan made from a fresh copy of its snapshot with every memo forgotten."""
    nodes = [node(f"n{i}").cpu("4").memory("16Gi").label("zone", ZONES[i % 3]) for i in range(6)]
    s, cluster = scheduler(*nodes)
    for wave in range(4):
        for g in range(2):
            gang = f"w{wave}g{g}"
            for k in range(3):
                m = member(f"{gang}-{k}", gang, 3, cpu=("1", "2")[(wave + k) % 2]).label("app", "web")
                if g == 1:
                    m = m.spec("affinity", anti_affinity("db", preferred=True))
                s.store.apply("pods", "ADDED", m.manifest())
                s.on_change("pods", "ADDED", None, m.manifest())
        units = s.queue.pop_batch(window=0, size=1000, timeout=0)
        decided = s._plan_cycle(units)
        snapshot = decided.snapshot
        memo.clear_all()
        options = cycle_options(s.solver, s.settings, len(snapshot.pending))
        scratch = make_preemption_plan(fresh(snapshot), s.config, s.profile, options, preemption=s.solver).plan
        planned = sorted((p.namespace, p.name, p.node) for ps in decided.by_unit.values() for p in ps)
        assert planned == sorted((p.namespace, p.name, p.node) for p in scratch.placements), wave
        s._finish(decided, s.stop_event)
        for key, node_name, _ in cluster.bindings[-len(planned):]:  # the watch shows them bound
            raw = s.store.get("pods", key)
            assert raw is not None
            bound_raw = {**raw, "spec": {**raw["spec"], "nodeName": node_name}}
            s.store.apply("pods", "MODIFIED", bound_raw)
            s.on_change("pods", "MODIFIED", raw, bound_raw)
    assert len(cluster.bindings) == len({b[0] for b in cluster.bindings}) > 12
