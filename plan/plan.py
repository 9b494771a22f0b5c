"""The plan: every pending pod with its node, or the reasons it cannot be placed.

A Plan is plain data (frozen dataclasses), printable as a table and round-trippable
through JSON/YAML so that ``kubeplace bind`` can take a plan written by ``plan``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kubeplace.kube.objects import GangKey

PLAN_KIND = "PlacementPlan"
PLAN_API_VERSION = "kubeplace.io/v1alpha1"


@dataclass(frozen=True)
class Placement:
    namespace: str
    name: str
    node: str
    uid: str = ""
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class Unplaced:
    namespace: str
    name: str
    reasons: tuple[str, ...]
    left_to_default_scheduler: bool = False


@dataclass(frozen=True)
class ResourceUse:
    resource: str
    before: float  # requested / allocatable over the cluster, 0..1
    after: float


@dataclass(frozen=True)
class Summary:
    pods_placed: int
    pods_unplaced: int
    pods_left_to_default_scheduler: int
    placed_weight: int
    objective: float
    objective_before: float
    bound: int | None
    gap: float | None
    status: str
    seconds: float
    backend: str
    profile: str
    utilisation: tuple[ResourceUse, ...] = ()
    gpu_fragmentation: float = 0.0
    """milli-GPU free but unusable by the workload's typical task shapes (FGD's measure)."""
    gpu_fragmentation_ratio: float = 0.0


@dataclass(frozen=True)
class GangStatus:
    namespace: str
    name: str
    min_member: int
    members: tuple[str, ...]  # pending members
    running: int  # members already bound
    placed_members: int
    placed: bool
    reason: str = ""

    @property
    def key(self) -> GangKey:
        return GangKey(self.namespace, self.name)


@dataclass(frozen=True)
class Plan:
    scheduler_name: str
    placements: tuple[Placement, ...]
    unplaced: tuple[Unplaced, ...]
    summary: Summary
    source: str = ""
    steps: tuple[str, ...] = field(default=())
    gangs: tuple[GangStatus, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": PLAN_API_VERSION,
            "kind": PLAN_KIND,
            "schedulerName": self.scheduler_name,
            "source": self.source,
            "placements": [_placement_dict(p) for p in self.placements],
            "unplaced": [{"namespace": u.namespace, "name": u.name, "reasons": list(u.reasons),
                          "left_to_default_scheduler": u.left_to_default_scheduler} for u in self.unplaced],
            "gangs": [{"namespace": g.namespace, "name": g.name, "minMember": g.min_member,
                       "members": list(g.members), "running": g.running, "placedMembers": g.placed_members,
                       "placed": g.placed, **({"reason": g.reason} if g.reason else {})} for g in self.gangs],
            "summary": {**{k: v for k, v in asdict(self.summary).items() if k != "utilisation"},
                        "utilisation": {u.resource: {"before": u.before, "after": u.after}
                                        for u in self.summary.utilisation}},
        }


def _placement_dict(p: Placement) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": p.namespace, "name": p.name, "node": p.node, "uid": p.uid}
    if p.gpus:
        out["gpus"] = list(p.gpus)
    return out


def placements_from_dict(doc: Mapping[str, Any], source: str) -> tuple[Placement, ...]:
    """Reads the placements back from a plan file written by ``kubeplace plan -o json|yaml``."""
    from kubeplace.kube.errors import InputError

    if not isinstance(doc, Mapping) or doc.get("kind") != PLAN_KIND:
        raise InputError("not a kubeplace plan", file=source, field="kind", expected=PLAN_KIND)
    items = doc.get("placements")
    if not isinstance(items, list):
        raise InputError("missing or not a list", file=source, field="placements")
    out = []
    for i, item in enumerate(items):
        where = f"placements[{i}]"
        if not isinstance(item, Mapping):
            raise InputError("expected a mapping", file=source, field=where)
        for key in ("namespace", "name", "node"):
            if not isinstance(item.get(key), str) or not item.get(key):
                raise InputError("missing or not a string", file=source, field=f"{where}.{key}")
        out.append(Placement(item["namespace"], item["name"], item["node"], str(item.get("uid", "")),
                             tuple(int(g) for g in item.get("gpus", []))))
    return tuple(out)
