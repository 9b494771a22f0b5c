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
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import controlplane as cp
from .test_bind_e2e import OWNER_LABEL, SOLVER_ARGS, assert_exit, bind_report, cli, kwok_nodes, pod_manifest, pod_nodes
from .test_dra_e2e import settled
from .test_serve_e2e import running, service

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Layout:
    """One scenario: nodes (suffix -> kwok node arguments), PVs (name -> capacity and the node
    suffixes its node affinity allows), and a StatefulSet of ``replicas`` pods of ``pod_cpu`` with
    one claim per volumeClaimTemplate (template -> requested size), all of one StorageClass."""

    nodes: dict[str, dict[str, str]]
    volumes: dict[str, tuple[str, tuple[str, ...]]]
    claims: dict[str, str]
    replicas: int
    pod_cpu: str = "100m"


TRAP = Layout(nodes={"a": {"cpu": "2900m", "memory": "16Gi"}, "b": {"cpu": "1600m", "memory": "16Gi"}},
              volumes={"a-local": ("2Gi", ("a",)), "shared": ("1Gi", ("a", "b"))},
              claims={"data": "1Gi"}, replicas=2, pod_cpu="1500m")
"""Each node has room for one pod; ``a`` has more CPU left after it than ``b``."""
TWO_CLAIMS = Layout(nodes={n: {"cpu": "8", "memory": "16Gi"} for n in ("x", "y", "z")},
                    volumes={**{f"{n}-{size.lower()}": (size, (n,)) for n in ("x", "y") for size in ("1Gi", "2Gi",
                                                                                                    "5Gi", "10Gi")},
                             "z-1gi": ("1Gi", ("z",)), "z-3gi": ("3Gi", ("z",))},
                    claims={"data": "1Gi", "logs": "5Gi"}, replicas=5)
"""Two claims per pod of one class: ``x`` and ``y`` each hold PVs for two pods if the 1Gi claims
take the small PVs; ``z`` has none big enough for a 5Gi claim. Four of the five pods fit."""


def local_volume(name: str, storage_class: str, capacity: str, nodes: Sequence[str]) -> dict[str, Any]:
    """A static local PV usable on ``nodes`` only."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": capacity}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": storage_class,
                     "local": {"path": f"/mnt/{name}"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": HOSTNAME, "operator": "In", "values": list(nodes)}]}]}}}}


def stateful_set(name: str, namespace: str, scheduler: str, side: str, storage_class: str,
                 layout: Layout) -> dict[str, Any]:
    """The layout's pods, created at once (Parallel), each with a claim per volumeClaimTemplate."""
    pod = pod_manifest(name, namespace, cpu=layout.pod_cpu, scheduler=scheduler)
    pod["spec"]["nodeSelector"] = {OWNER_LABEL: namespace, "side": side}
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": t, "mountPath": f"/{t}"} for t in layout.claims]
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": layout.replicas, "podManagementPolicy": "Parallel", "serviceName": name,
                     "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod["spec"]},
                     "volumeClaimTemplates": [{"metadata": {"name": template}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                         "resources": {"requests": {"storage": size}}}} for template, size in layout.claims.items()]}}


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


def pod_names(side: str, layout: Layout) -> list[str]:
    return [f"db-{side}-{i}" for i in range(layout.replicas)]


