"""`kubeplace bind` against the real API server: pods/binding, 409s, the uid precondition, dry run.

Pending pods carry ``schedulerName: kubeplace``; no scheduler of that name runs, so they stay
pending until kubeplace binds them. Every pod is confined to the test's own kwok nodes by a
node selector, so nodes of other tests can never receive them.

The helpers at the top are shared by the other ``test_*_e2e.py`` files of this directory.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubeplace.cli.main import main
from kubeplace.kube.gpu_conventions import KOORD_CORE
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.objects import Pod, Snapshot
from kubeplace.models.config_load import load_configuration
from kubeplace.models.gpu import DEVICE_ALLOCATED, allocated_devices
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.plan import Placement

from . import controlplane as cp

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

SCHEDULER = "kubeplace"
#: Every node a test makes carries this label with the test's namespace as value; its pods select it.
OWNER_LABEL = "kubeplace-e2e/owner"
#: Taints the node lifecycle controller sets until kwok reports the node Ready.
_STARTUP_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
#: Keeps `plan`/`bind` quick and deterministic; these problems are solved exactly well within it.
SOLVER_ARGS = ("--time-limit", "5", "--workers", "1", "--seed", "0")


# --------------------------------------------------------------------------- shared helpers


def node_name(namespace: str, suffix: str) -> str:
    return f"{namespace}-{suffix}"


@contextlib.contextmanager
def kwok_nodes(
    core: client.CoreV1Api, namespace: str, specs: Mapping[str, Mapping[str, Any]]
) -> Iterator[list[str]]:
    """Creates a kwok node per ``specs`` entry (suffix -> ``fake_node_manifest`` arguments plus
    ``extra``: more allocatable resources, ``taints``: more taints, ``annotations``: more annotations), waits until
    each is Ready without startup taints, and deletes them afterwards."""
    names: list[str] = []
    try:
        for suffix, spec in specs.items():
            spec = dict(spec)
            extra, taints = spec.pop("extra", {}), spec.pop("taints", [])
            labels = {OWNER_LABEL: namespace, **spec.pop("labels", {})}
            annotations = spec.pop("annotations", {})
            manifest = cp.fake_node_manifest(node_name(namespace, suffix), labels=labels, **spec)
            manifest["metadata"]["annotations"].update(annotations)
            manifest["status"]["capacity"].update(extra)  # capacity is allocatable in this manifest
            manifest["spec"]["taints"] += taints
            core.create_node(manifest)
            names.append(manifest["metadata"]["name"])
        for name in names:
            cp.wait_for(lambda name=name: _node_settled(core, name), 30, f"node {name} Ready, no startup taints")
        yield names
    finally:
        for name in names:
            with contextlib.suppress(ApiException):
                core.delete_node(name)


def _node_settled(core: client.CoreV1Api, name: str) -> bool:
    node = core.read_node(name)
    ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
    return ready and not any(t.key in _STARTUP_TAINTS for t in node.spec.taints or [])


def pod_manifest(
    name: str,
    namespace: str,
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    extended: Mapping[str, str] | None = None,
    node: str | None = None,
    scheduler: str = SCHEDULER,
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod confined to the test's nodes; ``node`` binds it at creation (``spec.nodeName``).
    Extended resources go in limits too (the API server requires it)."""
    requests = {"cpu": cpu, "memory": memory, **(extended or {})}
    body: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {
                "name": "app",
                "image": "registry.invalid/fake:1",
                "resources": {"requests": requests, "limits": dict(extended or {})},
            }
        ],
        "tolerations": [cp.KWOK_TOLERATION],
        "nodeSelector": {OWNER_LABEL: namespace},
        **(spec or {}),
    }
    if node:
        body["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": body}


def create_pods(core: client.CoreV1Api, namespace: str, manifests: Sequence[Mapping[str, Any]]) -> None:
    for manifest in manifests:
        core.create_namespaced_pod(namespace, manifest)


def pod_nodes(core: client.CoreV1Api, namespace: str) -> dict[str, str]:
    """Pod name -> spec.nodeName ("" while pending)."""
    return {p.metadata.name: p.spec.node_name or "" for p in core.list_namespaced_pod(namespace).items}


def cli(*args: str) -> Result:
    """Runs the `kubeplace` command in-process; the result keeps stdout and stderr apart."""
    return CliRunner().invoke(main, list(args))


def assert_exit(result: Result, code: int) -> None:
    """The exit code, and that the command ended through sys.exit (never an exception)."""
    detail = f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.exception is None or isinstance(result.exception, SystemExit), detail + repr(result.exception)
    assert result.exit_code == code, detail


def bind_report(result: Result) -> dict[str, dict[str, Any]]:
    """Pod name -> its row of `bind -o json`."""
    assert result.stdout.strip(), f"no report; stderr:\n{result.stderr}"
    report = json.loads(result.stdout)
    return {row["name"]: row for row in report["results"]}


