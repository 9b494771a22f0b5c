"""Each preemption rule on a small cluster, on every backend: who may preempt, who may be a
victim, the order victims are chosen in, and one decision for the whole batch.

Every plan goes through the independent verifier (``plan.verify_preempt`` beside the placement
verifier); a test asserts the placements and the victims the rule implies.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.gangs import PLAIN_LABEL, PLAIN_MIN_MEMBER
from kubeplace.kube.objects import MIRROR_ANNOTATION, Snapshot
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.plan.plan import Plan
from kubeplace.plan.preemption_plan import make_preemption_plan
from tests.builders import PodBuilder, node, pod, snapshot_of
from tests.scenarios import usable_backends

BACKENDS = usable_backends()


def plan_of(snapshot: Snapshot, backend: str) -> Plan:
    config = Configuration()
    planned = make_preemption_plan(snapshot, config, config.profiles[0],
                                   SolverSettings(backend=backend, time_limit=10, workers=1, seed=0))
    assert planned.violations == (), planned.violations
    assert planned.plan.summary.verified
    preemption = planned.plan.summary.preemption
    assert preemption is not None and preemption.status == "optimal", preemption
    return planned.plan


def outcome(plan: Plan) -> tuple[dict[str, str], set[str]]:
    """{pending pod: node} and the names of the victims."""
    return {p.name: p.node for p in plan.placements}, {v.name for v in plan.preemptions}


def running(name: str, node_name: str, cpu: int, priority: int) -> PodBuilder:
    return pod(name).cpu(cpu).priority(priority).on(node_name).owner("ReplicaSet", "rs")


def gang_member(b: PodBuilder, gang: str, min_member: int = 1) -> PodBuilder:
    return b.label(PLAIN_LABEL, gang).annotation(PLAIN_MIN_MEMBER, str(min_member))


def pdb(app: str, allowed: int) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": app, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}}, "status": {"disruptionsAllowed": allowed}}


FULL = (node("n1").cpu(4), running("low", "n1", 4, 1))
"""One full node whose only pod (priority 1) any higher pod may preempt."""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_higher_priority_pod_preempts_a_lower_one(backend: str) -> None:
    plan = plan_of(snapshot_of(*FULL, pod("high").cpu(4).priority(10)), backend)
    assert outcome(plan) == ({"high": "n1"}, {"low"})
    (victim,) = plan.preemptions
    assert (victim.node, victim.priority, victim.for_pods) == ("n1", 1, ("default/high",))


@pytest.mark.parametrize("backend", BACKENDS)
def test_equal_priority_is_never_preempted(backend: str) -> None:
    plan = plan_of(snapshot_of(*FULL, pod("same").cpu(4).priority(1)), backend)
    assert outcome(plan) == ({}, set())


@pytest.mark.parametrize("backend", BACKENDS)
def test_preemption_policy_never_on_the_pod(backend: str) -> None:
    plan = plan_of(snapshot_of(*FULL, pod("high").cpu(4).priority(10).spec("preemptionPolicy", "Never")), backend)
    assert outcome(plan) == ({}, set())
    assert "preemption: not eligible due to preemptionPolicy=Never." in plan.unplaced[0].reasons


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pod_that_may_not_preempt_sees_the_room_freed_for_another_as_taken(backend: str) -> None:
    """low goes for a; the cpu it frees beyond a's is not b's (Never): b is told it does not fit,
    as the kube-scheduler would tell it, not that the plan had room and left it out."""
    plan = plan_of(snapshot_of(node("n1").cpu(2), running("low", "n1", 2, 0), pod("a").cpu(1).priority(10),
                               pod("b").cpu(1).priority(10).spec("preemptionPolicy", "Never")), backend)
    assert outcome(plan) == ({"a": "n1"}, {"low"})
    (b,) = plan.unplaced
    assert b.reasons == ("0/1 nodes are available: 1 Insufficient cpu.",
                         "preemption: not eligible due to preemptionPolicy=Never.")


@pytest.mark.parametrize("backend", BACKENDS)
def test_preemption_policy_never_from_the_priority_class(backend: str) -> None:
    klass = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch"},
             "value": 10, "preemptionPolicy": "Never"}
    plan = plan_of(snapshot_of(*FULL, klass, pod("high").cpu(4).spec("priorityClassName", "batch")), backend)
    assert outcome(plan) == ({}, set())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gang_with_a_never_member_does_not_preempt(backend: str) -> None:
    """g1 (Never) fits on the free n2, g0 only where low runs: the gang preempts as one, so not."""
    members = [gang_member(pod("g0").cpu(4).priority(10), "g", 2),
               gang_member(pod("g1").cpu(2).priority(10), "g", 2).spec("preemptionPolicy", "Never")]
    plan = plan_of(snapshot_of(*FULL, node("n2").cpu(2), *members), backend)
    assert outcome(plan) == ({}, set())
    assert any("a member of its gang has preemptionPolicy=Never" in r for u in plan.unplaced for r in u.reasons)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["mirror", "static", "daemonset", "terminating"])
def test_pods_that_are_never_victims(backend: str, kind: str) -> None:
    victim = pod("low").cpu(4).priority(1).on("n1")  # builders change in place: one mark per case
    if kind == "mirror":
        victim.annotation(MIRROR_ANNOTATION, "x")
    elif kind == "static":
        victim.annotation("kubernetes.io/config.source", "file")
    elif kind == "daemonset":
        victim.owner("DaemonSet", "ds")
    else:
        victim.owner("ReplicaSet", "rs").deleting()
    plan = plan_of(snapshot_of(node("n1").cpu(4), victim, pod("high").cpu(4).priority(10)), backend)
    assert outcome(plan) == ({}, set())


@pytest.mark.parametrize("backend", BACKENDS)
def test_system_critical_pods_only_for_a_more_critical_one(backend: str) -> None:
    """A pod of system-critical priority is only evicted for a more critical pod (implied by the
    strict priority rule for pods whose priority says so)."""
    critical = running("dns", "n1", 4, 2_000_000_000)
    plan = plan_of(snapshot_of(node("n1").cpu(4), critical, pod("high").cpu(4).priority(1_000_000)), backend)
    assert outcome(plan) == ({}, set())
    plan = plan_of(snapshot_of(node("n1").cpu(4), critical, pod("node").cpu(4).priority(2_000_001_000)), backend)
    assert outcome(plan) == ({"node": "n1"}, {"dns"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_running_gang_is_evicted_whole(backend: str) -> None:
    """Room on n1 needs only the member there, but its mate on n2 goes with it."""
    snapshot = snapshot_of(node("n1").cpu(4), node("n2").cpu(4),
                           gang_member(running("a", "n1", 4, 1), "job"), gang_member(running("b", "n2", 1, 1), "job"),
                           pod("high").cpu(4).priority(10))
    plan = plan_of(snapshot, backend)
    assert outcome(plan) == ({"high": "n1"}, {"a", "b"})
    assert {v.name: v.for_pods for v in plan.preemptions} == {"a": ("default/high",), "b": ("default/high",)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_lowest_highest_victim_priority_first(backend: str) -> None:
    """n1 frees room by evicting one pod of priority 5, n2 by evicting two of priority 1."""
    snapshot = snapshot_of(node("n1").cpu(4), node("n2").cpu(4), running("mid", "n1", 4, 5),
                           running("l1", "n2", 2, 1), running("l2", "n2", 2, 1), pod("high").cpu(4).priority(10))
    assert outcome(plan_of(snapshot, backend)) == ({"high": "n2"}, {"l1", "l2"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pdb_protected_pod_is_kept_while_an_unprotected_one_will_do(backend: str) -> None:
    snapshot = snapshot_of(node("n1").cpu(4), node("n2").cpu(4), running("guarded", "n1", 4, 1).label("app", "db"),
                           running("free", "n2", 4, 1), pdb("db", 0), pod("high").cpu(4).priority(10))
    assert outcome(plan_of(snapshot, backend)) == ({"high": "n2"}, {"free"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_pdb_violations_come_after_the_highest_priority(backend: str) -> None:
    """The budget is broken rather than evicting a pod of higher priority."""
    snapshot = snapshot_of(node("n1").cpu(4), node("n2").cpu(4), running("guarded", "n1", 4, 1).label("app", "db"),
                           running("mid", "n2", 4, 5), pdb("db", 0), pod("high").cpu(4).priority(10))
    plan = plan_of(snapshot, backend)
    assert outcome(plan) == ({"high": "n1"}, {"guarded"})
    assert plan.summary.preemption is not None and plan.summary.preemption.pdb_violations == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_fewest_victims_at_the_same_highest_priority(backend: str) -> None:
    snapshot = snapshot_of(node("n1").cpu(4), node("n2").cpu(4), running("a1", "n1", 2, 1), running("a2", "n1", 2, 1),
                           running("b", "n2", 4, 1), pod("high").cpu(4).priority(10))
    assert outcome(plan_of(snapshot, backend)) == ({"high": "n2"}, {"b"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_higher_priority_victim_weighs_more(backend: str) -> None:
    """Two victims of priority 1 and 5 (cost 1 + 2) rather than two of priority 5 (2 + 2)."""
    snapshot = snapshot_of(node("n1").cpu(4), node("n2").cpu(4), running("a1", "n1", 2, 5), running("a2", "n1", 2, 5),
                           running("b1", "n2", 2, 5), running("b2", "n2", 2, 1), pod("high").cpu(4).priority(10))
    assert outcome(plan_of(snapshot, backend)) == ({"high": "n2"}, {"b1", "b2"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_eviction_for_a_gang_that_still_cannot_run(backend: str) -> None:
    """Three members of 4 CPU need three nodes; only two can be freed: nobody is evicted."""
    snapshot = snapshot_of(node("n1").cpu(4), node("n2").cpu(4), node("n3").cpu(4),
                           running("l1", "n1", 4, 1), running("l2", "n2", 4, 1), running("keep", "n3", 4, 50),
                           *(gang_member(pod(f"g{k}").cpu(4).priority(10), "train", 3) for k in range(3)))
    plan = plan_of(snapshot, backend)
    assert outcome(plan) == ({}, set())


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_preemptors_never_count_on_the_same_freed_room(backend: str) -> None:
    snapshot = snapshot_of(*FULL, pod("h1").cpu(3).priority(10), pod("h2").cpu(3).priority(9))
    assert outcome(plan_of(snapshot, backend)) == ({"h1": "n1"}, {"low"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pod_that_may_not_preempt_never_uses_freed_room(backend: str) -> None:
    """After evicting low for high (2 CPU), 2 CPU are left: the Never pod may not take them."""
    snapshot = snapshot_of(*FULL, pod("high").cpu(2).priority(10),
                           pod("never").cpu(2).priority(20).spec("preemptionPolicy", "Never"))
    assert outcome(plan_of(snapshot, backend)) == ({"high": "n1"}, {"low"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_pod_counts_on_room_freed_by_a_victim_above_it(backend: str) -> None:
    """high (10) evicts mid (5); small (3) may evict low (1) but not count on mid's room."""
    snapshot = snapshot_of(node("n1").cpu(4), running("mid", "n1", 2, 5), running("low", "n1", 2, 1),
                           pod("high").cpu(2).priority(10), pod("small").cpu(2).priority(3))
    plan = plan_of(snapshot, backend)
    assert outcome(plan) == ({"high": "n1"}, {"low"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_eviction_to_place_a_pod_of_the_victims_priority_elsewhere(backend: str) -> None:
    """Moving high onto n1 (evicting low) would free n2 for same (priority 1, like low): it does
    not, a pod is never placed at the cost of evicting one of its own priority."""
    snapshot = snapshot_of(node("n1").cpu(2), node("n2").cpu(2), running("low", "n1", 1, 1),
                           pod("high").cpu(2).priority(10), pod("same").cpu(2).priority(1))
    assert outcome(plan_of(snapshot, backend)) == ({"high": "n2"}, set())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nominated_pod_waits_for_its_terminating_victims(backend: str) -> None:
    waiting = pod("high").cpu(4).priority(10).spec("schedulerName", "kubeplace")
    manifest = waiting.manifest()
    manifest["status"]["nominatedNodeName"] = "n1"
    snapshot = snapshot_of(node("n1").cpu(4), node("n2").cpu(4), running("old", "n1", 4, 1).deleting(),
                           running("other", "n2", 4, 1), manifest)
    plan = plan_of(snapshot, backend)
    assert outcome(plan) == ({}, set())
    assert "preemption: not eligible due to a terminating pod on the nominated node." in plan.unplaced[0].reasons


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_victims_on_a_node_its_pods_overcommit(backend: str) -> None:
    snapshot = snapshot_of(node("n1").cpu(4), running("a", "n1", 3, 1), running("b", "n1", 3, 1),
                           pod("high").cpu(4).priority(10))
    assert outcome(plan_of(snapshot, backend)) == ({}, set())


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_gpus_freed_by_victims_go_to_the_preemptor(backend: str) -> None:
    snapshot = snapshot_of(node("g1").cpu(8).gpu(4), running("t1", "g1", 1, 1).gpu(2),
                           running("t2", "g1", 1, 1).gpu(2), pod("big").cpu(1).gpu(4).priority(10))
    plan = plan_of(snapshot, backend)
    assert outcome(plan) == ({"big": "g1"}, {"t1", "t2"})
    assert plan.placements[0].gpus == (0, 1, 2, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gang_preemptor_is_placed_whole_with_its_victims(backend: str) -> None:
    snapshot = snapshot_of(node("n1").cpu(4), node("n2").cpu(4), running("l1", "n1", 4, 1), running("l2", "n2", 4, 1),
                           *(gang_member(pod(f"g{k}").cpu(4).priority(10), "train", 2) for k in range(2)))
    plan = plan_of(snapshot, backend)
    where, victims = outcome(plan)
    assert sorted(where.values()) == ["n1", "n2"] and victims == {"l1", "l2"}


def test_the_preemption_problem_is_built_only_when_someone_may_be_evicted(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubeplace.plan import preemption_plan

    built: list[int] = []
    real = preemption_plan.preemption_problem
    monkeypatch.setattr(preemption_plan, "preemption_problem", lambda *args: built.append(1) or real(*args))
    same = plan_of(snapshot_of(*FULL, pod("equal").cpu(4).priority(1)), "cpsat")  # nobody below it
    assert [u.name for u in same.unplaced] == ["equal"] and built == []
    assert same.summary.preemption is not None and same.summary.preemption.attempts == 1
    never = plan_of(snapshot_of(*FULL, pod("never").cpu(4).priority(10).spec("preemptionPolicy", "Never")),
                    "cpsat")
    assert built == [] and "preemption: not eligible due to preemptionPolicy=Never." in never.unplaced[0].reasons
    assert outcome(plan_of(snapshot_of(*FULL, pod("high").cpu(4).priority(10)), "cpsat")) == ({"high": "n1"}, {"low"})
    assert built == [1]


ZONE = "topology.kubernetes.io/zone"


def zone_anti_affinity(app: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": ZONE}]}}


@pytest.mark.parametrize("backend", BACKENDS)
def test_preemptors_kept_apart_by_zone_take_one_victims_node_per_zone(backend: str) -> None:
    """Four full nodes in two zones; three preemptors that avoid each other's zone (a cap per
    domain, which the preemption problem's classes must keep: it was read per node, a traceback)."""
    nodes = [node(f"n{i}").cpu(4).label(ZONE, "ab"[i % 2]) for i in range(4)]
    low = [running(f"low{i}", f"n{i}", 4, 1) for i in range(4)]
    cache = [pod(f"c{k}").cpu(3).priority(10).label("app", "cache").spec("affinity", zone_anti_affinity("cache"))
             for k in range(3)]
    where, victims = outcome(plan_of(snapshot_of(*nodes, *low, *cache), backend))
    assert len(where) == 2 and {int(n[1]) % 2 for n in where.values()} == {0, 1}
    assert victims == {f"low{n[1]}" for n in where.values()}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_preemptor_does_not_count_on_evicting_one_of_a_split_class_in_its_zone(backend: str) -> None:
    """b0 and b2 (one class, on two nodes of zone a) are split into a class per node as victims:
    the preemptor's anti-affinity must follow both. Evicting b0 alone leaves b2 in zone a, so
    nothing goes there (the kube-scheduler evicts on one node only); zone b has no room."""
    nodes = [node(f"n{i}").cpu(4 if i % 2 == 0 else 1).label(ZONE, "ab"[i % 2]) for i in range(4)]
    running_pods = [running("b0", "n0", 2, 1).label("app", "b"), running("b2", "n2", 2, 1).label("app", "b"),
                    running("x1", "n1", 1, 1), running("x3", "n3", 1, 1),
                    running("y0", "n0", 2, 1), running("y2", "n2", 2, 1)]
    a = pod("a").cpu(3).priority(10).label("app", "a").spec("affinity", zone_anti_affinity("b"))
    assert outcome(plan_of(snapshot_of(*nodes, *running_pods, a), backend)) == ({}, set())
