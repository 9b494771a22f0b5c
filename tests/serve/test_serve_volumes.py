"""`kubeplace serve` with claims: the volume writes first, the pod bound only once its claims are."""

from __future__ import annotations

from typing import Any

from kubeplace.kube.storage_objects import ANN_SELECTED_NODE
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.informer import MODIFIED, Store
from kubeplace.serve.loop import Scheduler
from kubeplace.serve.settings import ServeSettings
from tests.builders import node, pod
from tests.kube.test_kube_volume_binder import FakeCluster as VolumeCluster
from tests.serve.fakes import Clock, FakeCluster
from tests.volume_builders import claim, mounting, storage_class, volume


class Cluster(FakeCluster, VolumeCluster):
    """Serve's fake client with the volume API of the binder tests' fake (PV controller included)."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        FakeCluster.__init__(self)
        VolumeCluster.__init__(self, *objects)

    bind = FakeCluster.bind


def scheduler(cluster: Cluster, *objects: Any) -> tuple[Scheduler, Store]:
    store = Store()
    manifests = [o if isinstance(o, dict) else o.manifest() for o in objects]
    for resource, kind in (("nodes", "Node"), ("pods", "Pod"), ("storage.k8s.io/v1/storageclasses", "StorageClass")):
        store.replace(resource, [m for m in manifests if m["kind"] == kind])
    sync(store, cluster)
    s = Scheduler(cluster, store, Configuration(), Profile(), SolverSettings(time_limit=5, workers=1),
                  ServeSettings(batch_window=0, initial_backoff=1, max_backoff=10), clock=Clock())
    s.resync_queue()
    return s, store


def sync(store: Store, cluster: Cluster) -> None:
    """The informer's view of the fake's claims and volumes."""
    store.replace("persistentvolumeclaims", list(cluster.claims.values()))
    store.replace("persistentvolumes", list(cluster.volumes.values()))


def test_a_pod_is_bound_once_its_claims_are() -> None:
    cluster = Cluster(volume("pv-1", node="n2"), claim("data"), claim("scratch", storage_class="gp3"))
    s, store = scheduler(cluster, node("n1").cpu("4"), node("n2").cpu("4"), storage_class("local"),
                         storage_class("gp3", provisioner="ebs.csi.aws.com"),
                         mounting(pod("db").cpu("1"), "data", "scratch"))
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert report.bound == [] and report.unplaced == ["default/db"]
    assert cluster.volumes["pv-1"]["spec"]["claimRef"]["name"] == "data"
    assert cluster.claims["scratch"]["metadata"]["annotations"][ANN_SELECTED_NODE] == "n2"
    cluster.step()  # the PV controller binds data, the provisioner makes scratch's volume
    sync(store, cluster)
    s.on_change("persistentvolumeclaims", MODIFIED, None, cluster.claims["data"])
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert report.bound == ["default/db"] and cluster.bindings == [("default/db", "n2", "uid-default-db")]


def test_a_provisioning_failure_waits_and_replans() -> None:
    cluster = Cluster(claim("scratch", storage_class="gp3"))
    cluster.provision = "fails"
    s, store = scheduler(cluster, node("n1").cpu("4"), storage_class("gp3", provisioner="ebs.csi.aws.com"),
                         mounting(pod("job").cpu("1"), ephemeral=()), mounting(pod("db").cpu("1"), "scratch"))
    s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    cluster.step()  # the provisioner gives up: selected-node removed
    sync(store, cluster)
    s.on_change("persistentvolumeclaims", MODIFIED, None, cluster.claims["scratch"])
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert "default/db" not in report.bound and cluster.claims["scratch"]["metadata"]["annotations"][
        ANN_SELECTED_NODE] == "n1"  # planned again: selected again, still not bound
    assert [b[0] for b in cluster.bindings] == ["default/job"]