def write_plan(tmp_path: Path, kubeconfig: Path, namespace: str) -> tuple[Path, dict[str, Any]]:
    """`kubeplace plan -o yaml` of the cluster (no SOURCE) into a file."""
    result = cli("plan", "--kubeconfig", str(kubeconfig), "-n", namespace, "-o", "yaml", *SOLVER_ARGS)
    assert_exit(result, 0)
    path = tmp_path / "plan.yaml"
    path.write_text(result.stdout)
    return path, yaml.safe_load(result.stdout)


def snapshot_of(kubeconfig: Path, namespace: str) -> Snapshot:
    return load_live_snapshot(connect(str(kubeconfig)), scheduler_name=SCHEDULER, namespaces={namespace})


# --------------------------------------------------------------------------- tests


def test_bind_places_every_pod_through_pods_binding(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """Binds CPU and GPU pods (whole GPUs and Koordinator shares): every pod ends on the node that
    `kubeplace plan` showed and the report names, GPU pods carry their devices (set through the
    Binding), and what is now in the cluster passes the independent verifier against the
    snapshot taken before."""
    core = client.CoreV1Api(admin_api)
    gpu = {"extra": {"nvidia.com/gpu": "4", KOORD_CORE: "400"}, "labels": {"pool": "gpu"}}
    specs = {"cpu-a": {"cpu": "4", "memory": "8Gi"}, "cpu-b": {"cpu": "4", "memory": "8Gi"}, "gpu": gpu}
    with kwok_nodes(core, namespace, specs) as (cpu_a, _cpu_b, gpu_node):
        create_pods(core, namespace, [
            pod_manifest("used", namespace, cpu="3", node=cpu_a),  # usage: cpu-a has 1 cpu left
            *(pod_manifest(f"web-{i}", namespace, cpu="1500m", memory="1Gi") for i in range(3)),
            pod_manifest("pinned", namespace, cpu="500m", spec={"affinity": _only_on(cpu_a)}),
            pod_manifest("train", namespace, extended={"nvidia.com/gpu": "2"}),
            pod_manifest("infer-0", namespace, extended={KOORD_CORE: "50"}),
            pod_manifest("infer-1", namespace, extended={KOORD_CORE: "50"}),
            pod_manifest("other-scheduler", namespace, scheduler="someone-else"),
        ])  # fmt: skip
        planned = {"web-0", "web-1", "web-2", "pinned", "train", "infer-0", "infer-1"}
        before = snapshot_of(control_plane.admin_kubeconfig, namespace)
        assert {p.name for p in before.pending} == planned
        _, plan = write_plan(tmp_path, control_plane.admin_kubeconfig, namespace)  # deterministic: --workers 1

        result = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--yes", "-n", namespace,
                     "-o", "json", *SOLVER_ARGS)

        assert_exit(result, 0)
        report = bind_report(result)
        assert set(report) == planned
        assert {row["outcome"] for row in report.values()} == {"bound"}
        nodes = pod_nodes(core, namespace)
        assert {name: nodes[name] for name in planned} == {name: row["node"] for name, row in report.items()}
        assert {p["name"]: p["node"] for p in plan["placements"]} == {name: nodes[name] for name in planned}
        assert nodes["other-scheduler"] == ""
        assert nodes["pinned"] == cpu_a
        assert {nodes["train"], nodes["infer-0"], nodes["infer-1"]} == {gpu_node}

        pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
        devices: dict[str, list[tuple[int, int]]] = {}
        for name in ("train", "infer-0", "infer-1"):
            annotations = pods[name].metadata.annotations or {}
            assert DEVICE_ALLOCATED in annotations, f"{name} has no {DEVICE_ALLOCATED}"
            devices[name] = _devices(annotations[DEVICE_ALLOCATED])
        assert [milli for _, milli in devices["train"]] == [1000, 1000]
        assert len({d for d, _ in devices["train"]}) == 2
        assert [milli for _, milli in devices["infer-0"] + devices["infer-1"]] == [500, 500]
        assert not {d for d, _ in devices["train"]} & {d for d, _ in devices["infer-0"] + devices["infer-1"]}
        assert all(DEVICE_ALLOCATED not in (pods[n].metadata.annotations or {}) for n in ("web-0", "pinned"))

        config = load_configuration(None)
        bound_as = [
            Placement(namespace, name, nodes[name], pods[name].metadata.uid,
                      tuple(d for d, _ in devices.get(name, [])))
            for name in sorted(planned)
        ]  # fmt: skip
        assert verify_plan(before, bound_as, config, config.profile(None)) == []


def _only_on(node: str) -> dict[str, Any]:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _devices(annotation: str) -> list[tuple[int, int]]:
    found = allocated_devices(Pod("ns", "pod", annotations={DEVICE_ALLOCATED: annotation}))
    assert found is not None, f"unreadable {DEVICE_ALLOCATED}: {annotation}"
    return sorted(found)


