"""In-place pod resize: a bound pod is counted as the kube-scheduler 1.36 counts it
(``PodRequests`` with ``UseStatusResources``), everywhere its usage is read; a pending pod by its spec."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import Snapshot
from kubeplace.kube.parse import build_snapshot, parse_pod
from kubeplace.kube.requests import pod_requests
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Placement
from kubeplace.rebalance.movable import RESIZING, Rules, exclusion, facts_of
from kubeplace.serve.informer import ADDED, MODIFIED, Store
from kubeplace.solver.emulate.scheduler import emulate

Manifest = dict[str, Any]


def container(name: str, cpu: str, **extra: Any) -> Manifest:
    return {"name": name, "image": "x", "resources": {"requests": {"cpu": cpu}}, **extra}


def status_of(name: str, actuated: str | None = None, allocated: str | None = None) -> Manifest:
    """A container status reporting ``resources.requests.cpu`` (actuated) and ``allocatedResources``."""
    entry: Manifest = {"name": name}
    if actuated is not None:
        entry["resources"] = {"requests": {"cpu": actuated}}
    if allocated is not None:
        entry["allocatedResources"] = {"cpu": allocated}
    return entry


def resize_pending(reason: str) -> Manifest:
    return {"type": "PodResizePending", "status": "True", "reason": reason}


IN_PROGRESS = {"type": "PodResizeInProgress", "status": "True"}


def pod(name: str = "p", *, containers: list[Manifest] | None = None, node: str = "n1",
        statuses: list[Manifest] | None = None, conditions: list[Manifest] | None = None,
        **status: Any) -> Manifest:
    spec: Manifest = {"containers": containers or [container("app", "2")]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"},
            "spec": spec, "status": {"phase": "Running" if node else "Pending", "containerStatuses": statuses or [],
                                     "conditions": conditions or [], **status}}


def cpu_of(manifest: Manifest) -> int:
    return parse_pod(manifest).requests.get("cpu", 0)


# --------------------------------------------------------------------------- the count


def test_a_resize_in_progress_counts_the_larger_of_spec_and_status() -> None:
    """Spec lowered from 8 to 2 CPUs, the kubelet still holding 8: the kube-scheduler counts 8."""
    lowered = pod(statuses=[status_of("app", actuated="8", allocated="8")], conditions=[IN_PROGRESS])
    assert cpu_of(lowered) == 8000
    assert facts_of(lowered).resizing
    raised = pod(containers=[container("app", "6")], statuses=[status_of("app", actuated="2", allocated="2")])
    assert cpu_of(raised) == 6000
    # actuated and allocated differ: the largest of the three
    assert cpu_of(pod(statuses=[status_of("app", actuated="3", allocated="5")])) == 5000
    # a Deferred resize is not Infeasible: the spec still counts
    assert cpu_of(pod(containers=[container("app", "12")], statuses=[status_of("app", actuated="2")],
                      conditions=[resize_pending("Deferred")])) == 12000


def test_an_infeasible_resize_counts_what_the_container_runs_with() -> None:
    """Spec asks 18 CPUs on a 16-CPU node, the kubelet refused (Infeasible), the container runs with 2."""
    infeasible = pod(containers=[container("app", "18")], statuses=[status_of("app", actuated="2", allocated="2")],
                     conditions=[resize_pending("Infeasible")])
    assert cpu_of(infeasible) == 2000
    assert facts_of(infeasible).resizing
    # the larger of actuated and allocated; a reported container without either counts nothing
    assert cpu_of(pod(containers=[container("app", "18")], statuses=[status_of("app", actuated="1", allocated="3")],
                      conditions=[resize_pending("Infeasible")])) == 3000
    assert cpu_of(pod(containers=[container("app", "18")], statuses=[{"name": "app", "resources": {}}],
                      conditions=[resize_pending("Infeasible")])) == 0
    # only the first PodResizePending condition says
    assert cpu_of(pod(containers=[container("app", "18")], statuses=[status_of("app", actuated="2")],
                      conditions=[resize_pending("Deferred"), resize_pending("Infeasible")])) == 18000


def test_a_container_status_without_resources_leaves_the_spec() -> None:
    """``cs.Resources == nil``: allocatedResources alone does not count (the scheduler reads it
    only beside ``resources``); nor does the status of a container of another name."""
    assert cpu_of(pod(statuses=[status_of("app", allocated="8")])) == 2000
    assert cpu_of(pod(statuses=[status_of("other", actuated="8")])) == 2000
    assert not facts_of(pod(statuses=[status_of("app", actuated="2", allocated="2")])).resizing


def test_a_pending_pod_is_counted_by_its_spec() -> None:
    pending = pod(node="", statuses=[status_of("app", actuated="8", allocated="8")])
    assert cpu_of(pending) == 2000
    assert not facts_of(pending).resizing
    assert pod_requests(pending)["cpu"] == 2000


def test_init_containers_and_sidecars() -> None:
    """A sidecar's status counts like an app container's; an ordinary init container (finished)
    is counted by its spec, whatever its status says. Statuses are found by name in either list."""
    sidecar = container("proxy", "1", restartPolicy="Always")
    init = container("setup", "1")
    manifest = pod(containers=[container("app", "2")], statuses=[status_of("app", actuated="2")])
    manifest["spec"]["initContainers"] = [init, sidecar]
    manifest["status"]["initContainerStatuses"] = [status_of("setup", actuated="9"), status_of("proxy", actuated="4")]
    # app 2 + sidecar max(1, 4) = 6; the init phase: setup 1 (before the sidecar) -> 6
    assert cpu_of(manifest) == 6000
    manifest["status"]["initContainerStatuses"] = [status_of("setup", actuated="9")]
    assert cpu_of(manifest) == 3000
    # a sidecar's status listed among containerStatuses is found too
    manifest["status"]["containerStatuses"] = [status_of("app", actuated="2"), status_of("proxy", actuated="3")]
    assert cpu_of(manifest) == 5000


def test_pod_level_resources_take_the_pod_status() -> None:
    manifest = pod(containers=[container("app", "1")], statuses=[status_of("app", actuated="1")])
    manifest["spec"]["resources"] = {"requests": {"cpu": "4", "memory": "1Gi"}}
    assert cpu_of(manifest) == 4000
    manifest["status"]["resources"] = {"requests": {"cpu": "6"}}
    manifest["status"]["allocatedResources"] = {"cpu": "6", "memory": "2Gi"}
    requests = parse_pod(manifest).requests
    assert (requests["cpu"], requests["memory"]) == (6000, 2 * 1024**3)
    manifest["status"]["conditions"] = [resize_pending("Infeasible")]
    manifest["status"].pop("allocatedResources")
    requests = parse_pod(manifest).requests
    assert (requests["cpu"], requests.get("memory", 0)) == (6000, 0)  # set at pod level, reported nowhere
    # without status.resources, the pod-level allocatedResources alone changes nothing
    del manifest["status"]["resources"]
    manifest["status"]["allocatedResources"] = {"cpu": "9"}
    assert cpu_of(manifest) == 4000


APP = ("containerStatuses", 0)
APP_FIELD = "status.containerStatuses[0]"


@pytest.mark.parametrize(("path", "value", "field"), [
    ((*APP, "resources", "requests", "cpu"), "eight", f"{APP_FIELD}.resources.requests.cpu"),
    ((*APP, "resources", "requests", "cpu"), "-2", f"{APP_FIELD}.resources.requests.cpu"),
    ((*APP, "resources", "limits"), {"cpu": "1x"}, f"{APP_FIELD}.resources.limits.cpu"),
    ((*APP, "allocatedResources", "cpu"), [], f"{APP_FIELD}.allocatedResources.cpu"),
    ((*APP, "resources"), "8", f"{APP_FIELD}.resources"),
    ((*APP, "name"), 7, f"{APP_FIELD}.name"),
    (("containerStatuses",), {"app": 1}, "status.containerStatuses"),
    (("initContainerStatuses",), [3], "status.initContainerStatuses[0]"),
    (("conditions", 0, "reason"), True, "status.conditions[0].reason"),
    (("conditions", 0), "Infeasible", "status.conditions[0]"),
    (("resources", "requests", "cpu"), "1.5.0", "status.resources.requests.cpu"),
    (("allocatedResources", "memory"), "lots", "status.allocatedResources.memory"),
])
def test_a_malformed_status_is_refused_naming_the_field(path: tuple[Any, ...], value: Any, field: str) -> None:
    manifest = pod(statuses=[status_of("app", actuated="8", allocated="8")], conditions=[resize_pending("Deferred")])
    target = manifest["status"]
    for step in path[:-1]:
        target = target.setdefault(step, {}) if isinstance(target, dict) else target[step]
    target[path[-1]] = value
    with pytest.raises(InputError) as caught:
        build_snapshot([(manifest, "pods.yaml")])
    message = str(caught.value)
    assert field in message and "pods.yaml" in message and "Pod default/p" in message, message


# --------------------------------------------------------------------------- plan, verifier, emulation, rebalance


def node(name: str, cpu: str) -> Manifest:
    allocatable = {"cpu": cpu, "memory": "64Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"u-{name}",
                                                             "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": allocatable, "capacity": allocatable}}


def pending(name: str, cpu: str) -> Manifest:
    manifest = pod(name, containers=[container("app", cpu)], node="")
    manifest["spec"]["schedulerName"] = "kubeplace"
    del manifest["status"]
    return manifest


def snapshot_of(*manifests: Manifest) -> Snapshot:
    return build_snapshot([(copy.deepcopy(m), "cluster.yaml") for m in manifests])


def planned(snapshot: Snapshot) -> tuple[list[Placement], list[Any]]:
    config = Configuration()
    profile = config.profile(None)
    result = make_plan(snapshot, config, profile, SolverSettings(backend="cpsat", time_limit=10, workers=1, seed=0))
    placements = list(result.plan.placements)
    return placements, verify_plan(snapshot, placements, config, profile)


SHRINKING = pod("shrinking", statuses=[status_of("app", actuated="8", allocated="8")], conditions=[IN_PROGRESS])
"""Spec 2 CPUs, the kubelet still holding 8, on the 16-CPU n1."""
REFUSED = pod("refused", containers=[container("app", "18")], statuses=[status_of("app", actuated="2", allocated="2")],
              conditions=[resize_pending("Infeasible")])
"""Spec 18 CPUs on the 16-CPU n1, Infeasible: the container runs with 2."""


def test_no_plan_places_a_pod_into_room_the_kubelet_still_holds() -> None:
    snapshot = snapshot_of(node("n1", "16"), SHRINKING, pending("big", "10"))
    placements, violations = planned(snapshot)
    assert placements == [] and violations == []
    assert emulate(snapshot).placements == ()
    # the verifier refuses the plan that counts the pod at its spec
    refused = verify_plan(snapshot, [Placement("default", "big", "n1")], Configuration(), Configuration().profile(None))
    assert [v.rule for v in refused] == ["NodeResourcesFit"], refused
    assert "cpu" in refused[0].detail


def test_an_infeasible_resize_leaves_the_room_its_spec_does_not_take() -> None:
    snapshot = snapshot_of(node("n1", "16"), REFUSED, *(pending(f"p{i}", "4") for i in range(3)))
    placements, violations = planned(snapshot)
    assert sorted(p.name for p in placements) == ["p0", "p1", "p2"] and violations == []
    assert len(emulate(snapshot).placements) == 3


@pytest.mark.parametrize("manifest", [SHRINKING, REFUSED], ids=["in-progress", "infeasible"])
def test_rebalance_does_not_move_a_pod_in_the_middle_of_a_resize(manifest: Manifest) -> None:
    """Made again elsewhere it would ask its spec, not what its node holds for it now."""
    owned = copy.deepcopy(manifest)
    owned["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}]
    assert exclusion(parse_pod(owned), facts_of(owned), Rules()) == RESIZING
    settled = pod(statuses=[status_of("app", actuated="2", allocated="2")])
    settled["metadata"]["ownerReferences"] = owned["metadata"]["ownerReferences"]
    assert exclusion(parse_pod(settled), facts_of(settled), Rules()) == ""

def test_serve_and_simulate_follow_the_kubelet_through_the_store() -> None:
    """``serve``'s informer store (``simulate``'s world keeps its pods in one too) counts a bound
    pod from its latest status: 8 CPUs while the kubelet holds them, 2 once the resize is done."""
    store = Store()
    store.apply("pods", ADDED, copy.deepcopy(SHRINKING))
    assert store.typed("pods", "default/shrinking").requests["cpu"] == 8000
    done = pod("shrinking", statuses=[status_of("app", actuated="2", allocated="2")])
    store.apply("pods", MODIFIED, done)
    assert store.typed("pods", "default/shrinking").requests["cpu"] == 2000
