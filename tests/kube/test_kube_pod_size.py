"""A typed pod's own memory: 100,000 pending pods are a 20,000-node cluster's snapshot, held
for the whole plan (and by ``serve``'s store for months)."""

from __future__ import annotations

import tracemalloc

from kubeplace.kube.parse import build_snapshot


def _pod(i: int, rules: bool = False) -> dict[str, object]:
    spec: dict[str, object] = {"schedulerName": "kubeplace", "containers": [
        {"name": "main", "image": "app", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
    if rules:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": "a"}}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ns", "labels": {"app": "a"}},
            "spec": spec, "status": {"phase": "Pending"}}


def test_a_pod_object_holds_its_fields_without_a_dict_and_equal_rule_sets_once() -> None:
    pods = build_snapshot([(_pod(i, rules=i % 2 == 0), "test") for i in range(200)]).pending
    assert len(pods) == 200 and pods[0].key == "ns/p0"
    assert not hasattr(pods[0], "__dict__")  # a dict of its ~40 fields was 1.5 KiB a pod
    assert len({id(p.spec_rules) for p in pods}) == 2  # one rule set per distinct set, not per pod


def test_the_pods_of_a_snapshot_take_under_2_kib_each() -> None:
    manifests = [(_pod(i), "test") for i in range(2000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        snapshot = build_snapshot(manifests)
        per_pod = (tracemalloc.get_traced_memory()[0] - before) / len(snapshot.pending)
    finally:
        tracemalloc.stop()
    assert per_pod < 2048, per_pod  # 3.2 KiB before (1.2 KiB)
