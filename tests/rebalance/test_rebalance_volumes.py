"""Rebalancing pods that mount claims: their volumes keep them where the volumes can be used."""

from __future__ import annotations

from kubeplace.models.config import SolverSettings
from kubeplace.models.config_load import load_configuration
from kubeplace.rebalance.cluster_state import state_of
from kubeplace.rebalance.layout import build_layout
from kubeplace.rebalance.movable import Rules
from kubeplace.rebalance.solve_moves import Settings, rebalance
from kubeplace_bench.rebalance_clusters import node, pod
from tests.volume_builders import claim, storage_class, volume

CONFIG = load_configuration(None)
ZONE = "topology.kubernetes.io/zone"


def test_a_pod_with_a_zonal_volume_moves_only_within_its_zone() -> None:
    nodes = [node(n, 4000, 16384) for n in ("a1", "a2", "b1")]
    for manifest, zone in zip(nodes, ("a", "a", "b"), strict=True):
        manifest["metadata"]["labels"][ZONE] = zone
    pods = [pod(f"db-{i}", "default", 500, 256, node_name="a1", owner=("StatefulSet", "db")) for i in range(4)]
    storage = [storage_class("gp3", provisioner="ebs.csi.aws.com")]
    for i, manifest in enumerate(pods):
        manifest["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-db-{i}"}}]
        storage += [volume(f"pv-{i}", zone="a", storage_class="gp3", claim_ref=("default", f"data-db-{i}")),
                    claim(f"data-db-{i}", storage_class="gp3", volume=f"pv-{i}")]
    state = state_of([(o, "test") for o in [*nodes, *pods, *storage]])
    plan = rebalance(build_layout(state, Rules(), CONFIG, CONFIG.profile(None)),
                     Settings(solver=SolverSettings(time_limit=5.0, workers=1, seed=0)))
    assert plan.moves and {m.target for m in plan.moves} == {"a2"}  # never b1: the volumes are in zone a
