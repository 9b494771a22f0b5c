"""Reading resource.k8s.io/v1 objects: devices with their attributes, capacities and counters, claims
allocated or not, pods' claims; bad input refused in one line naming file, object and field."""

from __future__ import annotations

from typing import Any

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


def refused(*objects: Any) -> str:
    with pytest.raises(InputError) as error:
        snapshot_of(node("n1"), device_class(), *objects)
    text = str(error.value)
    assert "\n" not in text
    return text


def with_spec(manifest: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {**manifest, "spec": {**manifest["spec"], **spec}}


MANY = [sub_request(f"s{i}") for i in range(9)]


@pytest.mark.parametrize(("bad", "problem"), [
    (resource_claim("c", requests=[request("gpu"), request("gpu")]),
     "ResourceClaim default/c: spec.devices.requests[1].name: duplicate request name 'gpu'"),
    (resource_claim("c", requests=[request("GPU")]),
     "ResourceClaim default/c: spec.devices.requests[0].name: 'GPU' is not a DNS label"),
    (resource_claim("c", requests=[{**request(), "firstAvailable": [sub_request("a")]}]),
     "ResourceClaim default/c: spec.devices.requests[0]: both exactly and firstAvailable are set"),
    (resource_claim("c", requests=[request(first_available=MANY)]),
     "ResourceClaim default/c: spec.devices.requests[0].firstAvailable: 9 subrequests, more than the API server "
     "allows (expected at most 8)"),
    (resource_claim("c", requests=[request(first_available=[sub_request("a"), sub_request("a")])]),
     "ResourceClaim default/c: spec.devices.requests[0].firstAvailable[1].name: duplicate subrequest name 'a'"),
    (resource_claim("c", requests=[request(f"r{i}") for i in range(33)]),
     "ResourceClaim default/c: spec.devices.requests: 33 requests, more than the API server allows"),
    (claim_template("t", requests=[request("gpu"), request("gpu")]),
     "ResourceClaimTemplate default/t: spec.spec.devices.requests[1].name: duplicate request name 'gpu'"),
    (resource_claim("c", allocated=("n1", [("gpu", "gpu-0")]), reserved_for=[f"u{i}" for i in range(257)]),
     "ResourceClaim default/c: status.reservedFor: 257 consumers, more than the API server allows"),
    (resource_claim("c", allocated=("n1", [("gpu", "gpu-0")]), reserved_for=["u", "u"]),
     "ResourceClaim default/c: status.reservedFor[1].uid: duplicate consumer uid 'u'"),
    (with_spec(gpu_slice("n1", 1), allNodes=True),
     "ResourceSlice n1-gpus: spec: nodeName and allNodes are all set (expected exactly one of nodeName, "
     "nodeSelector, allNodes, perDeviceNodeSelection)"),
    (resource_slice("s", [device("d")], pool="p"), "ResourceSlice s: spec: none of them is set"),
    (resource_slice("s", [device("d"), device("d")], node="n1"),
     "ResourceSlice s: spec.devices[1].name: duplicate device name 'd'"),
    (claiming(pod("p"), claim="c").spec("resourceClaims", [{"name": "a", "resourceClaimName": "c"},
                                                            {"name": "a", "resourceClaimName": "d"}]).manifest(),
     "Pod default/p: spec.resourceClaims[1].name: duplicate resourceClaims entry name 'a'"),
    (claiming(pod("p"), claim="c").spec("resourceClaims", [{"resourceClaimName": "c"}]).manifest(),
     "Pod default/p: spec.resourceClaims[0].name: missing resourceClaims entry name"),
])  # fmt: skip
def test_what_the_api_server_refuses_is_refused_with_file_object_and_field(bad: Any, problem: str) -> None:
    assert refused(bad).startswith(f"builders: {problem}")


@pytest.mark.parametrize("twice", [device_class(), gpu_slice("n1", 1), resource_claim("c"), claim_template("t")])
def test_two_dra_objects_of_one_name_are_refused(twice: dict[str, Any]) -> None:
    kind, name = twice["kind"], twice["metadata"]["name"]
    label = f"default/{name}" if "namespace" in twice["metadata"] else name
    objects = [twice, twice] if kind != "DeviceClass" else [twice]
    assert refused(*objects) == f"builders: {kind} {label}: duplicate {kind} (first defined in builders)"


def v1beta1(manifest: dict[str, Any]) -> dict[str, Any]:
    return {**manifest, "apiVersion": "resource.k8s.io/v1beta1"}


def test_v1beta1_objects_are_read_as_the_api_server_converts_them() -> None:
    """v1beta1 holds a request's class, selectors, mode and count at its top level and a device's
    attributes under ``basic``: read as the v1 objects they convert to, never as empty ones."""
    v1 = [gpu_slice("n1", 2), resource_claim("c", requests=[request(count=2, selectors=['device.driver != ""']),
                                                            request("alt", first_available=[sub_request("a")])]),
          claim_template("t")]
    flat_requests = [{"name": "gpu", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2,
                      "selectors": [{"cel": {"expression": 'device.driver != ""'}}]},
                     {"name": "alt", "firstAvailable": [sub_request("a")]}]
    old_slice = with_spec(v1[0], devices=[{"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}}
                                          for d in v1[0]["spec"]["devices"]])
    old_claim = with_spec(v1[1], devices={"requests": flat_requests})
    old_template = {**v1[2], "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu"}]}}}}
    assert snapshot_of(node("n1"), device_class(), *map(v1beta1, (old_slice, old_claim, old_template))).devices == \
        snapshot_of(node("n1"), device_class(), *v1).devices
    v1beta2 = {**v1[1], "apiVersion": "resource.k8s.io/v1beta2"}
    assert snapshot_of(node("n1"), device_class(), v1beta2).devices.claims == \
        snapshot_of(node("n1"), device_class(), v1[1]).devices.claims


def test_a_v1beta1_request_with_both_shapes_and_other_versions_are_refused() -> None:
    both = resource_claim("c", requests=[{"name": "gpu", "deviceClassName": "gpu",
                                          "firstAvailable": [sub_request("a")]}])
    assert refused(v1beta1(both)).startswith(
        "builders: ResourceClaim default/c: spec.devices.requests[0]: both exactly and firstAvailable are set")
    alpha = {**resource_claim("c"), "apiVersion": "resource.k8s.io/v1alpha3"}
    assert refused(alpha) == ("builders: ResourceClaim default/c: apiVersion: resource.k8s.io/v1alpha3 ResourceClaim "
                              "is not read (expected resource.k8s.io/v1 (or v1beta2, v1beta1))")
