"""A plan as the rules' verifier checks over the whole plan read it: built once per verification
by the verifier's walk (``plan.verify``), read-only, from the snapshot's own objects.

``placements`` are the placements the walk accepted (a pending pod of the snapshot, on a node of
the snapshot, within its copies), in plan order; ``by_node`` and ``bound_by_node`` index them and
the snapshot's bound pods by node name. The volumes and devices the plan gives the pods' claims
are there when the plan names them (None: the checks look for whether such volumes and devices
exist instead).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubeplace.kube.dra import ClaimAllocation
from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.kube.storage_objects import ClaimChoice

PodKey = tuple[str, str]
"""(namespace, name)."""
Finding = tuple[str, str, str, str]
"""(namespace, name, node, detail): what a check over the plan refuses, and why."""


@dataclass(frozen=True)
class Placed:
    """One placement: ``count`` copies of ``pod`` on ``node`` (more than one for an object
    standing for several pods, ``Pod.copies``)."""

    pod: Pod
    node: Node
    count: int = 1


@dataclass(frozen=True)
class PlanView:
    snapshot: Snapshot
    placements: tuple[Placed, ...] = ()
    volume_choices: Mapping[PodKey, Sequence[ClaimChoice]] | None = None
    """Per placed pod, the volume each of its unbound claims binds to ("" provisioned)."""
    claim_allocations: Mapping[PodKey, Sequence[ClaimAllocation]] | None = None
    """Per placed pod, the devices the plan allocates to its resource claims."""
    by_node: Mapping[str, tuple[tuple[Pod, int], ...]] = field(init=False)
    """Per node name, the pods placed there with how many copies of each, in plan order."""
    bound_by_node: Mapping[str, tuple[Pod, ...]] = field(init=False)
    """Per node name, the snapshot's pods bound there."""

    def __post_init__(self) -> None:
        placed: dict[str, list[tuple[Pod, int]]] = {}
        for p in self.placements:
            placed.setdefault(p.node.name, []).append((p.pod, p.count))
        object.__setattr__(self, "by_node", {name: tuple(pods) for name, pods in placed.items()})
        object.__setattr__(self, "bound_by_node", self.snapshot.bound_by_node)

