"""Followers that do not exist yet (JobSet and LeaderWorkerSet exclusive topology): their room is
held in their leader's domain, so that the leader goes where its whole job or group fits."""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.pipeline import make_plan, with_stand_ins
from kubeplace.plan.plan import Plan
from kubeplace.plan.verify import verify
from tests.builders import PodBuilder, node, pod, snapshot_of

RACK = "cloud.provider.com/topology-rack"
BACKENDS = ["cpsat", "highs"]
JOB_KEY = "jobset.sigs.k8s.io/job-key"
LWS = "leaderworkerset.sigs.k8s.io/"


def exclusive(label: str, value: str, all_namespaces: bool) -> dict[str, Any]:
    own = {"key": label, "operator": "In", "values": [value]}
    same: dict[str, Any] = {"labelSelector": {"matchExpressions": [own]}, "topologyKey": RACK}
    others: dict[str, Any] = {"labelSelector": {"matchExpressions": [
        {"key": label, "operator": "Exists"}, {"key": label, "operator": "NotIn", "values": [value]}]},
        "topologyKey": RACK}
    if all_namespaces:
        same["namespaceSelector"] = others["namespaceSelector"] = {}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [same]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [others]}}


def jobset_leader(job: str, cpu: str = "3") -> PodBuilder:
    """Completion index 0 of Job ``job``, as JobSet's pod webhook leaves it."""
    b = pod(f"{job}-0-abcde").cpu(cpu).label("batch.kubernetes.io/job-name", job).label(JOB_KEY, job)
    b = b.label("batch.kubernetes.io/job-completion-index", "0")
    b = b.annotation("alpha.jobset.sigs.k8s.io/exclusive-topology", RACK)
    b = b.annotation("batch.kubernetes.io/job-completion-index", "0")
    return b.spec("affinity", exclusive(JOB_KEY, job, all_namespaces=True))


def job(name: str, parallelism: int, cpu: str = "3", completions: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": parallelism, "completionMode": "Indexed", "template": {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "m", "resources": {"requests": {"cpu": cpu}}}]}}}
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def lws_leader(lws: str, group: int, size: int, cpu: str = "3") -> PodBuilder:
    """Worker 0 of group ``group`` of LeaderWorkerSet ``lws`` with group-exclusive topology."""
    key = f"{lws}-{group}-key"
    b = pod(f"{lws}-{group}").cpu(cpu).label(f"{LWS}name", lws).label(f"{LWS}group-index", str(group))
    b = b.label(f"{LWS}worker-index", "0").label(f"{LWS}group-key", key)
    b = b.annotation(f"{LWS}exclusive-topology", RACK).annotation(f"{LWS}size", str(size))
    return b.spec("affinity", exclusive(f"{LWS}group-key", key, all_namespaces=False))


def leader_worker_set(name: str, size: int, worker_cpu: str) -> dict[str, Any]:
    worker = {"spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": worker_cpu}}}]}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": "default", "annotations": {f"{LWS}exclusive-topology": RACK}},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": size, "workerTemplate": worker}}}


def racks(big: str = "4") -> list[Any]:
    """Rack r2 of two nodes of ``big`` CPU (the roomier nodes), rack r4 of four of 4 CPU."""
    return ([node(f"r2-{i}").cpu(big).memory("8Gi").label(RACK, "r2") for i in range(2)]
            + [node(f"r4-{i}").cpu("4").memory("8Gi").label(RACK, "r4") for i in range(4)])


def plan_of(*objects: Any, backend: str = "cpsat") -> tuple[Plan, Snapshot]:
    snap = snapshot_of(*objects)
    plan = make_plan(snap, Configuration(), Profile(), SolverSettings(backend=backend, time_limit=5, workers=1)).plan
    assert plan.summary.verified
    assert verify(snap, [(p.namespace, p.name, p.node) for p in plan.placements]) == []
    everything = [(p.namespace, p.name, p.node, p.count) for p in (*plan.placements, *plan.reservations)]
    assert verify(with_stand_ins(snap), everything) == []
    return plan, snap


def racks_held(plan: Plan) -> dict[str, int]:
    """Followers reserved per rack."""
    held: dict[str, int] = {}
    for r in plan.reservations:
        held[r.node.rsplit("-", 1)[0]] = held.get(r.node.rsplit("-", 1)[0], 0) + r.count
    return held


