"""The scheduling loop on a fake client: gangs whole, usage held fixed, never twice, 409s,
leadership lost between bindings, waiting gangs timing out, events and PodGroup status."""

from __future__ import annotations

import json
import threading
from typing import Any

from kubeplace.kube.objects import GangKey
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.decisions import DecisionLog
from kubeplace.serve.informer import Store
from kubeplace.serve.loop import Scheduler
from kubeplace.serve.settings import ServeSettings
from tests.builders import PodBuilder, node, pod
from tests.serve.fakes import Clock, FakeCluster

X_K8S = "scheduling.x-k8s.io"


def member(name: str, gang: str, min_member: int, cpu: str = "1") -> PodBuilder:
    return (pod(name).cpu(cpu).memory("1Gi").label("kubeplace.io/gang", gang)
            .annotation("kubeplace.io/gang-min-member", str(min_member)))


def pod_group(name: str, min_member: int, timeout: int = 60) -> dict[str, Any]:
    return {"apiVersion": f"{X_K8S}/v1alpha1", "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout}}


class Leader:
    def __init__(self) -> None:
        self.leading = True

    def is_leader(self) -> bool:
        return self.leading


def scheduler(*objects: Any, cluster: FakeCluster | None = None, clock: Clock | None = None,
              leader: Leader | None = None) -> tuple[Scheduler, FakeCluster]:
    cluster = cluster or FakeCluster()
    store = Store()
    for resource, kind in (("nodes", "Node"), ("pods", "Pod"), (f"{X_K8S}/v1alpha1/podgroups", "PodGroup")):
        manifests = [o if isinstance(o, dict) else o.manifest() for o in objects]
        store.replace(resource, [m for m in manifests if m["kind"] == kind])
    s = Scheduler(cluster, store, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1),
                  ServeSettings(batch_window=0, initial_backoff=1, max_backoff=10), leader=leader,
                  clock=clock or Clock())
    s.recorder.clock = s.clock
    s.resync_queue()
    return s, cluster


def next_cycle(s: Scheduler) -> Any:
    units = s.queue.pop_batch(window=0, size=1000, timeout=0)
    return s.cycle(units) if units else None


def bound(cluster: FakeCluster) -> dict[str, str]:
    return {key.split("/")[1]: node for key, node, _ in cluster.bindings}


def test_a_mixed_shape_gang_is_bound_whole_around_bound_usage() -> None:
    s, cluster = scheduler(
        node("a").cpu("4").memory("8Gi"), node("b").cpu("4").memory("8Gi"),
        pod("running").cpu("3").on("a"),  # held fixed: a has 1 cpu left
        member("launcher", "job", 3, cpu="1"), member("w0", "job", 3, cpu="2"), member("w1", "job", 3, cpu="2"))
    report = next_cycle(s)
    assert sorted(report.bound) == ["default/launcher", "default/w0", "default/w1"]
    assert bound(cluster) == {"launcher": "a", "w0": "b", "w1": "b"}
    assert all(cluster.event_reasons(n) == ["Scheduled"] for n in ("launcher", "w0", "w1"))
    assert s.metrics.value("kubeplace_pods_bound_total") == 3
    assert s.metrics.value("kubeplace_gang_scheduling_seconds_count") == 1
    assert s.queue.counts() == (0, 0)


def test_a_gang_that_cannot_fit_binds_nothing_and_says_why() -> None:
    s, cluster = scheduler(node("a").cpu("4").memory("8Gi"), *(member(f"w{i}", "big", 3, cpu="2") for i in range(3)),
                           pod("small").cpu("1"))
    report = next_cycle(s)
    assert bound(cluster) == {"small": "a"}
    assert sorted(report.unplaced) == ["default/w0", "default/w1", "default/w2"]
    failed = [e for e in cluster.events if e["reason"] == "FailedScheduling"]
    assert len(failed) == 3 and all(e["type"] == "Warning" for e in failed)
    assert failed[0]["message"].startswith("gang not placed") and "0/1 nodes are available" in failed[0]["message"]
    assert s.queue.backoff_of(GangKey("default", "big")) == 1
    assert s.metrics.value("kubeplace_pods_unschedulable_total") == 3


def test_a_pod_is_never_bound_twice_while_the_watch_lags() -> None:
    s, cluster = scheduler(node("a").cpu("2").memory("8Gi"), pod("p").cpu("2"))
    next_cycle(s)
    s.queue.add("default/p")  # still pending in the store: the watch has not caught up
    report = next_cycle(s)
    assert cluster.bindings == [("default/p", "a", "uid-default-p")] and report.pods == 0


def test_assumed_pods_count_as_usage_for_the_next_batch() -> None:
    s, cluster = scheduler(node("a").cpu("2").memory("8Gi"), pod("first").cpu("2"))
    next_cycle(s)
    s.store.apply("pods", "ADDED", pod("second").cpu("2").manifest())
    s.queue.add("default/second")
    report = next_cycle(s)
    assert report.unplaced == ["default/second"] and len(cluster.bindings) == 1


