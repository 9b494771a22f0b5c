"""In-place pod resize against the real kube-scheduler: a running pod counts what its status says.

A pod runs on a kwok node of 16 CPUs; it is resized through the ``resize`` subresource, and what a
kubelet would report is written through the ``status`` subresource (before the resize too: the API
server resizes only a pod whose running containers report ``resources``)
(``status.containerStatuses[].resources`` and ``allocatedResources``, the conditions
``PodResizeInProgress`` / ``PodResizePending``). kwok's ``pod-ready`` stage only touches a pod
that is Pending or not Ready, so once it has made the pod Running and Ready it leaves the status
written here alone (checked: the status is read back before anything is scheduled).

- spec lowered from 8 to 2 CPUs, the kubelet still holding 8: a pending pod of 10 CPUs fits only
  if the status is ignored; the kube-scheduler refuses it, and so does kubeplace (its plan leaves
  the pod out, its verifier refuses the placement). Once the kubelet reports 2, both take it.
- spec raised from 2 to 18 CPUs, Infeasible, the container running with 2: three pods of 4 CPUs
  fit beside it; the kube-scheduler binds all three, and kubeplace places all three. (The API
  server refuses a resize beyond the node's allocatable, so the node has 20 CPUs when it is asked
  and 16 when the kubelet finds it Infeasible, as after a kubelet restart with more reserved.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from kubernetes import client

from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Placement
from kubeplace_bench.controlplane import ApiHttp

from . import controlplane as cp
from .test_bind_e2e import OWNER_LABEL, SCHEDULER, create_pods, kwok_nodes, pod_manifest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

DEFAULT_SCHEDULER = "default-scheduler"
OPTIONS = SolverSettings(backend="cpsat", time_limit=5, workers=1, seed=0)


@pytest.fixture(scope="module")
def scheduler(control_plane: cp.ControlPlane) -> Iterator[None]:
    """The real kube-scheduler, default profile."""
    with control_plane.start_scheduler():
        yield


@pytest.fixture
def api(control_plane: cp.ControlPlane) -> Iterator[ApiHttp]:
    with ApiHttp(control_plane) as http:
        yield http


def pod_path(namespace: str, name: str, subresource: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}" + (f"/{subresource}" if subresource else "")


def start_running(core: client.CoreV1Api, api: ApiHttp, namespace: str, name: str, node: str, cpu: str,
                  spec: Mapping[str, Any] | None = None) -> None:
    """A pod bound to ``node`` at creation (its app container asking ``cpu``, more of its spec in
    ``spec``), once kwok reports it Running and Ready."""
    create_pods(core, namespace, [pod_manifest(name, namespace, cpu=cpu, node=node, scheduler=DEFAULT_SCHEDULER,
                                               spec=spec)])

    def ready() -> bool:
        status = api.request("GET", pod_path(namespace, name)).get("status") or {}
        return status.get("phase") == "Running" and any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])

    cp.wait_for(ready, 30, f"pod {name} Running and Ready")


def resize(api: ApiHttp, namespace: str, name: str, cpu: str) -> None:
    """The container's CPU request changed through the ``resize`` subresource, as ``kubectl
    patch --subresource resize`` does."""
    pod = api.request("GET", pod_path(namespace, name))
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    api.request("PUT", pod_path(namespace, name, "resize"), pod)


def report(api: ApiHttp, namespace: str, name: str, cpu: str | Mapping[str, str],
           condition: Mapping[str, str] | None, pod_level: str = "") -> None:
    """What the kubelet would write: each container (by name, init containers too, or every one
    for a single ``cpu``) runs with and was admitted with that many CPUs, the pod as a whole with
    ``pod_level`` if given; the resize conditions replaced by ``condition``."""
    pod = api.request("GET", pod_path(namespace, name))
    status = pod["status"]
    memory = "64Mi"  # every container's memory request here
    cpus = cpu if isinstance(cpu, Mapping) else {e["name"]: cpu for e in status["containerStatuses"]}
    for entry in [*status["containerStatuses"], *(status.get("initContainerStatuses") or [])]:
        if entry["name"] in cpus:
            entry["resources"] = {"requests": {"cpu": cpus[entry["name"]], "memory": memory}}
            entry["allocatedResources"] = {"cpu": cpus[entry["name"]], "memory": memory}
    if pod_level:
        status["resources"] = {"requests": {"cpu": pod_level}}
        status["allocatedResources"] = {"cpu": pod_level}
    status["conditions"] = [c for c in status.get("conditions") or []
                            if c.get("type") not in ("PodResizePending", "PodResizeInProgress")]
    if condition is not None:
        status["conditions"].append({"status": "True", **condition})
    api.request("PUT", pod_path(namespace, name, "status"), pod)

    def kept() -> bool:
        status = api.request("GET", pod_path(namespace, name))["status"]
        reported = {e["name"]: (e.get("resources") or {}).get("requests", {}).get("cpu")
                    for e in [*status.get("containerStatuses", []), *status.get("initContainerStatuses", [])]}
        pod_kept = not pod_level or (status.get("resources") or {}).get("requests", {}).get("cpu") == pod_level
        return pod_kept and all(reported.get(container) == value for container, value in cpus.items())

    cp.wait_for(kept, 10, f"pod {name} reporting {cpus} CPUs")


def scheduled_condition(api: ApiHttp, namespace: str, name: str) -> Mapping[str, Any]:
    pod = api.request("GET", pod_path(namespace, name))
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {})


def wait_refused(api: ApiHttp, namespace: str, name: str) -> str:
    """The kube-scheduler's message once it found no node for the pod."""
    cp.wait_for(lambda: scheduled_condition(api, namespace, name).get("reason") == "Unschedulable", 30,
                f"the kube-scheduler to refuse {name}")
    return str(scheduled_condition(api, namespace, name).get("message"))