@contextlib.contextmanager
def scenario(admin_api: client.ApiClient, namespace: str, side: str, scheduler: str,
             layout: Layout) -> Iterator[dict[str, str]]:
    """The nodes, the StorageClass, the PVs and the StatefulSet of one run, all named for ``side``;
    yields node suffix -> node name. Everything is deleted afterwards, claims and volumes included,
    so that the next run starts on an emptied cluster."""
    core, apps, storage = client.CoreV1Api(admin_api), client.AppsV1Api(admin_api), client.StorageV1Api(admin_api)
    storage_class = f"local-wffc-{side}-{suffix(namespace)}"
    specs = {f"{side}-{n}": {**spec, "labels": {"side": side}} for n, spec in layout.nodes.items()}
    volumes = {f"{side}-{name}-{suffix(namespace)}": (capacity, [f"{namespace}-{side}-{n}" for n in where])
               for name, (capacity, where) in layout.volumes.items()}
    name, pods = f"db-{side}", pod_names(side, layout)
    with kwok_nodes(core, namespace, specs) as nodes:
        try:
            storage.create_storage_class({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                          "metadata": {"name": storage_class},
                                          "provisioner": "kubernetes.io/no-provisioner",
                                          "volumeBindingMode": "WaitForFirstConsumer"})
            for volume, (capacity, where) in volumes.items():
                core.create_persistent_volume(local_volume(volume, storage_class, capacity, where))
            apps.create_namespaced_stateful_set(namespace, stateful_set(name, namespace, scheduler, side,
                                                                        storage_class, layout))
            cp.wait_for(lambda: all(not gone(core.read_namespaced_pod, p, namespace) for p in pods), 30,
                        f"pods of StatefulSet {name}")
            yield dict(zip(layout.nodes, nodes, strict=True))
        finally:
            with contextlib.suppress(ApiException):
                apps.delete_namespaced_stateful_set(name, namespace, propagation_policy="Foreground")
            for pod in pods:
                with contextlib.suppress(ApiException):
                    core.delete_namespaced_pod(pod, namespace, grace_period_seconds=0)
            for pod in pods:
                for template in layout.claims:
                    with contextlib.suppress(ApiException):
                        core.delete_namespaced_persistent_volume_claim(f"{template}-{pod}", namespace)
            for volume in volumes:
                with contextlib.suppress(ApiException):
                    core.delete_persistent_volume(volume)
            with contextlib.suppress(ApiException):
                storage.delete_storage_class(storage_class)
            cp.wait_for(lambda: all(gone(core.read_persistent_volume, v) for v in volumes), 60,
                        f"the volumes of side {side} deleted")


def claim_bindings(core: client.CoreV1Api, namespace: str, side: str,
                   layout: Layout) -> dict[str, list[tuple[str, str]]]:
    """Pod of ``side`` -> (phase, the PV it is bound to) of each of its claims, in template order."""
    return {pod: [(claim.status.phase or "", claim.spec.volume_name or "")
                  for claim in (core.read_namespaced_persistent_volume_claim(f"{t}-{pod}", namespace)
                                for t in layout.claims)]
            for pod in pod_names(side, layout)}


def allowed_nodes(core: client.CoreV1Api, volume: str) -> set[str]:
    """The hostnames a PV's node affinity allows (the only shape this test writes)."""
    terms = core.read_persistent_volume(volume).spec.node_affinity.required.node_selector_terms
    return {value for term in terms for e in term.match_expressions if e.key == HOSTNAME for value in e.values or []}


def assert_volumes_hold(core: client.CoreV1Api, namespace: str, side: str, layout: Layout, bound: set[str]) -> None:
    """Every claim of a bound pod is Bound to a PV whose node affinity holds on the pod's node, no PV
    twice; no claim of a pod left pending is bound."""
    where = pod_nodes(core, namespace)
    cp.wait_for(lambda: all(phase == "Bound" for p in bound
                            for phase, _ in claim_bindings(core, namespace, side, layout)[p]), 30,
                f"the claims of side {side}'s bound pods Bound")
    bindings = claim_bindings(core, namespace, side, layout)
    for pod, claims in bindings.items():
        for phase, volume in claims:
            if pod in bound:
                assert phase == "Bound" and where[pod] in allowed_nodes(core, volume), (pod, where[pod], volume)
            else:
                assert (phase, volume) == ("Pending", ""), (pod, phase, volume)
    volumes = [volume for p in bound for _, volume in bindings[p]]
    assert len(volumes) == len(set(volumes))


def bound_pods(core: client.CoreV1Api, namespace: str, side: str) -> set[str]:
    return {p for p, node in pod_nodes(core, namespace).items() if node and p.startswith(f"db-{side}-")}