def test_a_node_added_retries_unschedulable_pods_at_once_when_nothing_else_waits() -> None:
    # the node moves p to the backoff queue (its 1 s backoff is not over), and the idle queue plans
    # it at once (the kube-scheduler's SchedulerPopFromBackoffQ)
    clock = Clock()
    s, cluster = scheduler(node("a").cpu("1").memory("8Gi"), pod("p").cpu("2"), clock=clock)
    next_cycle(s)
    assert s.queue.counts() == (0, 1)
    new = node("b").cpu("4").memory("8Gi").manifest()
    s.store.apply("nodes", "ADDED", new)
    s.on_change("nodes", "ADDED", None, new)
    assert s.queue.pending()["backoff"] == 1
    next_cycle(s)
    assert bound(cluster) == {"p": "b"}


def test_a_bound_pod_deleted_retries_unschedulable_pods_after_their_backoff() -> None:
    clock = Clock()
    s, cluster = scheduler(node("a").cpu("2").memory("8Gi"), pod("old").cpu("2").on("a"), pod("p").cpu("2"),
                           clock=clock)
    next_cycle(s)
    clock.advance(1)
    old = s.store.get("pods", "default/old")
    s.store.apply("pods", "DELETED", old)  # type: ignore[arg-type]
    s.on_change("pods", "DELETED", old, None)
    next_cycle(s)
    assert bound(cluster) == {"p": "a"}


def test_an_unplaceable_pod_waits_for_an_event_that_may_help_it_not_for_a_timer() -> None:
    """Through the loop: a pod too big is planned once, then not again while time passes, pods
    arrive and are bound elsewhere or a node's heartbeat comes (before, every backoff: 1, 2, 4,
    8, 10, 10... s); a pod deleted brings it back, and so does the five-minute flush."""
    clock = Clock(0.0)
    s, cluster = scheduler(node("a").cpu("4").memory("8Gi"), pod("big").cpu("3"), pod("old").cpu("2").on("a"),
                           clock=clock)
    planned: list[list[str]] = []
    cycle = s.cycle
    s.cycle = lambda units, stop=None: (planned.append(sorted(map(str, units))), cycle(units, stop))[1]  # type: ignore[method-assign]

    def tick(seconds: float) -> None:
        for _ in range(int(seconds)):
            clock.advance(1)
            next_cycle(s)

    tick(1)
    assert planned == [["default/big"]] and s.queue.is_unschedulable("default/big")
    small = pod("small").cpu("1").manifest()  # another pod arrives, is placed and bound
    s.store.apply("pods", "ADDED", small)
    s.on_change("pods", "ADDED", None, small)
    tick(2)
    bound_small = {**small, "spec": {**small["spec"], "nodeName": "a"}}
    s.store.apply("pods", "MODIFIED", bound_small)
    s.on_change("pods", "MODIFIED", small, bound_small)
    tick(120)
    assert planned == [["default/big"], ["default/small"]] and bound(cluster) == {"small": "a"}
    s.metrics.pending(s.queue.pending())  # (what run() sets after each cycle)
    assert s.metrics.value("kubeplace_pending_units", {"queue": "unschedulable"}) == 1
    old = s.store.get("pods", "default/old")
    s.store.apply("pods", "DELETED", old)  # type: ignore[arg-type]
    s.on_change("pods", "DELETED", old, None)
    tick(1)
    assert planned[-1] == ["default/big"] and bound(cluster) == {"small": "a", "big": "a"}


def test_an_unplaceable_pod_is_planned_again_after_five_minutes_without_events() -> None:
    clock = Clock(0.0)
    s, _ = scheduler(node("a").cpu("1").memory("8Gi"), pod("p").cpu("2"), clock=clock)
    tries = 0
    for _ in range(601):
        tries += next_cycle(s) is not None
        clock.advance(1)
    assert tries == 3  # at 0, 300 and 600 s (before: 65 times, every 10 s after the first few)


def test_a_heartbeat_on_a_node_is_not_a_change() -> None:
    s, _ = scheduler(node("a").cpu("1").memory("8Gi"), pod("p").cpu("2"))
    next_cycle(s)
    before = node("a").cpu("1").memory("8Gi").manifest()
    after = {**before, "status": {**before["status"], "conditions": [{"type": "Ready", "status": "True"}]}}
    s.on_change("nodes", "MODIFIED", before, after)
    assert s.queue.counts() == (0, 1)


