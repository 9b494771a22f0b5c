"""Persistent volumes on the real control plane, side by side with the kube-scheduler: a
WaitForFirstConsumer StorageClass (kubernetes.io/no-provisioner), static local PVs with node affinity
on kwok nodes, and a StatefulSet whose volumeClaimTemplates make the claims (the controller manager's
statefulset controller creates them, and its PV controller completes the bindings written before
the pods are bound). The same scenario is placed twice, each time on nodes and volumes made for it
and removed afterwards: once by the real kube-scheduler, once by `kubeplace bind`.

The scenario is one the kube-scheduler, one pod at a time, gets wrong: node ``a`` (room for one pod)
holds a 2Gi local PV and a 1Gi PV that node ``b`` (room for one pod, less free CPU) can use too. The
kube-scheduler puts the first pod on ``a`` (more free CPU) and gives its 1Gi claim the smallest PV
that fits, the shared one; the second pod then finds no PV on ``b`` and waits. kubeplace places both
(the 2Gi PV on ``a``, the shared one on ``b``)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import controlplane as cp
from .test_bind_e2e import OWNER_LABEL, SOLVER_ARGS, assert_exit, bind_report, cli, kwok_nodes, pod_manifest, pod_nodes
from .test_dra_e2e import settled

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

HOSTNAME = "kubernetes.io/hostname"
REPLICAS = 2
#: Each node has room for one pod of this request; ``a`` has more CPU left after it than ``b``.
POD_CPU = "1500m"
NODES = {"a": {"cpu": "2900m", "memory": "16Gi"}, "b": {"cpu": "1600m", "memory": "16Gi"}}
#: PV -> (capacity, the nodes its node affinity allows).
VOLUMES = {"a-local": ("2Gi", ("a",)), "shared": ("1Gi", ("a", "b"))}
CLAIM_SIZE = "1Gi"


def local_volume(name: str, storage_class: str, capacity: str, nodes: Sequence[str]) -> dict[str, Any]:
    """A static local PV usable on ``nodes`` only."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": capacity}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": storage_class,
                     "local": {"path": f"/mnt/{name}"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": HOSTNAME, "operator": "In", "values": list(nodes)}]}]}}}}


def stateful_set(name: str, namespace: str, scheduler: str, side: str, storage_class: str) -> dict[str, Any]:
    """REPLICAS pods created at once (Parallel), each with a claim from the template ``data``."""
    pod = pod_manifest(name, namespace, cpu=POD_CPU, scheduler=scheduler)
    pod["spec"]["nodeSelector"] = {OWNER_LABEL: namespace, "side": side}
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": REPLICAS, "podManagementPolicy": "Parallel", "serviceName": name,
                     "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod["spec"]},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                         "resources": {"requests": {"storage": CLAIM_SIZE}}}}]}}


def suffix(namespace: str) -> str:
    """Names the test's cluster-scoped objects (StorageClass, PVs) apart from other tests'."""
    return hashlib.sha256(namespace.encode()).hexdigest()[:8]


def gone(read: Any, *args: str) -> bool:
    try:
        read(*args)
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


@contextlib.contextmanager
def scenario(admin_api: client.ApiClient, namespace: str, side: str, scheduler: str) -> Iterator[dict[str, str]]:
    """The nodes, the StorageClass, the PVs and the StatefulSet of one run, all named for ``side``;
    yields node suffix -> node name. Everything is deleted afterwards, claims and volumes included,
    so that the next run starts on an emptied cluster."""
    core, apps, storage = client.CoreV1Api(admin_api), client.AppsV1Api(admin_api), client.StorageV1Api(admin_api)
    storage_class = f"local-wffc-{side}-{suffix(namespace)}"
    specs = {f"{side}-{n}": {**spec, "labels": {"side": side}} for n, spec in NODES.items()}
    volumes = {f"{side}-{name}-{suffix(namespace)}": (capacity, [f"{namespace}-{side}-{n}" for n in where])
               for name, (capacity, where) in VOLUMES.items()}
    name = f"db-{side}"
    with kwok_nodes(core, namespace, specs) as nodes:
        try:
            storage.create_storage_class({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                          "metadata": {"name": storage_class},
                                          "provisioner": "kubernetes.io/no-provisioner",
                                          "volumeBindingMode": "WaitForFirstConsumer"})
            for volume, (capacity, where) in volumes.items():
                core.create_persistent_volume(local_volume(volume, storage_class, capacity, where))
            apps.create_namespaced_stateful_set(namespace, stateful_set(name, namespace, scheduler, side,
                                                                        storage_class))
            pods = [f"{name}-{i}" for i in range(REPLICAS)]
            cp.wait_for(lambda: all(not gone(core.read_namespaced_pod, p, namespace) for p in pods), 30,
                        f"pods of StatefulSet {name}")
            yield dict(zip(NODES, nodes, strict=True))
        finally:
            with contextlib.suppress(ApiException):
                apps.delete_namespaced_stateful_set(name, namespace, propagation_policy="Foreground")
            for i in range(REPLICAS):
                with contextlib.suppress(ApiException):
                    core.delete_namespaced_pod(f"{name}-{i}", namespace, grace_period_seconds=0)
            for i in range(REPLICAS):
                with contextlib.suppress(ApiException):
                    core.delete_namespaced_persistent_volume_claim(f"data-{name}-{i}", namespace)
            for volume in volumes:
                with contextlib.suppress(ApiException):
                    core.delete_persistent_volume(volume)
            with contextlib.suppress(ApiException):
                storage.delete_storage_class(storage_class)
            cp.wait_for(lambda: all(gone(core.read_persistent_volume, v) for v in volumes), 60,
                        f"the volumes of side {side} deleted")


def claim_bindings(core: client.CoreV1Api, namespace: str, side: str) -> dict[str, tuple[str, str]]:
    """Pod of ``side`` -> (its claim's phase, the PV it is bound to)."""
    out = {}
    for i in range(REPLICAS):
        claim = core.read_namespaced_persistent_volume_claim(f"data-db-{side}-{i}", namespace)
        out[f"db-{side}-{i}"] = (claim.status.phase or "", claim.spec.volume_name or "")
    return out


def allowed_nodes(core: client.CoreV1Api, volume: str) -> set[str]:
    """The hostnames a PV's node affinity allows (the only shape this test writes)."""
    terms = core.read_persistent_volume(volume).spec.node_affinity.required.node_selector_terms
    return {value for term in terms for e in term.match_expressions if e.key == HOSTNAME for value in e.values or []}


def assert_volumes_hold(core: client.CoreV1Api, namespace: str, side: str, bound: set[str]) -> None:
    """Every bound pod's claim is Bound to a PV whose node affinity holds on the pod's node, no PV
    twice; every claim of a pod left pending is not bound."""
    where = pod_nodes(core, namespace)
    cp.wait_for(lambda: all(claim_bindings(core, namespace, side)[p][0] == "Bound" for p in bound), 30,
                f"the claims of side {side}'s bound pods Bound")
    bindings = claim_bindings(core, namespace, side)
    for pod, (phase, volume) in bindings.items():
        if pod in bound:
            assert phase == "Bound" and where[pod] in allowed_nodes(core, volume), (pod, where[pod], volume)
        else:
            assert (phase, volume) == ("Pending", ""), (pod, phase, volume)
    volumes = [bindings[p][1] for p in bound]
    assert len(volumes) == len(set(volumes))


def bound_pods(core: client.CoreV1Api, namespace: str, side: str) -> set[str]:
    return {p for p, node in pod_nodes(core, namespace).items() if node and p.startswith(f"db-{side}-")}


def test_a_stateful_set_side_by_side_with_the_kube_scheduler(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """The kube-scheduler binds one pod of the two; kubeplace binds both, each claim Bound to a PV
    whose node affinity holds on the pod's node."""
    core = client.CoreV1Api(admin_api)
    with scenario(admin_api, namespace, "k", "default-scheduler"), control_plane.start_scheduler():
        for pod in (f"db-k-{i}" for i in range(REPLICAS)):
            cp.wait_for(functools.partial(settled, core, namespace, pod), 60, f"{pod} bound or unschedulable")
        by_scheduler = bound_pods(core, namespace, "k")
        assert_volumes_hold(core, namespace, "k", by_scheduler)
        # the trap: the first pod on the node with more free CPU, its claim given the smallest PV that fits
        assert {(pod_nodes(core, namespace)[p], claim_bindings(core, namespace, "k")[p][1]) for p in by_scheduler} \
            == {(f"{namespace}-k-a", f"k-shared-{suffix(namespace)}")}

    with scenario(admin_api, namespace, "p", "kubeplace") as nodes:
        dry = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--yes", "-n", namespace,
                  "--dry-run=server", "-o", "json", *SOLVER_ARGS)
        assert_exit(dry, 0)
        assert sum(row["outcome"] == "bound" for row in bind_report(dry).values()) == REPLICAS
        assert set(claim_bindings(core, namespace, "p").values()) == {("Pending", "")}
        assert not bound_pods(core, namespace, "p")
        result = cli("bind", "--kubeconfig", str(control_plane.admin_kubeconfig), "--yes", "-n", namespace,
                     "-o", "json", *SOLVER_ARGS)
        assert_exit(result, 0)
        by_kubeplace = {n for n, row in bind_report(result).items() if row["outcome"] == "bound"}
        assert by_kubeplace == bound_pods(core, namespace, "p") == {f"db-p-{i}" for i in range(REPLICAS)}
        assert_volumes_hold(core, namespace, "p", by_kubeplace)
        assert set(pod_nodes(core, namespace)[p] for p in by_kubeplace) == set(nodes.values())

    print(f"volumes: kube-scheduler bound {len(by_scheduler)} of {REPLICAS} {sorted(by_scheduler)}, "
          f"kubeplace {len(by_kubeplace)} of {REPLICAS} {sorted(by_kubeplace)}")
    assert len(by_kubeplace) > len(by_scheduler)

