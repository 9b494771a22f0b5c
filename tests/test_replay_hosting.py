"""How the kube-scheduler replay (tests/e2e) hosts a scenario's objects on the real control plane.

No control plane here: these check the manifests :func:`tests.e2e.hosting.host` makes, and that
every substitution is either exact for the kube-scheduler or refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.files import load_objects
from kubeplace_bench.controlplane_binaries import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE
from tests.e2e.hosting import REPLAY_GATE, UNSCHEDULABLE_TAINT, NotHostable, host
from tests.scenarios import load_scenario, plan_scenario, scenario_names


def node(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": "u", "labels": {"zone": "a"}},
            "spec": spec, "status": {"allocatable": {"cpu": "4", "pods": "10"}, "phase": "Running"}}


def pod(name: str, *, namespace: str = "default", status: str = "Pending", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": {"app": "x"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j"}]},
            "spec": {"containers": [{"name": "c", "image": "i"}], **spec}, "status": {"phase": status}}


def test_nodes_keep_labels_taints_cordon_and_allocatable_and_are_kwoks() -> None:
    taints = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    hosted = host([node("n1", taints=taints, unschedulable=True, podCIDR="10.0.0.0/24")])
    (manifest,) = hosted.nodes
    assert manifest["metadata"] == {"name": "n1", "labels": {"zone": "a"},
                                    "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE}}
    assert manifest["spec"] == {"taints": taints, "unschedulable": True}
    assert manifest["status"] == {"allocatable": {"cpu": "4", "pods": "10"}, "capacity": {"cpu": "4", "pods": "10"}}
    assert hosted.expected_taints(manifest) == {("dedicated", "NoSchedule"), (UNSCHEDULABLE_TAINT, "NoSchedule")}


def test_pending_pods_of_kubeplace_become_gated_default_scheduler_templates() -> None:
    hosted = host([node("n1"), pod("mine", schedulerName="kubeplace"),
                   pod("other", schedulerName="default-scheduler"),
                   pod("gated", schedulerName="kubeplace", schedulingGates=[{"name": "quota"}])])
    assert set(hosted.pending) == {("default", "mine")}
    template = hosted.pending[("default", "mine")]
    assert template["spec"]["schedulerName"] == "default-scheduler"
    assert template["spec"]["schedulingGates"] == [{"name": REPLAY_GATE}]
    assert template["metadata"] == {"name": "mine", "namespace": "default", "labels": {"app": "x"}}
    assert "status" not in template
    assert len(hosted.notes) == 2 and all("not kubeplace's to place" in n for n in hosted.notes)


def test_the_planning_scheduler_name_decides_which_pods_are_replayed() -> None:
    hosted = host([pod("a", schedulerName="kubeplace"), pod("b", schedulerName="batch")], scheduler_name="batch")
    assert set(hosted.pending) == {("default", "b")}


def test_bound_pods_are_created_bound_and_finished_or_orphaned_ones_not_at_all() -> None:
    hosted = host([node("n1"), pod("run", nodeName="n1", status="Running"),
                   pod("done", nodeName="n1", status="Succeeded"), pod("elsewhere", nodeName="gone", status="Running")])
    assert [p["metadata"]["name"] for p in hosted.bound] == ["run"]
    assert hosted.bound[0]["spec"]["nodeName"] == "n1"
    assert "ownerReferences" not in hosted.bound[0]["metadata"]
    assert any("phase Succeeded" in n for n in hosted.notes)
    assert any("node gone is not in the scenario" in n for n in hosted.notes)


def test_a_terminating_pod_is_hosted_running_unless_topology_spread_would_count_it_differently() -> None:
    old = pod("old", nodeName="n1", status="Running")
    old["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    hosted = host([node("n1"), old])
    assert [p["metadata"] for p in hosted.bound] == [{"name": "old", "namespace": "default", "labels": {"app": "x"}}]
    assert any("terminating" in n for n in hosted.notes)

    spread = pod("web", schedulerName="kubeplace", topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}])
    with pytest.raises(NotHostable, match="terminating"):
        host([node("n1"), old, spread])
    soft = pod("web", schedulerName="kubeplace", topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}])
    assert host([node("n1"), old, soft]).bound


def test_priorities_become_priority_classes_of_the_same_value() -> None:
    klass = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 500}
    hosted = host([klass, pod("a", schedulerName="kubeplace", priority=100),
                   pod("b", schedulerName="kubeplace", priorityClassName="high"),
                   pod("c", schedulerName="kubeplace", priority=0),
                   pod("d", schedulerName="kubeplace", priorityClassName="unknown"),
                   pod("e", schedulerName="kubeplace", priority=-5),
                   pod("f", schedulerName="kubeplace", priority=2000000000)])
    classes = {name: t["spec"].get("priorityClassName") for (_, name), t in hosted.pending.items()}
    assert classes == {"a": "kubeplace-replay-priority-100", "b": "kubeplace-replay-priority-500", "c": None,
                       "d": None, "e": "kubeplace-replay-priority-minus-5", "f": "system-cluster-critical"}
    assert all("priority" not in t["spec"] for t in hosted.pending.values())
    assert hosted.priority_classes == {"kubeplace-replay-priority-100": 100, "kubeplace-replay-priority-500": 500,
                                       "kubeplace-replay-priority-minus-5": -5}
    with pytest.raises(NotHostable, match="above 1000000000"):
        host([pod("g", schedulerName="kubeplace", priority=1500000000)])


def test_namespaces_get_their_files_labels_or_none() -> None:
    team = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"tenant": "a"}}}
    hosted = host([team, pod("a", namespace="team-a", schedulerName="kubeplace"), pod("b", schedulerName="kubeplace")])
    assert hosted.namespaces == {"team-a": {"tenant": "a"}, "default": {}}


def test_objects_no_filter_reads_are_not_created() -> None:
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g"}}
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"}}
    hosted = host([group, rs])
    assert hosted.notes == ("PodGroup g not created: no filter of the default profile reads it",
                            "ReplicaSet rs not created: no filter of the default profile reads it")


def test_storage_objects_are_created_without_status_and_claim_uid() -> None:
    volume = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": "pv", "uid": "u", "resourceVersion": "1", "labels": {"zone": "a"}},
              "spec": {"capacity": {"storage": "1Gi"},
                       "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "db", "name": "data", "uid": "old",
                                    "resourceVersion": "7"}},
              "status": {"phase": "Bound"}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "db"},
             "spec": {"volumeName": "pv"}, "status": {"phase": "Bound"}}
    klass = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local", "uid": "c"},
             "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}
    hosted = host([claim, volume, klass])
    assert [o["kind"] for o in hosted.storage] == ["StorageClass", "PersistentVolume", "PersistentVolumeClaim"]
    created_class, created_volume, created_claim = hosted.storage
    assert created_class == {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
                             "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}
    assert created_volume["metadata"] == {"name": "pv", "labels": {"zone": "a"}}
    assert created_volume["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "namespace": "db", "name": "data"}
    assert "status" not in created_volume and "status" not in created_claim
    assert created_claim["metadata"] == {"name": "data", "namespace": "db"}
    assert hosted.namespaces == {"db": {}}


def test_pods_with_ephemeral_volumes_or_resource_claims_are_not_hostable_unless_left_out() -> None:
    ephemeral: dict[str, Any] = {"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]}
    with pytest.raises(NotHostable, match=r"default/db uses generic ephemeral volumes \(scratch\)"):
        host([node("n1"), pod("db", schedulerName="kubeplace", **ephemeral)])
    with pytest.raises(NotHostable, match="default/running uses generic ephemeral volumes"):
        host([node("n1"), pod("running", nodeName="n1", **ephemeral)])
    with pytest.raises(NotHostable, match="default/gpu uses resource claims"):
        host([pod("gpu", schedulerName="kubeplace", resourceClaims=[{"name": "gpu"}])])
    hosted = host([node("n1"), pod("db", schedulerName="kubeplace", **ephemeral),
                   pod("web", schedulerName="kubeplace")], replayed={("default", "web")})
    assert set(hosted.pending) == {("default", "web")}
    assert hosted.notes == ("pod default/db not created: pending, and not in kubeplace's plan",)
    claimed: dict[str, Any] = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
    assert set(host([node("n1"), pod("app", schedulerName="kubeplace", **claimed)]).pending) == {("default", "app")}


NOT_HOSTABLE: dict[str, str] = {}
"""Catalogue scenarios the e2e replay skips -> the part of NotHostable's reason it gives. Empty: a
new scenario the control plane cannot hold fails here until the replay learns to host it, or it is
listed with the reason."""


@pytest.mark.parametrize("name", scenario_names())
def test_every_catalogue_scenario_hosts_every_pod_kubeplace_places(name: str) -> None:
    scenario = load_scenario(name)
    objects = [obj for obj, _ in load_objects([scenario.folder / "cluster.yaml"])]
    planned = {(p.namespace, p.name) for p in plan_scenario(scenario, "cpsat").plan.placements}
    if name in NOT_HOSTABLE:
        with pytest.raises(NotHostable, match=NOT_HOSTABLE[name]):
            host(objects, replayed=planned)
        return
    assert set(host(objects, replayed=planned).pending) == planned