def test_a_conflict_on_a_member_is_reported_and_the_gang_replanned() -> None:
    cluster = FakeCluster()
    cluster.bindings.append(("default/w1", "other", ""))  # another scheduler bound it first
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"), *(member(f"w{i}", "g", 3) for i in range(3)), cluster=cluster)
    report = next_cycle(s)
    assert report.failed == {"default/w1": "conflict"}
    assert s.metrics.value("kubeplace_binds_failed_total", {"outcome": "conflict"}) == 1
    assert s.metrics.value("kubeplace_gangs_below_min_member_total") == 1
    below = [e for e in cluster.events if e["reason"] == "GangBelowMinMember"]
    assert {e["involvedObject"]["name"] for e in below} == {"w0", "w2"}
    assert s.queue.counts() == (1, 0)  # re-planned next cycle
    retry = next_cycle(s)  # the watch has not shown w1 bound yet: the server answers 409 again, no duplicate
    assert retry.bound == [] and retry.failed == {"default/w1": "conflict"}
    assert sorted(cluster.bindings) == [("default/w0", "a", "uid-default-w0"), ("default/w1", "other", ""),
                                        ("default/w2", "a", "uid-default-w2")]


def test_losing_the_lease_stops_binding_between_two_pods() -> None:
    leader = Leader()
    cluster = FakeCluster()
    cluster.on_bind = lambda name: setattr(leader, "leading", name != "p0")
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"), *(pod(f"p{i}").cpu("1") for i in range(4)),
                     cluster=cluster, leader=leader)
    report = next_cycle(s)
    assert len(cluster.bindings) == 1 and report.interrupted
    assert s.queue.counts() == (3, 0)  # the rest waits for the next leader (or this one again)
    leader.leading = True
    next_cycle(s)
    assert len(cluster.bindings) == 4


def test_stop_between_bindings() -> None:
    stop = threading.Event()
    cluster = FakeCluster()
    cluster.on_bind = lambda name: stop.set()
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"), *(pod(f"p{i}").cpu("1") for i in range(3)), cluster=cluster)
    units = s.queue.pop_batch(window=0, size=10, timeout=0)
    assert s.cycle(units, stop).interrupted and len(cluster.bindings) == 1


def test_a_waiting_gang_times_out_with_event_metric_and_podgroup_status() -> None:
    clock = Clock()
    cluster = FakeCluster()
    cluster.crds.add(X_K8S)
    join = [pod(f"w{i}").cpu("1").label("scheduling.x-k8s.io/pod-group", "job") for i in range(2)]
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"), pod_group("job", 3, timeout=30), *join, cluster=cluster,
                     clock=clock)
    next_cycle(s)
    assert cluster.bindings == [] and s.metrics.value("kubeplace_gangs_waiting") == 1
    assert cluster.statuses[-1][2]["phase"] == "Pending"
    assert s.metrics.value("kubeplace_gangs_timed_out_total") == 0
    clock.advance(31)
    next_cycle(s)
    assert s.metrics.value("kubeplace_gangs_timed_out_total") == 1
    assert set(cluster.event_reasons("w0")) == {"FailedScheduling", "GangTimedOut"}
    status = cluster.statuses[-1][2]
    assert status["conditions"][0]["reason"] == "GangTimedOut" and "2 of minMember 3" in status["conditions"][0][
        "message"]
    third = pod("w2").cpu("1").label("scheduling.x-k8s.io/pod-group", "job").manifest()  # the last member arrives
    s.store.apply("pods", "ADDED", third)
    s.on_change("pods", "ADDED", None, third)
    next_cycle(s)
    assert sorted(bound(cluster)) == ["w0", "w1", "w2"]
    assert cluster.statuses[-1][1:] == ("default/job", {**cluster.statuses[-1][2], "phase": "Scheduled",
                                                        "scheduled": 3})
    assert s.metrics.value("kubeplace_gangs_waiting") == 0


def test_a_waiting_gang_deleted_is_forgotten_and_no_longer_counted_waiting() -> None:
    """Its wait, its place among the waiting gangs (the metric) and its last decision went only
    when 10,000 more gangs had waited: a scheduler that ran for weeks kept them all."""
    clock = Clock()
    lone = member("w0", "g", 2).annotation("kubeplace.io/gang-timeout-seconds", "5").manifest()
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"), lone, clock=clock)
    next_cycle(s)
    clock.advance(6)
    next_cycle(s)  # timed out: a decision of the gang
    assert s.metrics.value("kubeplace_gangs_waiting") == 1 and s.tables()["gangs_since"] == 1
    assert s.decide.remembered() == 2  # the pod's and the gang's
    s.store.apply("pods", "DELETED", lone)
    s.on_change("pods", "DELETED", lone, None)
    next_cycle(s)
    tables = s.tables()
    assert s.metrics.value("kubeplace_gangs_waiting") == 0 and tables["gangs_since"] == tables["gangs_waiting"] == 0
    assert tables["decisions"] == tables["queue_attempts"] == tables["intake_first_seen"] == 0