def test_pod_bound_by_someone_else_is_a_reported_conflict(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """A saved plan whose pod was bound by hand meanwhile: that pod is reported as a conflict,
    the others are bound, exit code 1."""
    core = client.CoreV1Api(admin_api)
    with kwok_nodes(core, namespace, {"a": {"cpu": "8"}, "b": {"cpu": "8"}}) as (node_a, node_b):
        create_pods(core, namespace, [pod_manifest(f"p-{i}", namespace, cpu="1") for i in range(4)])
        plan_file, plan = write_plan(tmp_path, control_plane.admin_kubeconfig, namespace)
        planned = {p["name"]: p["node"] for p in plan["placements"]}
        assert set(planned) == {"p-0", "p-1", "p-2", "p-3"}
        elsewhere = node_b if planned["p-1"] == node_a else node_a
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name="p-1"),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=elsewhere),
        )
        assert core.create_namespaced_binding(namespace, binding, _preload_content=False).status == 201

        result = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--plan", str(plan_file),
                     "--yes", "-n", namespace, "-o", "json")

        assert_exit(result, 1)
        report = bind_report(result)
        assert report["p-1"]["outcome"] == "conflict"
        assert "already bound" in report["p-1"]["message"] and elsewhere in report["p-1"]["message"]
        assert {name: row["outcome"] for name, row in report.items() if name != "p-1"} == {
            "p-0": "bound", "p-2": "bound", "p-3": "bound"
        }  # fmt: skip
        assert pod_nodes(core, namespace) == {**planned, "p-1": elsewhere}


def test_pod_bound_meanwhile_by_another_scheduler_gets_the_servers_409(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """When the other binding lands after kubeplace's snapshot, the API server's own 409 is what
    the report shows (the binder's path, not the pre-check)."""
    from kubeplace.kube.binder import Binding, Outcome, bind_all

    core = client.CoreV1Api(admin_api)
    with kwok_nodes(core, namespace, {"a": {"cpu": "8"}}) as (node_a,):
        create_pods(core, namespace, [pod_manifest(f"p-{i}", namespace) for i in range(2)])
        uids = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(namespace).items}
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name="p-0"),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node_a),
        )
        core.create_namespaced_binding(namespace, binding, _preload_content=False)

        cluster = connect(str(control_plane.admin_kubeconfig))
        results = bind_all(cluster, [Binding(namespace, n, uids[n], node_a) for n in ("p-0", "p-1")], dry_run=False)

        assert [r.outcome for r in results] == [Outcome.CONFLICT, Outcome.BOUND]
        assert "HTTP 409" in results[0].message and "already assigned" in results[0].message
        assert pod_nodes(core, namespace) == {"p-0": node_a, "p-1": node_a}


def test_recreated_pod_is_not_bound_by_a_stale_plan(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """A plan made for a pod since deleted and recreated under the same name is refused in full
    before anything is written (what is written before a pod, its claims and volumes, would
    name the new pod with the old uid): exit 2, one line naming the pod and both uids, no pod bound."""
    core = client.CoreV1Api(admin_api)
    with kwok_nodes(core, namespace, {"a": {"cpu": "8"}}):
        create_pods(core, namespace, [pod_manifest(f"p-{i}", namespace) for i in range(3)])
        plan_file, plan = write_plan(tmp_path, control_plane.admin_kubeconfig, namespace)
        old_uid = {p["name"]: p["uid"] for p in plan["placements"]}["p-2"]
        assert old_uid
        core.delete_namespaced_pod("p-2", namespace, grace_period_seconds=0)
        cp.wait_for(lambda: "p-2" not in pod_nodes(core, namespace), 30, "p-2 deleted")
        create_pods(core, namespace, [pod_manifest("p-2", namespace)])
        new_uid = core.read_namespaced_pod("p-2", namespace).metadata.uid
        assert new_uid != old_uid

        result = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--plan", str(plan_file),
                     "--yes", "-n", namespace, "-o", "json")

        assert_exit(result, 2)
        assert result.stdout == ""
        (line,) = [x for x in result.stderr.splitlines() if not x.startswith("warning: ")]
        assert line.startswith(f"error: {plan_file}: {namespace}/p-2: placements[")
        assert f"the plan was made for uid {old_uid}, the pod is now uid {new_uid}" in line
        assert set(pod_nodes(core, namespace).values()) == {""}


def test_server_dry_run_binds_nothing(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(admin_api)
    with kwok_nodes(core, namespace, {"a": {"cpu": "8"}}):
        create_pods(core, namespace, [pod_manifest(f"p-{i}", namespace) for i in range(3)])

        result = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--dry-run=server", "--yes",
                     "-n", namespace, *SOLVER_ARGS)

        assert_exit(result, 0)
        assert "3/3 bound (server dry run: nothing persisted)" in result.stdout
        assert pod_nodes(core, namespace) == {"p-0": "", "p-1": "", "p-2": ""}


def test_bind_without_yes_on_a_pipe_binds_nothing(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(admin_api)
    with kwok_nodes(core, namespace, {"a": {"cpu": "8"}}):
        create_pods(core, namespace, [pod_manifest("p-0", namespace)])

        result = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "-n", namespace, *SOLVER_ARGS)

        assert_exit(result, 1)
        assert "pass --yes" in result.stderr
        assert pod_nodes(core, namespace) == {"p-0": ""}