def wait_bound(api: ApiHttp, namespace: str, names: list[str], node: str) -> None:
    def bound() -> bool:
        return all(api.request("GET", pod_path(namespace, n))["spec"].get("nodeName") == node for n in names)

    cp.wait_for(bound, 30, f"the kube-scheduler to bind {', '.join(names)} to {node}")


def kubeplace_plan(control_plane: cp.ControlPlane, namespace: str) -> tuple[set[str], list[Any], Any]:
    """The pods kubeplace's plan of the live cluster places, the verifier's findings on it, and the snapshot."""
    snapshot = load_live_snapshot(connect(str(control_plane.admin_kubeconfig)), scheduler_name=SCHEDULER,
                                  namespaces={namespace})
    config = Configuration()
    profile = config.profile(None)
    plan = make_plan(snapshot, config, profile, OPTIONS).plan
    return {p.name for p in plan.placements}, verify_plan(snapshot, plan.placements, config, profile), snapshot


def test_room_the_kubelet_still_holds_is_refused_by_both(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, api: ApiHttp, namespace: str, scheduler: None
) -> None:
    core = client.CoreV1Api(admin_api)
    with kwok_nodes(core, namespace, {"n": {"cpu": "16"}}) as (node,):
        start_running(core, api, namespace, "shrinking", node, cpu="8")
        report(api, namespace, "shrinking", "8", None)  # the API server resizes only a pod whose node reports it
        resize(api, namespace, "shrinking", cpu="2")
        report(api, namespace, "shrinking", "8", {"type": "PodResizeInProgress"})

        create_pods(core, namespace, [pod_manifest("big", namespace, cpu="10", scheduler=DEFAULT_SCHEDULER),
                                      pod_manifest("big-kp", namespace, cpu="10")])
        assert "Insufficient cpu" in wait_refused(api, namespace, "big")
        placed, violations, snapshot = kubeplace_plan(control_plane, namespace)
        assert placed == set() and violations == []
        config = Configuration()
        refused = verify_plan(snapshot, [Placement(namespace, "big-kp", node)], config, config.profile(None))
        assert [v.rule for v in refused] == ["NodeResourcesFit"], refused

        # the resize done, the kubelet reports 2: both take the pod (the status was what refused it)
        report(api, namespace, "shrinking", "2", None)
        wait_bound(api, namespace, ["big"], node)
        core.delete_namespaced_pod("big", namespace, grace_period_seconds=0)
        cp.wait_for(lambda: "big" not in {p.metadata.name for p in core.list_namespaced_pod(namespace).items}, 30,
                    "pod big gone")
        placed, violations, _ = kubeplace_plan(control_plane, namespace)
        assert placed == {"big-kp"} and violations == []


