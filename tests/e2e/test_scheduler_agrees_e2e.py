"""The kube-scheduler agrees with every plan.

Every scenario of the catalogue (``fixtures/scenarios``) is planned by kubeplace (CP-SAT, as in
``tests/test_catalogue.py``) and replayed through the real kube-scheduler (default profile), pod by
pod in the plan's order (on the cluster its preemption victims, if any, have left), each pod
nominated to its planned node (``tests/e2e/replay.py``). Every planned pod must be bound to exactly
its planned node. Scenarios the control plane cannot hold are
skipped with the reason (``tests/e2e/hosting.py``).

One kube-scheduler and one control plane serve the whole module; each scenario's nodes and pods are
removed before the next. The last tests check the harness itself on hand-made spread scenarios:
it honours the order it is given, it reports a plan the kube-scheduler refuses with the
kube-scheduler's words, and nominating is right where a node-affinity pin is not.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from kubeplace.kube.files import load_objects
from kubeplace.kube.parse import build_snapshot
from kubeplace.kube.storage_objects import ClaimChoice
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Placement
from tests.scenarios import load_scenario, plan_scenario, scenario_names, verify_planned

from . import controlplane as cp
from .hosting import NotHostable, host
from .random_clusters import random_cluster
from .replay import Replayer

pytestmark = pytest.mark.e2e

SPREAD_MESSAGE = "didn't match pod topology spread constraints"


@pytest.fixture(scope="module")
def replayer(control_plane: cp.ControlPlane) -> Iterator[Replayer]:
    with Replayer(control_plane) as replayer:
        replayer.wait_idle()
        with control_plane.start_scheduler():
            yield replayer


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", scenario_names())
def test_the_kube_scheduler_agrees_with_the_plan(name: str, replayer: Replayer) -> None:
    scenario = load_scenario(name)
    planned = plan_scenario(scenario, "cpsat")
    assert verify_planned(scenario, planned) == [], name
    victims = {(v.namespace, v.name) for v in planned.plan.preemptions}
    objects = [obj for obj, _ in load_objects([scenario.folder / "cluster.yaml"])
               if not _is_victim(obj, victims)]
    placements = planned.plan.placements
    try:
        hosted = host(objects, planned.plan.scheduler_name, {(p.namespace, p.name) for p in placements})
    except NotHostable as e:
        pytest.skip(f"{name}: the control plane cannot hold it: {e}")
    outcome = replayer.run(hosted, placements)
    assert outcome.disagreement is None, (
        f"{name}: the kube-scheduler disagrees with kubeplace's plan after {outcome.agreed} of "
        f"{len(placements)} pods: {outcome.disagreement}")
    assert outcome.agreed == len(placements)


def _is_victim(obj: Mapping[str, Any], victims: set[tuple[str, str]]) -> bool:
    meta = obj.get("metadata", {})
    return obj.get("kind") == "Pod" and (meta.get("namespace") or "default", meta.get("name")) in victims


RANDOM_CLUSTERS = int(os.environ.get("KUBEPLACE_REPLAY_RANDOM_CLUSTERS", "30"))
"""How many random clusters to replay; raise it to hunt for disagreements by hand."""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", range(RANDOM_CLUSTERS))
def test_the_kube_scheduler_agrees_on_random_clusters(seed: int, replayer: Replayer) -> None:
    """Small random clusters mixing every rule kubeplace models (tests/e2e/random_clusters.py)."""
    objects = random_cluster(seed)
    snapshot = build_snapshot([(o, f"random cluster {seed}") for o in objects])
    config = Configuration()
    profile = config.profile(None)
    plan = make_plan(snapshot, config, profile, SolverSettings(backend="cpsat", time_limit=10, workers=1, seed=0)).plan
    assert verify_plan(snapshot, plan.placements, config, profile) == []
    hosted = host(objects, replayed={(p.namespace, p.name) for p in plan.placements})
    outcome = replayer.run(hosted, plan.placements)
    assert outcome.disagreement is None, (
        f"random cluster {seed}: the kube-scheduler disagrees with kubeplace's plan after {outcome.agreed} of "
        f"{len(plan.placements)} pods: {outcome.disagreement}")


# --------------------------------------------------------------------------- the harness itself


def _zone_node(name: str, zone: str) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
            "spec": {}, "status": {"allocatable": capacity, "capacity": capacity}}


def _web_pod(name: str, node: str = "", min_domains: int = 1) -> dict[str, Any]:
    """A web replica with zone spread, DoNotSchedule, maxSkew 1; pending for kubeplace unless ``node``."""
    constraint: dict[str, Any] = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                  "whenUnsatisfiable": "DoNotSchedule",
                                  "labelSelector": {"matchLabels": {"app": "web"}}}
    if min_domains > 1:
        constraint["minDomains"] = min_domains
    spec: dict[str, Any] = {"containers": [{"name": "web", "image": "registry.invalid/web:1",
                                            "resources": {"requests": {"cpu": "100m"}}}],
                            "topologySpreadConstraints": [constraint]}
    spec.update({"nodeName": node} if node else {"schedulerName": "kubeplace"})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "replay-check", "labels": {"app": "web"}}, "spec": spec}


ZONES = [_zone_node("replay-a1", "a"), _zone_node("replay-b1", "b")]


@pytest.mark.timeout(90)
def test_the_replay_honours_the_order_it_is_given(replayer: Replayer) -> None:
    """Two web pods per zone, maxSkew 1: a, b, a, b is a valid order, a, a, b, b is not (the second
    pod in zone a makes the skew 2). The same placements, replayed in each order."""
    hosted = host([*ZONES, *(_web_pod(f"web-{i}") for i in range(4))])
    a, b = "replay-a1", "replay-b1"
    interleaved = [Placement("replay-check", "web-0", a), Placement("replay-check", "web-1", b),
                   Placement("replay-check", "web-2", a), Placement("replay-check", "web-3", b)]
    assert replayer.run(hosted, interleaved).disagreement is None

    zone_by_zone = [interleaved[0], interleaved[2], interleaved[1], interleaved[3]]
    outcome = replayer.run(hosted, zone_by_zone)
    assert outcome.agreed == 1
    disagreement = outcome.disagreement
    assert disagreement is not None
    assert (disagreement.pod, disagreement.planned, disagreement.bound) == ("replay-check/web-2", a, b)
    assert SPREAD_MESSAGE in disagreement.message, disagreement.message
    assert "were unschedulable" in disagreement.message, disagreement.message


@pytest.mark.timeout(90)
def test_a_refused_plan_is_reported_in_the_kube_schedulers_words(replayer: Replayer) -> None:
    """A pod planned on a node it does not fit, with no other node to go to: refused, with the
    FailedScheduling message."""
    small = {"cpu": "1", "memory": "8Gi", "pods": "110"}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "replay-small", "labels": {}},
            "spec": {}, "status": {"allocatable": small}}
    big = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": "replay-check"},
           "spec": {"schedulerName": "kubeplace", "containers": [
               {"name": "c", "image": "registry.invalid/c:1", "resources": {"requests": {"cpu": "2"}}}]}}
    outcome = replayer.run(host([node, big]), [Placement("replay-check", "big", "replay-small")])
    assert outcome.disagreement is not None
    assert outcome.disagreement.bound == ""
    assert "0/1 nodes are available: 1 Insufficient cpu." in outcome.disagreement.message


@pytest.mark.timeout(90)
def test_nominating_agrees_where_a_node_affinity_pin_is_refused(replayer: Replayer) -> None:
    """One web pod bound in each zone, minDomains 2: a third in zone a has skew 1, valid. Pinned by
    required node affinity on metadata.name, the pod's eligible domains shrink to zone a (policy
    Honor), fewer than minDomains, so the global minimum is taken as 0 and the kube-scheduler refuses:
    a pin would report a disagreement where there is none."""
    objects = [*ZONES, _web_pod("bound-a", "replay-a1", 2), _web_pod("bound-b", "replay-b1", 2),
               _web_pod("web-new", min_domains=2)]
    placement = [Placement("replay-check", "web-new", "replay-a1")]
    hosted = host(objects)
    assert replayer.run(hosted, placement).disagreement is None

    pinned = copy.deepcopy(hosted)
    pinned.pending[("replay-check", "web-new")]["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["replay-a1"]}]}]}}}
    outcome = replayer.run(pinned, placement)
    assert outcome.disagreement is not None and outcome.disagreement.bound == ""
    assert SPREAD_MESSAGE in outcome.disagreement.message, outcome.disagreement.message


@pytest.mark.timeout(90)
def test_the_volume_a_plan_chooses_is_replayed_with_it(replayer: Replayer) -> None:
    """The plan's volume for an unbound claim is pre-bound as kubeplace's binder does, so the
    kube-scheduler checks that very volume: a local volume of the other node is refused on the
    planned one, although a scheduler free to pick would have taken the other volume."""
    nodes = [_zone_node("replay-a1", "a"), _zone_node("replay-b1", "b")]
    klass = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "replay-local"},
             "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}
    volumes = [{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"replay-pv-{n}"},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                         "storageClassName": "replay-local", "local": {"path": f"/mnt/{n}"},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": "kubernetes.io/hostname", "operator": "In", "values": [f"replay-{n}"]}]}]}}}}
               for n in ("a1", "b1")]
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "data", "namespace": "replay-check"},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "replay-local",
                      "resources": {"requests": {"storage": "1Gi"}}}}
    app = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": "replay-check"},
           "spec": {"schedulerName": "kubeplace", "containers": [{"name": "c", "image": "registry.invalid/c:1"}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}
    hosted = host([*nodes, klass, *volumes, claim, app])
    good = Placement("replay-check", "app", "replay-a1", volumes=(ClaimChoice("data", "replay-pv-a1"),))
    assert replayer.run(hosted, [good]).disagreement is None

    wrong = Placement("replay-check", "app", "replay-a1", volumes=(ClaimChoice("data", "replay-pv-b1"),))
    disagreement = replayer.run(hosted, [wrong]).disagreement
    assert disagreement is not None and disagreement.bound == "replay-b1"
    assert "1 node(s) didn't match PersistentVolume's node affinity" in disagreement.message, disagreement.message
