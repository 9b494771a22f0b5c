"""What the tests of the volume rules (VolumeBinding, VolumeRestrictions, NodeVolumeLimits,
VolumeZone) share: a plan of a snapshot, checked by the independent verifier twice (with the
volumes the plan chose for the unbound claims, and without them: that such volumes exist), what it
placed where and why the rest is not placed; and the verifier's refusals of given placements."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from kubeplace.kube.objects import Snapshot
from kubeplace.kube.storage_objects import ClaimChoice
from kubeplace.models.config import Configuration, SolverSettings
from kubeplace.plan.checks import verify_plan, verify_settings
from kubeplace.plan.pipeline import make_plan
from kubeplace.plan.plan import Plan
from kubeplace.plan.verify import VerifySettings, verify
from tests.builders import node, snapshot_of
from tests.volume_builders import storage_class

ZONE = "topology.kubernetes.io/zone"
EBS = "ebs.csi.aws.com"


def zoned(name: str, zone: str, cpu: str = "4") -> Any:
    return node(name).cpu(cpu).label(ZONE, zone)


def plan(snapshot: Snapshot, disabled: tuple[str, ...] = ()) -> Plan:
    config = Configuration()
    profile = dataclasses.replace(config.profiles[0], disabled=disabled)
    made = make_plan(snapshot, config, profile, SolverSettings(time_limit=10, workers=1, seed=0)).plan
    if not disabled:
        assert verify_plan(snapshot, made.placements, config, profile) == []
        triples = [(p.namespace, p.name, p.node) for p in made.placements]
        assert verify(snapshot, triples, verify_settings(config, profile)) == []
    return made


def where(made: Plan) -> dict[str, str]:
    return {p.name: p.node for p in made.placements}


def why(made: Plan) -> dict[str, str]:
    return {u.name: " / ".join(u.reasons) for u in made.unplaced}


def chosen(made: Plan) -> dict[str, tuple[ClaimChoice, ...]]:
    return {p.name: p.volumes for p in made.placements if p.volumes}


def cluster(*objects: Any) -> Snapshot:
    """Two nodes in zones a and b, a local class, a provisioned class allowed in zone b and one
    that binds immediately, and ``objects``."""
    return snapshot_of(node("n1").cpu("8").label(ZONE, "a"), node("n2").cpu("8").label(ZONE, "b"),
                       storage_class("local"), storage_class("gp3", provisioner=EBS, zones=("b",)),
                       storage_class("fast", provisioner=EBS, wait=False), *objects)


def rules(snapshot: Snapshot, placements: Sequence[tuple[str, str]],
          choices: dict[str, tuple[ClaimChoice, ...]] | None = None) -> list[str]:
    """``rule: detail`` of each violation the verifier finds in placing the pods (of the default
    namespace) on the nodes."""
    triples = [("default", name, node_name) for name, node_name in placements]
    given = None if choices is None else {("default", name): c for name, c in choices.items()}
    return [f"{v.rule}: {v.detail}" for v in verify(snapshot, triples, VerifySettings(), volume_choices=given)]