def test_a_crd_free_gang_timeout_comes_from_its_annotation_and_status_is_skipped() -> None:
    clock = Clock()
    members = [member("w0", "g", 2).annotation("kubeplace.io/gang-timeout-seconds", "5")]
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"), *members, clock=clock)
    next_cycle(s)
    clock.advance(6)
    next_cycle(s)
    assert s.metrics.value("kubeplace_gangs_timed_out_total") == 1 and cluster.statuses == []


def test_an_invalid_pod_is_reported_and_the_others_placed() -> None:
    bad = pod("bad").cpu("1").label("kubeplace.io/gang", "g").annotation("kubeplace.io/gang-min-member", "two")
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"), bad, pod("good").cpu("1"))
    report = next_cycle(s)
    assert bound(cluster) == {"good": "a"} and report.unplaced == ["default/bad"]
    (event,) = [e for e in cluster.events if e["involvedObject"]["name"] == "bad"]
    assert event["reason"] == "FailedScheduling" and event["type"] == "Warning"
    assert "kubeplace.io/gang-min-member" in event["message"]


def test_pending_pods_of_other_schedulers_and_namespaces_are_ignored() -> None:
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"), pod("theirs").cpu("1").scheduler("default-scheduler"),
                           pod("gated").cpu("1").gate("wait"))
    assert next_cycle(s) is None and cluster.bindings == []


def test_a_failing_cycle_backs_off_and_the_loop_goes_on() -> None:
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"), pod("p").cpu("1"))
    calls = []

    def broken(units: Any, stop: Any = None) -> Any:
        calls.append(units)
        s.stop_event.set()
        raise RuntimeError("bug")

    s.cycle = broken  # type: ignore[method-assign]
    s.run()
    assert calls == [["default/p"]] and s.queue.backoff_of("default/p") == 1


def rebalance_targets(expires: str, *entries: tuple[str, str, str]) -> dict[str, str]:
    return {"expires": expires, "targets.json": json.dumps(
        [{"namespace": ns, "evicted": "old", "owner": owner, "from": "n1", "to": to} for ns, owner, to in entries])}


def test_a_replacement_goes_to_the_rebalance_target_until_it_expires() -> None:
    nodes = (node("n1").cpu("8").memory("8Gi"), node("n2").cpu("8").memory("8Gi"))
    replacement = pod("web-new").cpu("1").owner("ReplicaSet", "web-5d8f")
    cluster = FakeCluster()
    cluster.config_maps["kubeplace-system/kubeplace-rebalance-targets"] = rebalance_targets(
        "2999-01-01T00:00:00.000000Z", ("default", "ReplicaSet/web-5d8f", "n2"))
    s, _ = scheduler(*nodes, node("n3").cpu("8").memory("8Gi"), replacement, cluster=cluster)
    next_cycle(s)
    assert bound(cluster) == {"web-new": "n2"}


def test_expired_or_missing_targets_leave_placement_free() -> None:
    for data in (rebalance_targets("2000-01-01T00:00:00.000000Z", ("default", "ReplicaSet/web", "n2")), None):
        cluster = FakeCluster()
        if data is not None:
            cluster.config_maps["kubeplace-system/kubeplace-rebalance-targets"] = data
        s, _ = scheduler(node("n1").cpu("8").memory("8Gi"), pod("w").cpu("1").owner("ReplicaSet", "web"),
                         cluster=cluster)
        next_cycle(s)
        assert bound(cluster) == {"w": "n1"}


def test_an_odd_gang_timeout_annotation_is_its_pods_reason_and_the_rest_is_scheduled() -> None:
    # "²" is a digit to str.isdigit but no number: reading the waiting gang's timeout failed every cycle.
    odd = member("w1", "g", 3).annotation("kubeplace.io/gang-timeout-seconds", "²")
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"), member("w0", "g", 3), odd, pod("good").cpu("1"))
    report = next_cycle(s)
    assert bound(cluster) == {"good": "a"} and sorted(report.unplaced) == ["default/w0", "default/w1"]
    (event,) = [e for e in cluster.events if e["involvedObject"]["name"] == "w1"]
    assert event["reason"] == "FailedScheduling"
    assert "metadata.annotations.kubeplace.io/gang-timeout-seconds: got '²'" in event["message"]


def test_a_victims_decision_is_not_remembered_even_when_the_watch_told_its_deletion_first() -> None:
    """A victim's deletion (which forgets its pod) may reach serve before its "preempted"
    decision is logged: that last decision was then kept for ever, one per preemption (a 7-day
    soak: 293 and growing)."""
    decide = DecisionLog()
    decide.forget("default/victim")  # the watch's DELETED first
    decide(pod="default/victim", node="a", outcome="preempted", why="Preempted by default/p on node a")
    assert decide.remembered() == 0
