"""serve and the gang sources it cannot read: a pod naming a missing PodGroup is never bound, and
its FailedScheduling Event says why in the plan's words."""

from __future__ import annotations

from kubeplace.kube.objects import GangKey
from tests.builders import node, pod
from tests.serve.test_serve_loop import bound, next_cycle, scheduler


def test_a_missing_workload_api_podgroup_binds_nothing_and_the_event_says_why() -> None:
    members = [pod(f"w{i}").cpu("1").memory("1Gi").spec("schedulingGroup", {"podGroupName": "train"})
               for i in range(4)]
    s, cluster = scheduler(node("a").cpu("2").memory("8Gi"), *members, pod("small").cpu("1"))
    report = next_cycle(s)
    assert bound(cluster) == {"small": "a"}  # pod by pod, two of the four would have fitted
    assert sorted(report.unplaced) == [f"default/w{i}" for i in range(4)]
    failed = [e for e in cluster.events if e["reason"] == "FailedScheduling"]
    assert len(failed) == 4
    assert {e["message"] for e in failed} == {'waiting for pods\'s pod group "train" to appear in scheduling queue'}
    assert s.queue.backoff_of(GangKey("default", "train")) == 1
