"""Reading resource.k8s.io/v1 objects: devices with their attributes, capacities and counters, claims
allocated or not, pods' claims; bad input refused in one line naming file, object and field."""

from __future__ import annotations

import pytest

from kubeplace.kube.device_cel import CelError, matches
from kubeplace.kube.dra import Device, DeviceId, DeviceRequest, PodClaim
from kubeplace.kube.errors import InputError
from tests.builders import node, pod, snapshot_of
from tests.device_builders import (
    DRIVER,
    claim_template,
    claiming,
    device,
    device_class,
    gpu_slice,
    request,
    resource_claim,
    resource_slice,
    sub_request,
)


def test_devices_claims_and_pod_claims_are_read() -> None:
    part = device("p0", attributes={"model": "A100", "other.io/ok": True}, capacity={"memory": "10Gi"},
                  consumes={"gpu-0": {"memory": "10Gi"}})
    snapshot = snapshot_of(
        node("n1"), device_class(extended="nvidia.com/gpu"), gpu_slice("n1", 1),
        resource_slice("old", [device("stale")], pool="shared", all_nodes=True, generation=1),
        resource_slice("new", [part], pool="shared", all_nodes=True, generation=2,
                       counters={"gpu-0": {"memory": "40Gi"}}),
        resource_claim("done", allocated=("n1", [("gpu", "gpu-0")]), reserved_for=["uid-x"]),
        resource_claim("alt", requests=[request("gpu", first_available=[sub_request("big", count=2),
                                                                           sub_request("small")])]),
        claim_template("t"), claiming(pod("p"), template="t", generated="p-gpu-1"))
    devices = snapshot.devices
    assert devices.classes["gpu"].extended_resource == "nvidia.com/gpu"
    assert sorted(str(d) for d in devices.devices) == [f"{DRIVER}/n1/gpu-0", f"{DRIVER}/shared/p0"]
    shared = devices.devices[DeviceId(DRIVER, "shared", "p0")]
    assert shared.all_nodes and shared.attributes == {f"{DRIVER}/model": "A100", "other.io/ok": True}
    assert shared.capacity == {f"{DRIVER}/memory": 10 * 2**30 * 1000}
    assert devices.counters[(DRIVER, "shared")] == {"gpu-0": {"memory": 40 * 2**30 * 1000}}
    done = devices.claims["default/done"]
    assert done.allocation is not None and done.reserved_for == ("uid-x",)
    assert devices.allocated == frozenset({DeviceId(DRIVER, "n1", "gpu-0")})
    assert devices.claims["default/alt"].requests[0].alternatives[0] == DeviceRequest("gpu/big", "gpu", (), count=2)
    assert snapshot.pending[0].resource_claims == (PodClaim("gpu", template="t"),)
    assert snapshot.pending[0].generated_claims == {"gpu": "p-gpu-1"}


def test_a_malformed_cel_selector_is_refused_with_its_field() -> None:
    claim = resource_claim("c", requests=[request(selectors=['device.attributes["x"].model =='])])
    claim["metadata"]["namespace"] = "ml"
    with pytest.raises(InputError) as error:
        snapshot_of(device_class(), claim)
    text = str(error.value)
    assert text.startswith("builders: ResourceClaim ml/c: "
                           "spec.devices.requests[0].exactly.selectors[0].cel.expression: CEL compile error: ")
    assert "\n" not in text
    with pytest.raises(InputError, match=r"DeviceClass bad: spec.selectors\[0\].cel.expression: CEL compile error"):
        snapshot_of(device_class("bad", "device.driver =="))


def test_pod_claim_entries_name_exactly_one_source() -> None:
    with pytest.raises(InputError, match=r"Pod default/p: spec.resourceClaims\[0\]: exactly one of"):
        snapshot_of(pod("p").spec("resourceClaims", [{"name": "gpu"}]))


def test_cel_evaluation_of_the_kubernetes_device_shapes() -> None:
    gpu = Device(DeviceId(DRIVER, "p", "g"), attributes={f"{DRIVER}/model": "A100", f"{DRIVER}/index": 3,
                                                          f"{DRIVER}/driverVersion": (1, 2, 3)},
                 capacity={f"{DRIVER}/memory": 40 * 2**30 * 1000})
    assert matches(f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "A100"', gpu)
    assert matches(f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) == 0', gpu)
    assert not matches(f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("40Gi"))', gpu)
    assert matches(f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.2.0"))', gpu)
    assert not matches('"model" in device.attributes["other.io"]', gpu)
    with pytest.raises(CelError, match="CEL runtime error"):
        matches('device.attributes["other.io"].model == "A100"', gpu)
    with pytest.raises(CelError, match="could not be converted to bool"):
        matches("1", gpu)


@pytest.mark.parametrize("name", ["bad name!", "gpu", "kubernetes.io/gpu", "deviceclass.resource.kubernetes.io/gpu",
                                  "requests.example.com/gpu", "example.com/" + "g" * 64])
def test_an_extended_resource_name_the_api_server_refuses_is_bad_input(name: str) -> None:
    with pytest.raises(InputError, match=r"DeviceClass gpu: spec.extendedResourceName: .* is not an extended resource"):
        snapshot_of(device_class(extended=name))


def test_a_domain_prefixed_extended_resource_name_is_read() -> None:
    assert snapshot_of(device_class(extended="nvidia.com/gpu")).devices.classes["gpu"].extended_resource == \
        "nvidia.com/gpu"
