"""`kubeplace serve` with resource claims: each claim allocated (and reserved for its pod) before the
pod is bound, and the allocation in the store at once, so that the next cycle does not give the same
devices again; a claim taken meanwhile fails that pod only."""

from __future__ import annotations

from typing import Any

from kubeplace.kube.errors import Conflict
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.informer import Store
from kubeplace.serve.loop import Scheduler
from kubeplace.serve.settings import ServeSettings
from tests.builders import node, pod
from tests.device_builders import DRIVER, FILTER_ERROR, claiming, device_class, gpu_slice, request, resource_claim
from tests.kube.test_kube_claim_binder import FakeClaims
from tests.serve.fakes import Clock, FakeCluster

CLAIMS = "resource.k8s.io/v1/resourceclaims"


class Cluster(FakeCluster, FakeClaims):
    """Serve's fake client with the claim API of the claim binder tests' fake."""

    def __init__(self, *claims: dict[str, Any]) -> None:
        FakeCluster.__init__(self)
        FakeClaims.__init__(self, *claims)


def scheduler(cluster: Cluster, *objects: Any) -> tuple[Scheduler, Store]:
    store = Store()
    manifests = [o if isinstance(o, dict) else o.manifest() for o in objects]
    for resource, kind in (("nodes", "Node"), ("pods", "Pod"), ("resource.k8s.io/v1/deviceclasses", "DeviceClass"),
                           ("resource.k8s.io/v1/resourceslices", "ResourceSlice")):
        store.replace(resource, [m for m in manifests if m["kind"] == kind])
    store.replace(CLAIMS, list(cluster.claims.values()))
    s = Scheduler(cluster, store, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1),
                  ServeSettings(batch_window=0, initial_backoff=1, max_backoff=10), clock=Clock())
    s.resync_queue()
    return s, store


def test_claims_are_allocated_before_the_pods_are_bound_and_kept_in_the_store() -> None:
    cluster = Cluster(resource_claim("a"), resource_claim("b"))
    s, store = scheduler(cluster, node("n1").cpu("4"), device_class(), gpu_slice("n1", 2),
                         claiming(pod("p").cpu("1"), claim="a"), claiming(pod("q").cpu("1"), claim="b"))
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert sorted(report.bound) == ["default/p", "default/q"]
    devices = {name: c["status"]["allocation"]["devices"]["results"][0]["device"] for name, c in cluster.claims.items()}
    assert sorted(devices.values()) == ["gpu-0", "gpu-1"]
    assert cluster.claims["a"]["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-default-p"}]
    stored = {c["metadata"]["name"]: c for c in store.items(CLAIMS)}
    assert stored["a"]["status"]["allocation"] == cluster.claims["a"]["status"]["allocation"]


def test_a_claim_conflict_fails_that_pod_and_binds_the_other() -> None:
    cluster = Cluster(resource_claim("a"), resource_claim("b"))
    cluster.fail["a"] = Conflict("update a: the object has been modified", status=409)
    s, _ = scheduler(cluster, node("n1").cpu("4"), device_class(), gpu_slice("n1", 2),
                     claiming(pod("p").cpu("1"), claim="a"), claiming(pod("q").cpu("1"), claim="b"))
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert report.bound == ["default/q"] and [b[0] for b in cluster.bindings] == ["default/q"]


def test_a_pod_left_to_the_default_scheduler_gets_an_event_saying_why() -> None:
    """A claim with adminAccess is not modelled: serve does not bind the pod and says why in a
    FailedScheduling Event rather than leaving it silent."""
    admin = resource_claim("admin", requests=[{"name": "gpu", "exactly": {"deviceClassName": "gpu",
                                                                          "adminAccess": True}}])
    cluster = Cluster(admin)
    s, _ = scheduler(cluster, node("n1").cpu("4"), device_class(), gpu_slice("n1", 2),
                     claiming(pod("p").cpu("1"), claim="admin"))
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert report.bound == [] and cluster.bindings == []
    (event,) = [e for e in cluster.events if e["involvedObject"]["name"] == "p"]
    assert event["reason"] == "FailedScheduling" and "adminAccess" in event["message"]


def test_an_extended_resource_served_by_dra_is_created_allocated_and_kept_in_the_store() -> None:
    from tests.kube.test_kube_extended_claim_binder import FakeApi

    class ExtendedCluster(FakeCluster, FakeApi):
        def __init__(self) -> None:
            FakeCluster.__init__(self)
            FakeApi.__init__(self)

    cluster = ExtendedCluster()
    s, store = scheduler(cluster, node("n1").cpu("4"), device_class("gpu", extended="nvidia.com/gpu"),
                         gpu_slice("n1", 2), pod("p").cpu("1").gpu(2))
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert report.bound == ["default/p"]
    (claim,) = cluster.claims.values()
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 2
    assert [(name, list(status)) for name, status in cluster.pod_statuses] == [
        ("default/p", ["extendedResourceClaimStatus"])]
    assert [c["metadata"]["name"] for c in store.items(CLAIMS)] == [claim["metadata"]["name"]]


def test_a_claim_failing_at_run_time_is_its_pods_event_and_every_other_pod_is_bound() -> None:
    """One ResourceClaim whose selector divides by zero: its pod gets a FailedScheduling Event with
    the kube-scheduler's words and waits; the pod of a healthy claim and a pod without claims are
    bound in the same cycle, and again in the next cycles while the broken claim stays."""
    index = f'device.attributes["{DRIVER}"].index'
    cluster = Cluster(resource_claim("poisoned", requests=[request(selectors=[f"{index} / 0 == 1"])]),
                      resource_claim("fine"))
    s, store = scheduler(cluster, node("n1").cpu("4"), device_class(), gpu_slice("n1", 2),
                         claiming(pod("victim").cpu("1"), claim="poisoned"), claiming(pod("p").cpu("1"), claim="fine"),
                         pod("plain").cpu("1"))
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert sorted(report.bound) == ["default/p", "default/plain"] and report.unplaced == ["default/victim"]
    (event,) = [e for e in cluster.events if e["involvedObject"]["name"] == "victim"]
    assert event["reason"] == "FailedScheduling" and event["type"] == "Warning"
    assert event["message"] == (f"{FILTER_ERROR}claim default/poisoned: selector #0: "
                                "CEL runtime error: division by zero")
    store.replace("pods", [*store.items("pods"), pod("later").cpu("1").manifest()])
    s.resync_queue()
    later = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert "default/later" in later.bound
