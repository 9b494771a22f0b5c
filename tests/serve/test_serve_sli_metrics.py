"""serve exports the kube-scheduler's SLI histograms by their names, beside its own: a dashboard
or alert written for the kube-scheduler reads kubeplace serve the same way."""

from __future__ import annotations

from kubeplace.serve.prometheus import SLI_BUCKETS
from tests.builders import node, pod
from tests.serve.fakes import Clock
from tests.serve.test_serve_loop import bound, member, next_cycle, scheduler

SLI = "scheduler_pod_scheduling_sli_duration_seconds"
ATTEMPT = "scheduler_scheduling_attempt_duration_seconds"


def test_a_pod_bound_at_its_second_attempt_is_in_the_sli_under_attempts_2() -> None:
    clock = Clock()
    s, cluster = scheduler(node("a").cpu("1").memory("8Gi"), pod("p").cpu("2"), clock=clock)
    next_cycle(s)  # does not fit: an unschedulable attempt
    assert s.metrics.value(f"{ATTEMPT}_count", {"result": "unschedulable", "profile": "kubeplace"}) == 1
    clock.advance(3)
    new = node("b").cpu("4").memory("8Gi").manifest()
    s.store.apply("nodes", "ADDED", new)
    s.on_change("nodes", "ADDED", None, new)
    next_cycle(s)
    assert bound(cluster) == {"p": "b"}
    assert s.metrics.value(f"{SLI}_count", {"attempts": "2"}) == 1
    assert s.metrics.value(f"{SLI}_sum", {"attempts": "2"}) == 3  # since first seen pending
    assert s.metrics.value(f"{SLI}_count", {"attempts": "1"}) == 0
    assert s.metrics.value(f"{ATTEMPT}_count", {"result": "scheduled", "profile": "kubeplace"}) == 1
    assert s.tables()["intake_attempts"] == 0  # forgotten once bound


def test_each_member_of_a_gang_is_one_scheduled_attempt_and_one_sli_sample() -> None:
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"), *(member(f"w{i}", "job", 3) for i in range(3)))
    next_cycle(s)
    assert s.metrics.value(f"{SLI}_count", {"attempts": "1"}) == 3
    assert s.metrics.value(f"{ATTEMPT}_count", {"result": "scheduled", "profile": "kubeplace"}) == 3
    assert s.metrics.value(f"{ATTEMPT}_count", {"result": "error", "profile": "kubeplace"}) == 0
    text = s.metrics.text()
    assert f'{SLI}_bucket{{attempts="1",le="0.01"}}' in text  # the kube-scheduler's first bucket
    assert len(SLI_BUCKETS) == 20 and SLI_BUCKETS[-1] > 5000  # its last, [~88 min, +Inf)
    assert "kubeplace_pod_scheduling_seconds_count 3.0" in text  # beside its own
