"""Which watch events are which cluster events (the kube-scheduler's QueueingHints), and which
events each pod waits for once it could not be placed."""

from __future__ import annotations

from typing import Any

from kubeplace.serve import hints
from kubeplace.serve.hints import CAPACITY, INTER_POD, PREBIND, pod_hints
from kubeplace.serve.informer import ADDED, DELETED, MODIFIED
from kubeplace.serve.intake import assigned_pod_events, node_events, pod_updated
from tests.builders import node, pod


def changed(raw: dict[str, Any], *path_and_value: Any) -> dict[str, Any]:
    """A deep copy of ``raw`` with the value at ``path`` (the last argument: the value) replaced."""
    import copy
    new = copy.deepcopy(raw)
    *path, value = path_and_value
    where = new
    for key in path[:-1]:
        where = where.setdefault(key, {}) if isinstance(where, dict) else where[key]
    where[path[-1]] = value
    return new


def test_a_node_change_is_an_event_only_where_it_may_help() -> None:
    before = node("a").cpu("4").memory("8Gi").manifest()
    assert node_events(ADDED, None, before) == [hints.NODE_ADD]
    assert node_events(DELETED, before, None) == [hints.NODE_DELETE]
    heartbeat = changed(before, "status", "conditions", [{"type": "Ready", "status": "True"}])
    assert node_events(MODIFIED, before, heartbeat) == []
    grown = changed(before, "status", "allocatable", "cpu", "8")
    assert node_events(MODIFIED, before, grown) == [hints.NODE_ALLOCATABLE]
    assert node_events(MODIFIED, grown, before) == []  # a shrink helps no pod
    assert node_events(MODIFIED, before, node("a").cpu("4").memory("8Gi").label("zone", "z1").manifest()) == [
        hints.NODE_LABEL]
    assert node_events(MODIFIED, node("a").cpu("4").memory("8Gi").taint("k").manifest(), before) == [hints.NODE_TAINT]
    assert node_events(MODIFIED, node("a").cpu("4").memory("8Gi").unschedulable().manifest(), before) == [
        hints.NODE_TAINT]


def test_a_pod_change_is_an_event_for_the_others_where_it_may_help() -> None:
    pending = pod("p").cpu("2").manifest()
    running = pod("p").cpu("2").on("a").manifest()
    assert assigned_pod_events(ADDED, None, pending) == []  # an arrival helps no other pod
    assert assigned_pod_events(MODIFIED, pending, running) == [hints.ASSIGNED_POD_ADD]  # bound
    assert assigned_pod_events(ADDED, None, running) == [hints.ASSIGNED_POD_ADD]
    assert assigned_pod_events(DELETED, running, None) == [hints.ASSIGNED_POD_DELETE]
    assert assigned_pod_events(DELETED, pending, None) == []
    assert assigned_pod_events(DELETED, changed(pending, "status", "nominatedNodeName", "a"), None) == [
        hints.ASSIGNED_POD_DELETE]  # the room held for it is free
    assert assigned_pod_events(MODIFIED, running, changed(running, "status", "phase", "Succeeded")) == [
        hints.ASSIGNED_POD_DELETE]  # finished: its room is free
    assert assigned_pod_events(MODIFIED, running, pending) == [hints.ASSIGNED_POD_DELETE]  # its node taken away
    smaller = pod("p").cpu("1").on("a").manifest()
    assert assigned_pod_events(MODIFIED, running, smaller) == [hints.ASSIGNED_POD_SCALE_DOWN]
    assert assigned_pod_events(MODIFIED, smaller, running) == []  # grown: helps nobody
    actuated = [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]
    resizing = changed(smaller, "status", "containerStatuses", actuated)  # asked 1, still runs with 2
    assert assigned_pod_events(MODIFIED, changed(running, "status", "containerStatuses", actuated), resizing) == []
    resized = changed(resizing, "status", "containerStatuses", 0, "resources", "requests", "cpu", "1")
    assert assigned_pod_events(MODIFIED, resizing, resized) == [hints.ASSIGNED_POD_SCALE_DOWN]  # in place
    assert assigned_pod_events(MODIFIED, running, pod("p").cpu("2").on("a").label("app", "x").manifest()) == [
        hints.ASSIGNED_POD_LABEL]
    assert assigned_pod_events(MODIFIED, running, changed(running, "metadata", "resourceVersion", "9")) == []


def test_its_own_update_is_a_change_of_what_placement_reads_not_of_its_status() -> None:
    before = pod("p").cpu("2").manifest()
    assert not pod_updated(before, changed(before, "status", "nominatedNodeName", "a"))
    assert not pod_updated(before, changed(before, "metadata", "resourceVersion", "7"))
    assert pod_updated(before, pod("p").cpu("1").manifest())
    assert pod_updated(before, pod("p").cpu("2").tolerate("k").manifest())
    assert pod_updated(before, pod("p").cpu("2").label("app", "x").manifest())


def test_each_pod_waits_for_what_may_help_it() -> None:
    assert pod_hints(pod("p").cpu("1").build()) == CAPACITY
    affine = pod("p").cpu("1").spec("affinity", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}).build()
    assert pod_hints(affine) == CAPACITY | INTER_POD
    spread = pod("p").cpu("1").label("app", "web").spec("topologySpreadConstraints", [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "web"}}}]).build()
    assert hints.ASSIGNED_POD_ADD in pod_hints(spread)
    soft = pod("p").cpu("1").label("app", "web").spec("topologySpreadConstraints", [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "web"}}}]).build()
    assert pod_hints(soft) == CAPACITY
    claimed = pod("p").cpu("1").spec("volumes", [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]).build()
    assert PREBIND & pod_hints(claimed) == {hints.VOLUME_CHANGE}
