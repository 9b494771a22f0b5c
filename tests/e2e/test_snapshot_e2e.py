"""A snapshot read from the real API equals the one read from the same objects dumped to a file.

The dump is what ``kubectl get nodes,pods,namespaces -A -o yaml`` prints (a ``kind: List`` of
the objects exactly as the API server returns them, admission defaults included), built here
from the raw API answers so no kubectl is needed.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubeplace.kube.files import load_snapshot
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.objects import Snapshot, SpecRule

from . import controlplane as cp
from .test_bind_e2e import SCHEDULER, create_pods, kwok_nodes, pod_manifest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


@pytest.fixture
def priority_class(admin_api: client.ApiClient) -> Iterator[str]:
    api = client.SchedulingV1Api(admin_api)
    name = f"e2e-batch-{secrets.token_hex(3)}"
    api.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=1000))
    try:
        yield name
    finally:
        try:
            api.delete_priority_class(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _raw_list(list_call: Any, kind: str) -> list[dict[str, Any]]:
    """Items of one list call as the API returns them, with the kind/apiVersion kubectl adds."""
    page = json.loads(list_call(_preload_content=False).data)
    return [{"apiVersion": page["apiVersion"], "kind": kind, **item} for item in page["items"]]


def _restricted(snapshot: Snapshot, namespace: str, nodes: set[str]) -> Snapshot:
    """Only this test's objects: others (kwok's, other tests') may come and go meanwhile."""
    return Snapshot(
        nodes=tuple(n for n in snapshot.nodes if n.name in nodes),
        pending=tuple(p for p in snapshot.pending if p.namespace == namespace),
        bound=tuple(p for p in snapshot.bound if p.namespace == namespace or p.node_name in nodes),
        namespace_labels={namespace: snapshot.namespace_labels[namespace]},
    )


def _pending_specs(namespace: str, priority_class: str) -> list[dict[str, Any]]:
    sidecar = {"name": "proxy", "image": "registry.invalid/proxy:1", "restartPolicy": "Always",
               "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}
    setup = {"name": "setup", "image": "registry.invalid/setup:1",
             "resources": {"requests": {"cpu": "2", "memory": "1.5Gi"}}}
    batch = pod_manifest("batch", namespace, cpu="500m", memory="500M", spec={
        "initContainers": [sidecar, setup],
        "priorityClassName": priority_class,
        "tolerations": [cp.KWOK_TOLERATION, {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    })  # fmt: skip
    batch["metadata"]["labels"] = {"app": "batch", "tenant": "team-a"}
    batch["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
    batch["spec"]["containers"].append(
        {"name": "logger", "image": "registry.invalid/log:1", "resources": {"requests": {"cpu": "0.5"}}}
    )
    expressions = [
        {"key": "zone", "operator": "In", "values": ["a", "b"]},
        {"key": "gen", "operator": "Gt", "values": ["2"]},
        {"key": "retiring", "operator": "DoesNotExist"},
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": expressions}, {"matchFields": [
                    {"key": "metadata.name", "operator": "NotIn", "values": ["nowhere"]}]}]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
            ],
        }
    }  # fmt: skip
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "batch"}}, "topologyKey": "kubernetes.io/hostname"}]}}  # fmt: skip
    return [
        batch,
        pod_manifest("affine", namespace, cpu="1", memory="2Gi", extended={"nvidia.com/gpu": "1"},
                     spec={"affinity": affinity}),
        pod_manifest("apart", namespace, spec={"affinity": anti}),
        pod_manifest("gated", namespace, spec={"schedulingGates": [{"name": "example.com/wait"}]}),
        pod_manifest("foreign", namespace, scheduler="default-scheduler"),
    ]  # fmt: skip


def test_live_snapshot_equals_the_file_snapshot_of_the_same_objects(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str, priority_class: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    core = client.CoreV1Api(admin_api)
    core.patch_namespace(namespace, {"metadata": {"labels": {"tenant": "team-a"}}})
    specs = {
        "a": {"cpu": "8", "memory": "16Gi", "labels": {"zone": "a", "gen": "3"}},
        "b": {"cpu": "16", "memory": "64Gi", "pods": "20", "labels": {"zone": "b", "gen": "4"},
              "extra": {"nvidia.com/gpu": "2", "example.com/fpga": "1"},
              "taints": [{"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"}]},
    }  # fmt: skip
    with kwok_nodes(core, namespace, specs) as (node_a, node_b):
        create_pods(core, namespace, [
            pod_manifest("running-a", namespace, cpu="1500m", memory="3Gi", node=node_a),
            pod_manifest("running-b", namespace, cpu="2", extended={"nvidia.com/gpu": "1"}, node=node_b),
            *_pending_specs(namespace, priority_class),
        ])  # fmt: skip
        running = ("running-a", "running-b")
        cp.wait_for(
            lambda: all(core.read_namespaced_pod(n, namespace).status.phase == "Running" for n in running),
            30, "bound pods Running",
        )  # fmt: skip

        dump = {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                *_raw_list(core.list_node, "Node"),
                *_raw_list(core.list_pod_for_all_namespaces, "Pod"),
                *_raw_list(core.list_namespace, "Namespace"),
            ],
        }
        path = tmp_path / "cluster.yaml"
        path.write_text(yaml.safe_dump(dump, sort_keys=False))
        live = load_live_snapshot(connect(str(control_plane.admin_kubeconfig)), scheduler_name=SCHEDULER,
                                  namespaces={namespace})  # fmt: skip
        from_file = load_snapshot([path], scheduler_name=SCHEDULER, namespaces={namespace})

        mine = {node_a, node_b}
        assert _restricted(live, namespace, mine) == _restricted(from_file, namespace, mine)

        # ... and what they agree on is what the objects say, admission defaults included.
        snap = _restricted(live, namespace, mine)
        nodes = {n.name: n for n in snap.nodes}
        assert nodes[node_b].allocatable["nvidia.com/gpu"] == 2
        assert nodes[node_b].allocatable["memory"] == 64 * 2**30
        assert [t.key for t in nodes[node_b].taints] == [cp.KWOK_NODE_ANNOTATION, "dedicated"]
        pending = {p.name: p for p in snap.pending}
        assert set(pending) == {"affine", "apart", "batch"}
        batch = pending["batch"]
        # max(app 1000m + sidecar 250m, setup 2000m + sidecar 250m) = 2250m; memory likewise
        assert batch.requests["cpu"] == 2250
        assert batch.requests["memory"] == 1536 * 2**20 + 64 * 2**20
        assert batch.priority == 1000  # from the PriorityClass, by the Priority admission plugin
        assert [h.port for h in batch.host_ports] == [8080]
        assert batch.uid and batch.scheduler_name == SCHEDULER
        assert pending["affine"].required_terms is not None and len(pending["affine"].required_terms) == 2
        assert pending["affine"].requests["nvidia.com/gpu"] == 1
        assert pending["apart"].spec_rules == {SpecRule.REQUIRED_POD_ANTI_AFFINITY}
        assert {p.name: p.node_name for p in snap.bound} == {"running-a": node_a, "running-b": node_b}
        assert snap.namespace_labels[namespace]["tenant"] == "team-a"
        assert live.source != from_file.source  # where each came from differs; the content does not