def test_an_infeasible_resize_leaves_the_room_it_does_not_take_to_both(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, api: ApiHttp, namespace: str, scheduler: None
) -> None:
    core = client.CoreV1Api(admin_api)
    with kwok_nodes(core, namespace, {"n": {"cpu": "20"}}) as (node,):
        start_running(core, api, namespace, "refused", node, cpu="2")
        report(api, namespace, "refused", "2", None)
        resize(api, namespace, "refused", cpu="18")  # admitted: within the node's 20 CPUs
        # the kubelet restarts with more reserved before it acts on the resize: 16 CPUs, Infeasible
        sixteen = {"cpu": "16"}
        api.request("PATCH", f"/api/v1/nodes/{node}/status", {"status": {"allocatable": sixteen, "capacity": sixteen}})
        report(api, namespace, "refused", "2", {"type": "PodResizePending", "reason": "Infeasible",
                                                "message": "Node didn't have enough capacity: cpu, requested: 18000, "
                                                           "capacity: 16000"})

        create_pods(core, namespace, [pod_manifest(f"kp-{i}", namespace, cpu="4") for i in range(3)])
        placed, violations, _ = kubeplace_plan(control_plane, namespace)
        assert placed == {"kp-0", "kp-1", "kp-2"} and violations == []

        names = [f"ks-{i}" for i in range(3)]
        create_pods(core, namespace, [pod_manifest(n, namespace, cpu="4", scheduler=DEFAULT_SCHEDULER) for n in names])
        wait_bound(api, namespace, names, node)


def on(node: str, namespace: str) -> dict[str, Any]:
    return {"nodeSelector": {OWNER_LABEL: namespace, "kubernetes.io/hostname": node}}


def test_sidecars_init_containers_and_pod_level_resources_count_alike(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, api: ApiHttp, namespace: str, scheduler: None
) -> None:
    """On ``a``: app 2, sidecar 1 reporting 4, a finished init container 1 reporting 9 -> 2 + 4 = 6
    (the init container's status does not count: with it, 9). On ``b``: pod-level 4 CPUs, the pod
    reporting 6 -> 6. Of 16 CPUs, a pod of 10 fits on each, one of 11 on neither."""
    core = client.CoreV1Api(admin_api)
    with kwok_nodes(core, namespace, {"a": {"cpu": "16"}, "b": {"cpu": "16"}}) as (a, b):
        init = [{"name": "setup", "image": "registry.invalid/setup:1", "resources": {"requests": {"cpu": "1"}}},
                {"name": "proxy", "image": "registry.invalid/proxy:1", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]
        start_running(core, api, namespace, "mixed", a, cpu="2", spec={"initContainers": init})
        report(api, namespace, "mixed", {"app": "2", "proxy": "4", "setup": "9"}, None)
        start_running(core, api, namespace, "pooled", b, cpu="1", spec={"resources": {"requests": {"cpu": "4"}}})
        report(api, namespace, "pooled", "1", None, pod_level="6")

        create_pods(core, namespace, [pod_manifest(f"ks-{n}-11", namespace, cpu="11", scheduler=DEFAULT_SCHEDULER,
                                                   spec=on(n, namespace)) for n in (a, b)])
        for n in (a, b):
            assert "Insufficient cpu" in wait_refused(api, namespace, f"ks-{n}-11")
        create_pods(core, namespace, [pod_manifest(f"kp-{n}-{cpu}", namespace, cpu=cpu, spec=on(n, namespace))
                                      for n in (a, b) for cpu in ("11", "10")])
        placed, violations, _ = kubeplace_plan(control_plane, namespace)
        assert placed == {f"kp-{a}-10", f"kp-{b}-10"} and violations == []
        for n in (a, b):
            create_pods(core, namespace, [pod_manifest(f"ks-{n}-10", namespace, cpu="10",
                                                       scheduler=DEFAULT_SCHEDULER, spec=on(n, namespace))])
            wait_bound(api, namespace, [f"ks-{n}-10"], n)