def side_by_side(control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str,
                 layout: Layout) -> tuple[set[str], set[str]]:
    """The layout placed by the kube-scheduler, then (the cluster emptied) by `kubeplace bind`
    (a server dry run first, which writes nothing); the pods each bound. The API server holds
    every PV binding of both: checked by :func:`assert_volumes_hold`."""
    core = client.CoreV1Api(admin_api)
    with scenario(admin_api, namespace, "k", "default-scheduler", layout), control_plane.start_scheduler():
        for pod in pod_names("k", layout):
            cp.wait_for(functools.partial(settled, core, namespace, pod), 60, f"{pod} bound or unschedulable")
        by_scheduler = bound_pods(core, namespace, "k")
        assert_volumes_hold(core, namespace, "k", layout, by_scheduler)
        if layout == TRAP:  # the first pod on the node with more free CPU, its claim given the smallest PV
            assert {(pod_nodes(core, namespace)[p], claim_bindings(core, namespace, "k", layout)[p][0][1])
                    for p in by_scheduler} == {(f"{namespace}-k-a", f"k-shared-{suffix(namespace)}")}

    with scenario(admin_api, namespace, "p", "kubeplace", layout):
        kubeconfig = str(control_plane.admin_kubeconfig)
        dry = cli("bind", "--kubeconfig", kubeconfig, "--yes", "-n", namespace, "--dry-run=server", "-o", "json",
                  *SOLVER_ARGS)
        assert_exit(dry, 0)
        dry_bound = {n for n, row in bind_report(dry).items() if row["outcome"] == "bound"}
        assert {c for cs in claim_bindings(core, namespace, "p", layout).values() for c in cs} == {("Pending", "")}
        assert not bound_pods(core, namespace, "p")
        result = cli("bind", "--kubeconfig", kubeconfig, "--yes", "-n", namespace, "-o", "json", *SOLVER_ARGS)
        assert_exit(result, 0)
        by_kubeplace = {n for n, row in bind_report(result).items() if row["outcome"] == "bound"}
        assert by_kubeplace == bound_pods(core, namespace, "p") == dry_bound
        assert_volumes_hold(core, namespace, "p", layout, by_kubeplace)
    print(f"volumes: kube-scheduler bound {len(by_scheduler)} of {layout.replicas} {sorted(by_scheduler)}, "
          f"kubeplace {len(by_kubeplace)} of {layout.replicas} {sorted(by_kubeplace)}")
    assert len(by_kubeplace) >= len(by_scheduler)
    return by_scheduler, by_kubeplace


def test_a_stateful_set_side_by_side_with_the_kube_scheduler(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """TRAP: the kube-scheduler binds one pod of the two; kubeplace binds both, each claim Bound to
    a PV whose node affinity holds on the pod's node."""
    by_scheduler, by_kubeplace = side_by_side(control_plane, admin_api, namespace, TRAP)
    assert len(by_scheduler) == 1 and by_kubeplace == set(pod_names("p", TRAP))


def test_two_claims_per_pod_side_by_side_with_the_kube_scheduler(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """TWO_CLAIMS: both bind the four pods that fit (the kube-scheduler's smallest fitting PV per claim
    is right here), no 1Gi claim takes a PV a 5Gi claim needed; the fifth pod waits with its claims
    unbound."""
    by_scheduler, by_kubeplace = side_by_side(control_plane, admin_api, namespace, TWO_CLAIMS)
    assert len(by_scheduler) == len(by_kubeplace) == 4


def test_serve_binds_the_trap_whole(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """TRAP under `kubeplace serve`, started once the StatefulSet's pods exist: both pods bound, their
    claims Bound to PVs whose node affinity holds on their nodes (serve binds a pod in a later cycle,
    once the PV controller has bound its claims)."""
    core = client.CoreV1Api(admin_api)
    with scenario(admin_api, namespace, "s", "kubeplace", TRAP):
        s = service(str(control_plane.admin_kubeconfig), namespace, "volumes")
        with running(s):
            cp.wait_for(lambda: bound_pods(core, namespace, "s") == set(pod_names("s", TRAP)), 60,
                        "both pods bound by serve")
        assert_volumes_hold(core, namespace, "s", TRAP, bound_pods(core, namespace, "s"))
        print(f"volumes under serve: {len(bound_pods(core, namespace, 's'))} of {TRAP.replicas} bound")
