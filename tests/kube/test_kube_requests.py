from __future__ import annotations

from typing import Any

import pytest

from kubeplace.kube.errors import InputError
from kubeplace.kube.requests import pod_requests

Gi = 1024**3
Mi = 1024**2


def container(cpu: str = "", memory: str = "", **extra: Any) -> dict[str, Any]:
    requests = {name: value for name, value in (("cpu", cpu), ("memory", memory)) if value}
    result: dict[str, Any] = {"name": "c", "image": "x", "resources": {"requests": requests}}
    result.update(extra)
    return result


def sidecar(cpu: str, memory: str = "") -> dict[str, Any]:
    return container(cpu, memory, restartPolicy="Always")


def manifest(containers: list[Any], init: list[Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": containers, "initContainers": init or [], **spec}}


def test_sums_app_containers_and_always_counts_one_pod() -> None:
    assert pod_requests(manifest([container("500m", "1Gi"), container("250m", "512Mi")])) == {
        "cpu": 750,
        "memory": Gi + 512 * Mi,
        "pods": 1,
    }


def test_pod_without_requests_still_uses_one_pod_slot() -> None:
    assert pod_requests(manifest([{"name": "c", "image": "x"}])) == {"pods": 1}


def test_ordinary_init_container_counts_when_larger_than_the_app() -> None:
    requests = pod_requests(manifest([container("1", "1Gi")], init=[container("3", "512Mi"), container("2")]))
    assert requests == {"cpu": 3000, "memory": Gi, "pods": 1}


@pytest.mark.parametrize(
    ("init", "cpu"),
    [
        # sidecar adds to the app: 1 + 0.5
        ([sidecar("500m")], 1500),
        # init after a sidecar runs beside it: max(1 + 0.5, 2 + 0.5)
        ([sidecar("500m"), container("2")], 2500),
        # init before the sidecar runs alone: max(1 + 0.5, 2)
        ([container("2"), sidecar("500m")], 2000),
        # two sidecars then an init: max(1 + 0.5 + 0.25, 1 + 0.75)
        ([sidecar("500m"), sidecar("250m"), container("1")], 1750),
    ],
    ids=["sidecar-adds", "init-after-sidecar", "init-before-sidecar", "two-sidecars"],
)
def test_sidecars(init: list[Any], cpu: int) -> None:
    assert pod_requests(manifest([container("1")], init=init))["cpu"] == cpu


def test_overhead_is_added_after_the_max() -> None:
    spec = manifest([container("1", "1Gi")], init=[container("2")], overhead={"cpu": "250m", "memory": "120Mi"})
    assert pod_requests(spec) == {"cpu": 2250, "memory": Gi + 120 * Mi, "pods": 1}


def test_pod_level_resources_replace_cpu_and_memory_only() -> None:
    gpu_container = container("1", "1Gi")
    gpu_container["resources"]["requests"]["nvidia.com/gpu"] = "2"
    spec = manifest(
        [gpu_container, container("1")],
        resources={"requests": {"cpu": "4", "memory": "8Gi"}},
        overhead={"cpu": "100m"},
    )
    assert pod_requests(spec) == {"cpu": 4100, "memory": 8 * Gi, "nvidia.com/gpu": 2, "pods": 1}


def test_pod_level_limits_stand_in_for_requests_the_containers_do_not_make() -> None:
    spec = manifest([container()], resources={"limits": {"cpu": "3", "memory": "1Gi"}})
    assert pod_requests(spec) == {"cpu": 3000, "memory": Gi, "pods": 1}


def test_pod_level_requests_default_to_the_containers_before_the_pod_level_limits() -> None:
    """defaultPodRequests: a resource the containers request takes their aggregate, not the limit."""
    spec = manifest([container("1"), container("500m")], init=[container("2")],
                    resources={"limits": {"cpu": "3", "memory": "1Gi"}})
    assert pod_requests(spec) == {"cpu": 2000, "memory": Gi, "pods": 1}


def test_pod_level_hugepages_request_defaults_to_the_containers_limits() -> None:
    huge = container()
    huge["resources"] = {"limits": {"hugepages-2Mi": "4Mi"}}
    spec = manifest([huge], resources={"requests": {"cpu": "1"}})
    assert pod_requests(spec) == {"cpu": 1000, "hugepages-2Mi": 4 * Mi, "pods": 1}


def test_limits_without_requests_are_the_requests() -> None:
    limited = {"name": "c", "image": "x", "resources": {"limits": {"cpu": "2", "memory": "1Gi", "example.com/x": "1"}}}
    mixed = {"name": "d", "image": "x", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}}
    assert pod_requests(manifest([limited, mixed])) == {
        "cpu": 3000,
        "memory": Gi,
        "example.com/x": 1,
        "pods": 1,
    }


def test_extended_resources_follow_the_same_rules() -> None:
    app = container()
    app["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    init = container()
    init["resources"] = {"requests": {"nvidia.com/gpu": "2"}}
    assert pod_requests(manifest([app], init=[init]))["nvidia.com/gpu"] == 2


def test_bad_quantity_names_the_field() -> None:
    with pytest.raises(InputError) as caught:
        pod_requests(manifest([container("1"), container("12Zi")]))
    assert caught.value.field == "spec.containers[1].resources.requests.cpu"
    assert "invalid quantity '12Zi'" in str(caught.value)


def test_malformed_containers_field() -> None:
    with pytest.raises(InputError, match=r"spec\.containers: str is not a list"):
        pod_requests({"spec": {"containers": "nope"}})


def test_restart_policy_is_spelled_as_the_api_server_accepts_it() -> None:
    # `always` is refused by the API server; read as "not a sidecar" it changed the request
    with pytest.raises(InputError) as caught:
        pod_requests(manifest([container("1")], init=[container("1", restartPolicy="always")]))
    assert caught.value.field == "spec.initContainers[0].restartPolicy"
    assert "unsupported restartPolicy 'always'" in str(caught.value) and "Always, OnFailure, Never" in str(caught.value)
    # the policies of container restart rules are not sidecars and stay accepted
    assert pod_requests(manifest([container("1")], init=[container("2", restartPolicy="Never")]))["cpu"] == 2000


def test_a_summed_request_beyond_the_representable_range_is_refused() -> None:
    half = str((2**53 - 1) // 2 + 1)  # each container is in range, their sum is not
    with pytest.raises(InputError) as caught:
        pod_requests(manifest([container(memory=half), container(memory=half)]))
    assert caught.value.field == "spec"
    assert "effective request: memory amount 9007199254740992 is out of range" in str(caught.value)
