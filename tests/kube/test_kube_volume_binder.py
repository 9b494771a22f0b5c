"""Binding pods' volumes before the pods (kube/volume_binder.py), against a fake API with a fake
PV controller and provisioner."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from kubeplace.kube.binder import Binding, Outcome
from kubeplace.kube.errors import Conflict, NotFound, Unreachable
from kubeplace.kube.storage_objects import ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, ClaimChoice
from kubeplace.kube.volume_binder import PodVolumes, bind_with_volumes
from tests.volume_builders import claim, volume

LABELS = {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "a"}
Raw = dict[str, Any]


class FakeCluster:
    """PVs and PVCs by name with resourceVersion preconditions; ``step`` plays the PV controller
    (binds a claim to the volume whose claimRef names it) and a provisioner (creates a volume for a
    claim with a selected node), ``fail`` maps an object name to an error for its next write."""

    def __init__(self, *objects: Raw, provision: str = "works") -> None:
        self.volumes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PersistentVolume"}
        self.claims = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PersistentVolumeClaim"}
        self.provision = provision
        self.writes: list[tuple[str, str, bool]] = []
        self.bound: list[tuple[str, str, bool]] = []
        self.fail: dict[str, Exception] = {}
        self.unreachable_reads = False

    # the API
    def read_persistent_volume(self, name: str) -> Raw:
        if name not in self.volumes:
            raise NotFound(f"persistentvolume {name} not found", status=404)
        return copy.deepcopy(self.volumes[name])

    def read_persistent_volume_claim(self, namespace: str, name: str) -> Raw:
        if self.unreachable_reads:
            raise Unreachable("read: API server unreachable")
        return copy.deepcopy(self.claims[name])

    def update_persistent_volume(self, obj: Mapping[str, Any], dry_run: bool = False) -> Raw:
        return self._update(self.volumes, dict(obj), dry_run)

    def update_persistent_volume_claim(self, obj: Mapping[str, Any], dry_run: bool = False) -> Raw:
        return self._update(self.claims, dict(obj), dry_run)

    def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
             annotations: Mapping[str, str] | None = None) -> None:
        self.bound.append((name, node, dry_run))

    def _update(self, store: dict[str, Raw], obj: Raw, dry_run: bool) -> Raw:
        name = obj["metadata"]["name"]
        if name in self.fail:
            raise self.fail.pop(name)
        if obj["metadata"]["resourceVersion"] != store[name]["metadata"]["resourceVersion"]:
            raise Conflict(f"update {name}: the object has been modified", status=409)
        self.writes.append((obj["kind"], name, dry_run))
        if not dry_run:
            obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
            store[name] = obj
        return copy.deepcopy(obj)

    # the controllers
    def step(self) -> None:
        for pv in self.volumes.values():
            ref = pv["spec"].get("claimRef")
            if ref and ref["name"] in self.claims and not self.claims[ref["name"]]["spec"].get("volumeName"):
                self._bind(self.claims[ref["name"]], pv["metadata"]["name"])
        for name, pvc in list(self.claims.items()):
            node = pvc["metadata"]["annotations"].get(ANN_SELECTED_NODE)
            if node is None or pvc["spec"].get("volumeName"):
                continue
            if self.provision == "fails":
                del pvc["metadata"]["annotations"][ANN_SELECTED_NODE]
                self._touch(pvc)
            elif self.provision == "works":
                made = volume(f"pvc-{name}", node=node, storage_class="gp3", claim_ref=("default", name))
                self.volumes[made["metadata"]["name"]] = made
                self._bind(pvc, made["metadata"]["name"])

    def _bind(self, pvc: Raw, pv_name: str) -> None:
        pvc["spec"]["volumeName"] = pv_name
        pvc["metadata"]["annotations"][ANN_BIND_COMPLETED] = "yes"
        self._touch(pvc)

    @staticmethod
    def _touch(obj: Raw) -> None:
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)


class Clock:
    """Time that moves only when the binder sleeps; each sleep lets the controllers act."""

    def __init__(self, cluster: FakeCluster, controllers: bool = True) -> None:
        self.now, self.cluster, self.controllers = 0.0, cluster, controllers

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.controllers:
            self.cluster.step()


def work(name: str, *choices: ClaimChoice) -> PodVolumes:
    return PodVolumes("default", name, "n1", LABELS, choices)


def run(cluster: FakeCluster, pods: dict[str, tuple[ClaimChoice, ...]], dry_run: bool = False,
        controllers: bool = True, timeout: float = 30) -> dict[str, tuple[str, str]]:
    clock = Clock(cluster, controllers)
    bindings = [Binding("default", name, f"uid-{name}", "n1") for name in pods]
    volumes = {f"default/{name}": work(name, *choices) for name, choices in pods.items() if choices}
    results = bind_with_volumes(cluster, bindings, volumes, dry_run, timeout=timeout, poll=1.0, clock=clock,
                                sleep=clock.sleep)
    return {r.binding.name: (str(r.outcome), r.message) for r in results}


def test_a_static_volume_is_prebound_as_the_pv_controller_expects_then_the_pod_bound() -> None:
    cluster = FakeCluster(volume("pv-1", node="n1"), claim("data"))
    assert run(cluster, {"db": (ClaimChoice("data", "pv-1"),), "web": ()}) == {
        "db": ("bound", ""), "web": ("bound", "")}
    pv = cluster.volumes["pv-1"]
    assert pv["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
                                      "name": "data", "uid": "uid-pvc-default-data", "resourceVersion": "1"}
    assert pv["metadata"]["annotations"][ANN_BOUND_BY_CONTROLLER] == "yes"
    assert cluster.writes == [("PersistentVolume", "pv-1", False)]
    assert cluster.bound == [("db", "n1", False), ("web", "n1", False)]  # after its claim was bound


def test_a_claim_to_provision_gets_the_selected_node() -> None:
    cluster = FakeCluster(claim("scratch", storage_class="gp3"))
    assert run(cluster, {"job": (ClaimChoice("scratch"),)}) == {"job": ("bound", "")}
    assert cluster.claims["scratch"]["metadata"]["annotations"][ANN_SELECTED_NODE] == "n1"
    assert cluster.claims["scratch"]["spec"]["volumeName"] == "pvc-scratch"


def test_a_server_dry_run_writes_nothing_and_does_not_wait() -> None:
    cluster = FakeCluster(volume("pv-1", node="n1"), claim("data"), claim("scratch", storage_class="gp3"))
    before = copy.deepcopy((cluster.volumes, cluster.claims))
    outcome = run(cluster, {"db": (ClaimChoice("data", "pv-1"), ClaimChoice("scratch"))}, dry_run=True,
                  controllers=False)
    assert outcome == {"db": ("bound", "")}
    assert cluster.writes == [("PersistentVolume", "pv-1", True), ("PersistentVolumeClaim", "scratch", True)]
    assert (cluster.volumes, cluster.claims) == before and cluster.bound == [("db", "n1", True)]


def test_a_refused_write_fails_that_pod_only_and_undoes_its_other_writes() -> None:
    cluster = FakeCluster(volume("pv-1", node="n1"), volume("pv-2", node="n1"), claim("a"), claim("b"), claim("c"))
    cluster.fail["pv-2"] = Conflict("update pv-2: the object has been modified", status=409)
    outcome = run(cluster, {"p": (ClaimChoice("a", "pv-1"), ClaimChoice("b", "pv-2")), "q": (ClaimChoice("c"),)})
    assert outcome["p"] == ("volumes_not_ready", "volumes not ready: update pv-2: the object has been modified; "
                                                 "undone: volume pv-1's claimRef")
    assert "claimRef" not in cluster.volumes["pv-1"]["spec"]
    assert ANN_BOUND_BY_CONTROLLER not in cluster.volumes["pv-1"]["metadata"]["annotations"]
    assert outcome["q"] == ("bound", "") and [b[0] for b in cluster.bound] == ["q"]


def test_a_volume_taken_meanwhile_is_not_stolen() -> None:
    cluster = FakeCluster(volume("pv-1", node="n1", claim_ref=("default", "other")), claim("data"))
    outcome = run(cluster, {"db": (ClaimChoice("data", "pv-1"),)})
    assert outcome == {"db": ("volumes_not_ready",
                              "volumes not ready: volume pv-1 was taken by claim default/other meanwhile")}
    assert cluster.writes == [] and cluster.bound == []


def test_provisioning_that_fails_is_reported_and_the_pod_not_bound() -> None:
    cluster = FakeCluster(claim("scratch", storage_class="gp3"), provision="fails")
    assert run(cluster, {"job": (ClaimChoice("scratch"),)}) == {
        "job": ("volumes_not_ready", "volumes not ready: provisioning failed for claim scratch")}
    assert cluster.bound == []


def test_time_out_undoes_what_is_still_safe_to_undo() -> None:
    cluster = FakeCluster(volume("pv-1", node="n1"), claim("data"), claim("scratch", storage_class="gp3"),
                          provision="never")
    outcome = run(cluster, {"db": (ClaimChoice("data", "pv-1"), ClaimChoice("scratch"))}, timeout=5)
    assert outcome == {"db": ("volumes_not_ready", "volumes not ready: timed out after 5s waiting for its claims to be "
                                                   "bound; undone: claim scratch's selected node; left to the PV "
                                                   "controller: volume pv-1")}
    assert cluster.claims["data"]["spec"]["volumeName"] == "pv-1"  # the PV controller bound it: left as it is
    assert ANN_SELECTED_NODE not in cluster.claims["scratch"]["metadata"]["annotations"]
    assert cluster.bound == []


def test_a_volume_whose_affinity_does_not_admit_the_node_is_not_waited_for() -> None:
    cluster = FakeCluster(volume("pv-1", node="n2"), claim("data"))
    outcome = run(cluster, {"db": (ClaimChoice("data", "pv-1"),)})
    assert outcome["db"][0] == "volumes_not_ready" and "node affinity does not match node n1" in outcome["db"][1]


@pytest.mark.parametrize("when", ["write", "wait"])
def test_an_unreachable_api_server_stops_the_run(when: str) -> None:
    cluster = FakeCluster(volume("pv-1", node="n1"), claim("data"))
    if when == "write":
        cluster.fail["pv-1"] = Unreachable("update pv-1: API server unreachable")
    else:
        original = cluster.update_persistent_volume

        def then_unreachable(obj: Mapping[str, Any], dry_run: bool = False) -> Raw:
            cluster.unreachable_reads = True
            return original(obj, dry_run)

        cluster.update_persistent_volume = then_unreachable  # type: ignore[method-assign]
    outcome = run(cluster, {"db": (ClaimChoice("data", "pv-1"),), "web": ()})
    assert outcome["web"][0] == str(Outcome.NOT_ATTEMPTED) and cluster.bound == []
    assert outcome["db"][0] == ("unknown" if when == "write" else "not_attempted")
