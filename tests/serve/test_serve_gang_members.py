"""A gang is handed to a cycle as soon as its minMember pods exist, and waits for them until then."""

from __future__ import annotations

from typing import Any

from kubeplace.kube.objects import GangKey
from kubeplace.serve.loop import Scheduler
from tests.builders import node, pod
from tests.serve.test_serve_loop import X_K8S, bound, member, pod_group, scheduler

GANG = GangKey("default", "g")


def arrive(s: Scheduler, manifest: dict[str, Any], event: str = "ADDED") -> None:
    s.store.apply("pods", event, manifest)
    s.on_change("pods", event, None if event == "ADDED" else manifest, manifest if event != "DELETED" else None)


def pop(s: Scheduler) -> list[Any]:
    """What the serve loop's pop would hand over now (its default window: 1 s, 1 ms per unit)."""
    return list(s.queue.pop_batch(1.0, 1000, timeout=0, quiet=None, per_unit=s.settings.batch_window_per_unit))


def test_a_crd_free_gang_is_planned_when_its_last_member_arrives_not_before() -> None:
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"))
    members = [member(f"w{i}", "g", 3).manifest() for i in range(3)]
    for manifest in members[:2]:
        arrive(s, manifest)
        assert pop(s) == []  # waits for its members
    arrive(s, members[2])
    units = pop(s)
    assert units == [GANG]
    s.cycle(units)
    assert sorted(bound(cluster)) == ["w0", "w1", "w2"]


def test_a_podgroup_gang_counts_its_bound_members_and_a_deleted_one_no_more() -> None:
    running = pod("w0").cpu("1").label(f"{X_K8S}/pod-group", "job").on("a").manifest()
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"), pod_group("job", 3), running)
    job = GangKey("default", "job")
    second = pod("w1").cpu("1").label(f"{X_K8S}/pod-group", "job").manifest()
    arrive(s, second)
    assert pop(s) == []  # two of minMember 3
    third = pod("w2").cpu("1").label(f"{X_K8S}/pod-group", "job").manifest()
    arrive(s, third)
    arrive(s, third, "DELETED")
    assert pop(s) == []  # two again
    arrive(s, pod("w3").cpu("1").label(f"{X_K8S}/pod-group", "job").manifest())
    assert pop(s) == [job]


def test_a_gang_whose_min_member_cannot_be_read_here_keeps_the_fixed_window() -> None:
    """Its PodGroup is missing: the plan says why it waits, after the batch window as before."""
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"))
    arrive(s, pod("w0").cpu("1").label(f"{X_K8S}/pod-group", "nowhere").manifest())
    assert pop(s) == []
    s.clock.advance(1.0)  # type: ignore[attr-defined]
    assert pop(s) == [GangKey("default", "nowhere")]


def test_a_lone_pod_is_planned_at_once() -> None:
    s, cluster = scheduler(node("a").cpu("8").memory("8Gi"))
    arrive(s, pod("p").cpu("1").manifest())
    units = pop(s)
    assert units == ["default/p"]
    s.cycle(units)
    assert bound(cluster) == {"p": "a"}


def test_a_terminating_member_does_not_count_and_a_gang_gone_is_forgotten() -> None:
    s, _ = scheduler(node("a").cpu("8").memory("8Gi"))
    members = [member(f"w{i}", "g", 2).manifest() for i in range(2)]
    arrive(s, members[0])
    arrive(s, member("w1", "g", 2).deleting().manifest())
    assert pop(s) == []  # one member that counts, of 2
    for manifest in members:
        arrive(s, manifest, "DELETED")
    assert s.tables()["intake_gangs"] == 0