def rack_of(plan: Plan, name: str) -> str:
    return next(p.node for p in (*plan.placements, *plan.reservations) if p.name == name).rsplit("-", 1)[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_jobset_leader_goes_to_a_rack_its_whole_job_fits_in(backend: str) -> None:
    plan, snap = plan_of(*racks(big="5"), job("train", 4), jobset_leader("train"), backend=backend)
    assert [(p.name, p.copies, p.requests["cpu"]) for p in snap.reserved] == [("train-0-abcde.followers", 3, 3000)]
    assert rack_of(plan, "train-0-abcde") == "r4"
    assert racks_held(plan) == {"r4": 3}
    held = plan.to_dict()["reservations"]
    assert [(r["name"], r["count"]) for r in held] == [("train-0-abcde.followers", 1)] * 3
    assert len({r["node"] for r in held}) == 3
    (gang,) = plan.gangs
    assert (gang.name, gang.min_member, gang.placed) == ("train", 4, True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_leader_whose_job_fits_nowhere_waits(backend: str) -> None:
    plan, _ = plan_of(*racks(), job("train", 5), jobset_leader("train"), pod("solo").cpu("1"), backend=backend)
    assert {p.name for p in plan.placements} == {"solo"} and plan.reservations == ()
    (unplaced,) = plan.unplaced
    assert unplaced.name == "train-0-abcde" and "within one cloud.provider.com/topology-rack domain" in \
        unplaced.reasons[0]


def test_parallelism_is_capped_by_completions_and_a_leader_without_its_job_is_planned_alone() -> None:
    snap = snapshot_of(*racks(), job("train", 4, completions=2), jobset_leader("train"))
    assert [p.copies for p in snap.reserved] == [1]
    plan, snap = plan_of(*racks(), jobset_leader("train"))
    assert snap.reserved == () and [p.name for p in plan.placements] == ["train-0-abcde"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_lws_leader_holds_room_for_its_workers_shaped_by_the_worker_template(backend: str) -> None:
    plan, snap = plan_of(*racks(big="5"), leader_worker_set("infer", 4, worker_cpu="3"), lws_leader("infer", 0, 4),
                         backend=backend)
    assert [(p.name, p.labels[f"{LWS}worker-index"], p.copies) for p in snap.reserved] == [
        ("infer-0.followers", "1", 3)]
    assert rack_of(plan, "infer-0") == "r4" and racks_held(plan) == {"r4": 3}


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_jobs_never_share_a_rack_nor_its_reserved_room(backend: str) -> None:
    """Two 2-pod jobs and racks r2 (2 nodes) and r4 (4 nodes): one job per rack, whichever."""
    plan, _ = plan_of(*racks(), job("a", 2), job("b", 2), jobset_leader("a"), jobset_leader("b"), backend=backend)
    assert {rack_of(plan, "a-0-abcde"), rack_of(plan, "b-0-abcde")} == {"r2", "r4"}
    assert rack_of(plan, "a-0-abcde.followers") == rack_of(plan, "a-0-abcde")


def test_the_verifier_refuses_a_leader_placed_without_its_reserved_room() -> None:
    snap = with_stand_ins(snapshot_of(*racks(), job("train", 2), jobset_leader("train")))
    (violation,) = verify(snap, [("default", "train-0-abcde", "r4-0")])
    assert violation.rule == "Coscheduling" and "train-0-abcde.followers is not placed" in violation.detail
    (violation,) = verify(snap, [("default", "train-0-abcde", "r4-0"), ("default", "train-0-abcde.followers", "r2-0")])
    assert violation.rule == "Coscheduling" and violation.detail.startswith("gang ")  # its topology


@pytest.mark.parametrize(("spec", "field"), [
    ({"parallelism": -1}, "spec.parallelism"),
    ({"parallelism": 2, "template": {"spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "x"}}}]}}},
     "spec.template.spec.containers[0].resources.requests.cpu"),
])
def test_a_bad_job_names_its_field(spec: dict[str, Any], field: str) -> None:
    bad = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"}, "spec": spec}
    with pytest.raises(InputError) as caught:
        snapshot_of(*racks(), bad, jobset_leader("train"))
    assert caught.value.field == field and "Job train" in str(caught.value)


def test_a_leader_with_followers_to_come_does_not_preempt_alone() -> None:
    """Preemption plans without the stand-ins: a leader that could run only by evicting would run
    without room for its followers, so it waits (its gang needs them), and says why."""
    from kubeplace.plan.preemption_plan import make_preemption_plan

    nodes = [node(f"r4-{i}").cpu("4").memory("8Gi").label(RACK, "r4") for i in range(2)]
    low = [pod(f"low{i}").cpu("4").priority(1).on(f"r4-{i}").owner("ReplicaSet", "rs") for i in range(2)]
    snap = snapshot_of(*nodes, *low, job("train", 4), jobset_leader("train").priority(100))
    config = Configuration()
    planned = make_preemption_plan(snap, config, config.profiles[0], SolverSettings(time_limit=5, workers=1))
    assert planned.plan.placements == () and planned.plan.preemptions == ()
    (unplaced,) = planned.plan.unplaced
    assert any("room for its followers" in r for r in unplaced.reasons), unplaced.reasons


HUGE = 2**31 - 1


@pytest.mark.parametrize("kind", ["jobset", "lws"])
def test_a_job_or_group_larger_than_any_domain_gets_a_reason_and_no_stand_ins(kind: str) -> None:
    # One stand-in pod per follower took 9.7 GB in 60 s; now the size is refused before any is made.
    owner, leader = ((job("train", HUGE), jobset_leader("train")) if kind == "jobset"
                     else (leader_worker_set("train", HUGE, worker_cpu="3"), lws_leader("train", 0, HUGE)))
    objects = [*racks(), owner, leader, pod("solo").cpu("1")]
    tracemalloc.start()
    started = time.perf_counter()
    snap = snapshot_of(*objects)
    seconds, (_, peak) = time.perf_counter() - started, tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert sorted(p.name for p in snap.pending) == sorted([leader.manifest()["metadata"]["name"], "solo"])
    assert snap.reserved == () and seconds < 5 and peak < 4 << 20
    plan, _ = plan_of(*objects)
    assert [p.name for p in plan.placements] == ["solo"] and plan.reservations == ()
    (unplaced,) = plan.unplaced
    what = "Job default/train: parallelism" if kind == "jobset" else "LeaderWorkerSet group default/train-0: size"
    assert unplaced.reasons[0] == (f"{what} {HUGE}: {HUGE} pods to place in one {RACK} domain, more than the "
                                   "largest one can ever hold (440 pods)")


def test_a_job_as_large_as_its_largest_domain_still_gets_its_stand_ins() -> None:
    small = [node(f"r-{i}").cpu("8").memory("8Gi").pods(2).label(RACK, "r") for i in range(2)]
    assert [p.copies for p in snapshot_of(*small, job("train", 4, cpu="1"), jobset_leader("train", cpu="1")).reserved] \
        == [3]
    plan, _ = plan_of(*small, job("train", 5, cpu="1"), jobset_leader("train", cpu="1"))
    assert plan.placements == () and "(4 pods)" in plan.unplaced[0].reasons[0]


def test_the_verifier_refuses_a_leader_whose_job_no_domain_could_hold() -> None:
    snap = with_stand_ins(snapshot_of(*racks(), job("train", HUGE), jobset_leader("train")))
    (violation,) = verify(snap, [("default", "train-0-abcde", "r4-0")])
    assert violation.rule == "Coscheduling" and "more than the largest one can ever hold" in violation.detail


def test_a_job_as_large_as_a_big_domain_plans_in_memory_and_time_of_its_leader_alone() -> None:
    """One stand-in object counting the followers, not one pod each: 21,999 followers cost what
    the leader alone costs, give or take a few MB (one pod per follower took 215 MB and 47 s)."""
    big = [node(f"big-{i}").cpu("16").memory("64Gi").pods(110).label(RACK, "big") for i in range(200)]
    nodes = [*big, *(node(f"small-{i}").cpu("16").memory("64Gi").pods(110).label(RACK, "small") for i in range(2))]
    leader = jobset_leader("train", cpu="100m")
    slots = 200 * 110

    def traced(*objects: Any) -> tuple[Plan, Snapshot, int, float]:
        tracemalloc.start()
        started = time.perf_counter()
        snap = snapshot_of(*objects)
        plan = make_plan(snap, Configuration(), Profile(), SolverSettings(time_limit=20, workers=1)).plan
        seconds, (_, peak) = time.perf_counter() - started, tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return plan, snap, peak, seconds

    traced(*nodes, leader)  # imports and first-use caches, out of both measures
    _, _, alone, _ = traced(*nodes, leader)
    plan, snap, peak, seconds = traced(*nodes, job("train", slots, cpu="100m"), leader)
    assert [(p.name, p.copies) for p in snap.reserved] == [("train-0-abcde.followers", slots - 1)]
    assert peak < alone + (6 << 20), (peak, alone)
    assert seconds < 30
    assert plan.summary.verified and [p.node.rsplit("-", 1)[0] for p in plan.placements] == ["big"]
    assert racks_held(plan) == {"big": slots - 1} and len(plan.reservations) == 200
    everything = [(p.namespace, p.name, p.node, p.count) for p in (*plan.placements, *plan.reservations)]
    assert verify(with_stand_ins(snap), everything) == []


def test_the_verifier_counts_the_copies_of_a_reservation() -> None:
    """Room for a job's three followers: all three held, each node's share within its capacity."""
    snap = with_stand_ins(snapshot_of(*racks(), job("train", 4), jobset_leader("train")))
    leader = ("default", "train-0-abcde", "r4-0")
    held = [("default", "train-0-abcde.followers", f"r4-{i}", 1) for i in (1, 2, 3)]
    assert verify(snap, [leader, *held]) == []
    (short,) = verify(snap, [leader, *held[:2]])
    assert short.rule == "Coscheduling" and "room held for 2 of its 3 followers" in short.detail
    (crowded,) = verify(snap, [leader, ("default", "train-0-abcde.followers", "r4-1", 3)])
    assert crowded.rule == "NodeResourcesFit" and "Insufficient cpu: needs 5000m more" in crowded.detail
    (extra,) = verify(snap, [leader, *held, ("default", "train-0-abcde.followers", "r4-1", 1)])
    assert extra.rule == "Pending" and "4 placed of its 3 copies" in extra.detail
