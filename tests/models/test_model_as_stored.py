"""Pods read as the API server stores them: what admission and defaulting would have filled in
for a pod that has not been through it (Helm output, ``--dry-run=client``, a hand-written file)
is filled in before placement, so the plan is the one the kube-scheduler would accept."""

from __future__ import annotations

from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import Planned, make_plan
from tests.builders import node, pod, snapshot_of


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
