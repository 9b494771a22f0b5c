"""The plan: every pending pod with its node, or the reasons it cannot be placed.

A Plan is plain data (frozen dataclasses), printable as a table and round-trippable
through JSON/YAML so that ``kubeplace bind`` can take a plan written by ``plan``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kubeplace.kube.capacity import NodeTemplate
from kubeplace.kube.catalogue import PRICE_UNIT
from kubeplace.kube.dra import EXTENDED_CLAIM, ClaimAllocation
from kubeplace.kube.dra_parse import (
    allocation_manifest,
    mappings_manifest,
    parse_allocation,
    parse_extended,
    requests_manifest,
)
from kubeplace.kube.errors import INT32_MAX, InputError
from kubeplace.kube.objects import GangKey, Node
from kubeplace.kube.storage_objects import ClaimChoice

PLAN_KIND = "PlacementPlan"
PLAN_API_VERSION = "kubeplace.io/v1alpha1"


@dataclass(frozen=True)
class Placement:
    namespace: str
    name: str
    node: str
    uid: str = ""
    gpus: tuple[int, ...] = ()
    volumes: tuple[ClaimChoice, ...] = ()
    """For each unbound WaitForFirstConsumer claim, the volume it binds to or provisioning."""
    claims: tuple[ClaimAllocation, ...] = ()
    """For each resource claim to allocate, its devices (written before the pod is bound)."""
    count: int = 1
    """How many pods of it go to ``node``: 1, but for a reservation (stand-in followers, one
    object however many, ``Pod.copies``): how many of them the node holds (``gpus``: all theirs)."""


@dataclass(frozen=True)
class Unplaced:
    namespace: str
    name: str
    reasons: tuple[str, ...]
    left_to_default_scheduler: bool = False


@dataclass(frozen=True)
class Preemption:
    """A running pod the plan evicts, and the placed pods it makes room for."""

    namespace: str
    name: str
    node: str
    priority: int
    for_pods: tuple[str, ...]
    """``namespace/name`` of the preemptors placed where it frees room."""
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PreemptionSummary:
    """What preemption decided, by the stated lexicographic order."""

    order: tuple[str, ...]
    victims: int
    preemptors: int
    highest_victim_priority: int | None
    pdb_violations: int
    victim_cost: int
    """Victims weighted 1 for the lowest victim priority, one more per higher priority."""
    status: str
    """optimal: every stage of the order proven optimal; feasible or greedy otherwise."""
    attempts: int = 0
    """Pods that may preempt and that the plan without preemption left out."""

    def to_dict(self) -> dict[str, Any]:
        return {"order": list(self.order), "attempts": self.attempts, "victims": self.victims,
                "preemptors": self.preemptors,
                "highestVictimPriority": self.highest_victim_priority, "pdbViolations": self.pdb_violations,
                "victimCost": self.victim_cost, "status": self.status}


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
    verified: bool = False
    """The independent verifier (plan/verify.py) re-checked every placement and refused none."""
    preemption: PreemptionSummary | None = None
    """Set when the plan was made with preemption (``plan --preempt``, ``serve``)."""


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
class NewNode:
    """A node the plan adds (``plan --provision``): named ``<nodePool>-<n>``, bought as ``template``
    (which makes it a node, ``template.to_node(name)``, and a NodeClaim)."""

    name: str
    template: NodeTemplate
    pods: tuple[str, ...]
    """``namespace/name`` of the pods the plan puts on it."""


@dataclass(frozen=True)
class Provision:
    """The new nodes of a plan, what they cost per hour, and how far from the cheapest."""

    nodes: tuple[NewNode, ...]
    cost: int
    """Billionths of the currency per hour, all new nodes together."""
    bound: int | None
    """No set of new nodes for the pods the existing nodes left costs less (Farley's LP bound)."""
    greedy_cost: int
    """What Karpenter's way (first-fit decreasing, cheapest type per node) pays for the same pods."""
    status: str
    rounds: int = 1

    @property
    def registered(self) -> tuple[Node, ...]:
        """The new nodes as they would register once ready (labels, taints, allocatable), from
        their templates: what the verifier checked the plan against, and what the report draws."""
        return tuple(n.template.to_node(n.name) for n in self.nodes)

    @property
    def gap(self) -> float | None:
        if self.bound is None:
            return None
        return 0.0 if self.cost <= 0 else max(0.0, (self.cost - self.bound) / self.cost)

    def to_dict(self) -> dict[str, Any]:
        return {
            "provision": [{"node": n.name, "nodePool": n.template.node_pool.name,
                           "instanceType": n.template.instance_type.name, "zone": n.template.offering.zone,
                           "capacityType": n.template.offering.capacity_type,
                           "pricePerHour": n.template.price / PRICE_UNIT, "pods": list(n.pods)} for n in self.nodes],
            "provisionCostPerHour": self.cost / PRICE_UNIT,
            "provisionBound": None if self.bound is None else self.bound / PRICE_UNIT,
            "provisionGap": None if self.gap is None else round(self.gap, 6),
            "provisionGreedyCostPerHour": self.greedy_cost / PRICE_UNIT,
            "provisionStatus": self.status,
        }


@dataclass(frozen=True)
class Plan:
    scheduler_name: str
    placements: tuple[Placement, ...]
    unplaced: tuple[Unplaced, ...]
    summary: Summary
    source: str = ""
    steps: tuple[str, ...] = field(default=())
    gangs: tuple[GangStatus, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    reservations: tuple[Placement, ...] = ()
    """Room held for followers that do not exist yet (stand-ins, ``kube.followers``), in their
    leader's domain: never bound, listed so that the plan says why a leader went where it did.
    One entry per stand-in and node, with how many followers the node holds (``count``)."""
    provision: Provision | None = None
    """The nodes to add (``plan --provision``); None when the plan adds none by design."""

    def to_dict(self) -> dict[str, Any]:
        out = self._to_dict()
        if self.provision is not None:
            out.update(self.provision.to_dict())
        if self.reservations:
            out["reservations"] = [{**_placement_dict(p), "count": p.count} for p in self.reservations]
        if self.summary.preemption is not None:
            out["preemptions"] = [{"namespace": v.namespace, "name": v.name, "node": v.node, "priority": v.priority,
                                   "for": list(v.for_pods), "uid": v.uid} for v in self.preemptions]
            out["summary"]["preemption"] = self.summary.preemption.to_dict()
        return out

    def _to_dict(self) -> dict[str, Any]:
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
            "summary": {**{k: v for k, v in asdict(self.summary).items() if k not in ("utilisation", "preemption")},
                        "utilisation": {u.resource: {"before": u.before, "after": u.after}
                                        for u in self.summary.utilisation}},
        }


def _placement_dict(p: Placement) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": p.namespace, "name": p.name, "node": p.node, "uid": p.uid}
    if p.gpus:
        out["gpus"] = list(p.gpus)
    if p.volumes:
        out["volumes"] = [{"claim": v.claim, "volume": v.volume} if v.volume else {"claim": v.claim, "provision": True}
                          for v in p.volumes]
    if p.claims:
        out["claims"] = [{"claim": c.claim, "allocation": allocation_manifest(c.allocation),
                          **({"requests": requests_manifest(c.requests),
                              "requestMappings": mappings_manifest(c.mappings)} if c.extended else {})}
                         for c in p.claims]
    return out


def placements_from_dict(doc: object, source: str) -> tuple[Placement, ...]:
    """Reads the placements back from a plan file written by ``kubeplace plan -o json|yaml``.

    Raises :class:`InputError` naming the file and field for anything ``plan`` would not have
    written: a missing or non-string name, ``gpus`` that are not a list of device indexes, a pod
    placed twice."""
    if not isinstance(doc, Mapping) or doc.get("kind") != PLAN_KIND:
        raise InputError("not a kubeplace plan", file=source, field="kind", expected=PLAN_KIND)
    items = doc.get("placements")
    if not isinstance(items, list):
        raise InputError("missing or not a list", file=source, field="placements")
    out = []
    seen: dict[tuple[str, str], int] = {}
    for i, item in enumerate(items):
        where = f"placements[{i}]"
        if not isinstance(item, Mapping):
            raise InputError("not a mapping", file=source, field=where, expected="namespace, name, node")
        for key in ("namespace", "name", "node"):
            if not isinstance(item.get(key), str) or not item.get(key):
                raise InputError("missing or not a string", file=source, field=f"{where}.{key}")
        pod = (item["namespace"], item["name"])
        if pod in seen:
            raise InputError(f"pod {pod[0]}/{pod[1]} placed twice (also placements[{seen[pod]}])", file=source,
                             field=f"{where}.name")
        seen[pod] = i
        uid = item.get("uid") or ""
        if not isinstance(uid, str):
            raise InputError(f"{uid!r} is not a string", file=source, field=f"{where}.uid")
        out.append(Placement(item["namespace"], item["name"], item["node"], uid, _devices(item, source, where),
                             _volumes(item.get("volumes"), source, where), _claims(item.get("claims"), source, where)))
    return tuple(out)


def _devices(item: Mapping[str, Any], source: str, where: str) -> tuple[int, ...]:
    gpus = item.get("gpus") or []
    if not isinstance(gpus, list) or not all(
        isinstance(g, int) and not isinstance(g, bool) and 0 <= g <= INT32_MAX for g in gpus
    ):
        raise InputError(f"got {gpus!r}", file=source, field=f"{where}.gpus", expected="a list of device indexes")
    return tuple(gpus)


def _volumes(raw: object, source: str, where: str) -> tuple[ClaimChoice, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError("not a list", file=source, field=f"{where}.volumes")
    out = []
    for j, item in enumerate(raw):
        claim = item.get("claim") if isinstance(item, Mapping) else None
        volume = item.get("volume", "") if isinstance(item, Mapping) else None
        provision = item.get("provision", False) if isinstance(item, Mapping) else None
        if not isinstance(claim, str) or not claim or not isinstance(volume, str) or (bool(volume) == bool(provision)):
            raise InputError("expected {claim: NAME, volume: PV} or {claim: NAME, provision: true}", file=source,
                             field=f"{where}.volumes[{j}]")
        out.append(ClaimChoice(claim, volume))
    return tuple(out)


def _claims(raw: object, source: str, where: str) -> tuple[ClaimAllocation, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError("not a list", file=source, field=f"{where}.claims")
    out = []
    for j, item in enumerate(raw):
        claim = item.get("claim") if isinstance(item, Mapping) else None
        if not isinstance(claim, str) or not claim or not isinstance(item, Mapping):
            raise InputError("expected {claim: NAME, allocation: {...}}", file=source, field=f"{where}.claims[{j}]")
        try:
            extended = parse_extended(item, "") if claim == EXTENDED_CLAIM else ((), ())
            out.append(ClaimAllocation(claim, parse_allocation(item.get("allocation"), "allocation"), *extended))
        except InputError as error:
            raise error.located(file=source, field_prefix=f"{where}.claims[{j}]") from None
    return tuple(out)
