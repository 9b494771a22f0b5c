"""Pods read as the API server stores them: what admission and defaulting would have filled in
for a pod that has not been through it (Helm output, ``--dry-run=client``, a hand-written file)
is filled in before placement, so the plan is the one the kube-scheduler would accept."""

from __future__ import annotations

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import Snapshot, Toleration
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import Planned, make_plan
from tests.builders import NodeBuilder, node, pod, snapshot_of

Gi, Mi = 1024**3, 1024**2


def planned(snap: Snapshot) -> Planned:
    config, profile = Configuration(), Profile()
    result = make_plan(snap, config, profile, SolverSettings(backend="cpsat", time_limit=5, workers=1))
    assert verify_plan(snap, result.plan.placements, config, profile) == []
    return result


def placed_on(result: Planned) -> dict[str, str]:
    return {p.name: p.node for p in result.plan.placements}


def exporter(name: str) -> dict[str, object]:
    return {"name": name, "image": "node-exporter", "resources": {"requests": {"cpu": "100m"}},
            "ports": [{"containerPort": 9100, "name": "metrics"}]}


def test_a_host_network_pod_takes_its_container_ports_on_the_host() -> None:
    snap = snapshot_of(
        node("taken").cpu("4"), node("free").cpu("4"),
        pod("running").spec("hostNetwork", True).spec("containers", [exporter("e")]).on("taken"),
        pod("second").spec("hostNetwork", True).spec("containers", [exporter("e")]),
    )
    assert snap.pending[0].host_ports[0].port == 9100
    assert placed_on(planned(snap)) == {"second": "free"}


def test_pod_level_limits_alone_are_the_requests() -> None:
    limited = pod("limited").spec("resources", {"limits": {"cpu": "3", "memory": "1Gi"}})
    snap = snapshot_of(node("small").cpu("2").memory("4Gi"), node("big").cpu("4").memory("4Gi"), limited)
    assert snap.pending[0].requests["cpu"] == 3000
    assert placed_on(planned(snap)) == {"limited": "big"}


KATA = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}, "handler": "kata",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}},
        "scheduling": {"nodeSelector": {"runtime": "kata"},
                       "tolerations": [{"key": "kata", "operator": "Exists", "effect": "NoSchedule"}]}}


def kata_node() -> NodeBuilder:
    return node("kata").cpu("4").memory("8Gi").label("runtime", "kata").taint("kata")


def test_a_kata_pod_goes_where_its_runtime_class_says_with_its_tolerations_and_overhead() -> None:
    snap = snapshot_of(node("plain").cpu("8").memory("8Gi"), kata_node(), KATA,
                       pod("vm").cpu("1").memory("1Gi").spec("runtimeClassName", "kata"))
    vm = snap.pending[0]
    assert vm.node_selector == {"runtime": "kata"}
    assert vm.tolerations == (Toleration("kata", "Exists", "", "NoSchedule"),)
    assert vm.requests == {"cpu": 1250, "memory": Gi + 160 * Mi, "pods": 1}
    assert placed_on(planned(snap)) == {"vm": "kata"}


def test_a_stored_pod_is_read_as_stored_the_merge_is_not_made_twice() -> None:
    stored = pod("vm").cpu("1").spec("runtimeClassName", "kata").manifest()
    stored["metadata"]["resourceVersion"] = "7"
    assert snapshot_of(node("plain").cpu("8"), KATA, stored).pending[0].requests["cpu"] == 1000


def test_a_pod_whose_runtime_class_is_not_in_the_input_is_left_with_the_reason() -> None:
    snap = snapshot_of(node("plain").cpu("8").memory("8Gi"), pod("vm").cpu("1").spec("runtimeClassName", "gvisor"))
    result = planned(snap)
    assert placed_on(result) == {}
    assert [(p.reasons, p.left_to_default_scheduler) for p in result.plan.unplaced] == [
        (('left to the default scheduler: pod rejected: RuntimeClass "gvisor" not found '
          '(spec.runtimeClassName, not in the input)',), True)]


@pytest.mark.parametrize(("change", "message"), [
    ({"nodeSelector": {"runtime": "runc"}}, "spec.nodeSelector.runtime: conflict: runtimeClass.scheduling.nodeSelector"
                                            r"\[runtime\] = kata; pod.spec.nodeSelector\[runtime\] = runc"),
    ({"overhead": {"cpu": "1"}}, "spec.overhead: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined"),
])  # fmt: skip
def test_what_runtime_class_admission_refuses_is_refused(change: dict[str, object], message: str) -> None:
    vm = pod("vm").cpu("1").spec("runtimeClassName", "kata")
    for key, value in change.items():
        vm = vm.spec(key, value)
    with pytest.raises(InputError, match=f"{message}") as refused:
        snapshot_of(node("plain").cpu("8"), KATA, vm)
    assert "Pod default/vm" in str(refused.value)
