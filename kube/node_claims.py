"""NodeClaims for the new nodes of a provisioning plan, and what their status says.

A claim is built (``kube.capacity.NodeTemplate.to_nodeclaim``) as Karpenter builds its own
(``NodeClaimTemplate.ToNodeClaim`` in ``pkg/controllers/provisioning/scheduling``): named
``<nodePool>-`` plus a generated suffix, owned by its NodePool, labelled with the NodePool's
template labels, ``karpenter.sh/nodepool`` and the NodeClass label, annotated with the NodePool's
hash (so that its drift check treats it as its own), with the template's taints, startup taints,
nodeClassRef and expireAfter, and as resource requests the pods planned on it plus its DaemonSet
pods. It is also annotated ``karpenter.sh/do-not-disrupt`` (removed from the node once its pods are
bound). Its requirements are the NodePool's, narrowed to exactly the chosen node: every label the
candidate registers with (instance type, zone, capacity type, architecture, OS, family, size, the
template's labels) becomes ``In [that value]``; a requirement on another label is kept as the
NodePool has it. With ``minValues`` in the NodePool, a key the candidate's alternatives
(``kube.capacity.NodeTemplate.alternatives``) vary on lists the chosen value first and theirs after,
with its ``minValues``: no offering the claim then admits is cheaper than the chosen one.

Karpenter launches a claim created this way (the kwok provider picks the cheapest offering its
requirements admit: with one instance type, zone and capacity type, that one), registers the node
under a name the provider chooses, and marks the claim ``Initialized`` once the node is Ready,
its startup taints are gone and its resources are registered: :func:`claim_state` reads that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeplace.kube.karpenter import (
    CAPACITY_TYPE_LABEL,
    GROUP,
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    ZONE_LABEL,
)
from kubeplace.kube.objects import NodePool, Taint
from kubeplace.kube.selectors import IN

VERSION = "v1"
PLURAL = "nodeclaims"
PLANNED_NODE_ANNOTATION = "kubeplace.io/planned-node"
"""On each claim kubeplace creates: the plan's name of its node (``<nodePool>-<n>``)."""
DO_NOT_DISRUPT = f"{GROUP}/do-not-disrupt"
"""Set on each claim (the kwok provider copies it onto the node) until the planned pods are bound:
an empty node is what Karpenter's consolidation removes first."""
HASH_ANNOTATIONS = (f"{GROUP}/nodepool-hash", f"{GROUP}/nodepool-hash-version")
"""Copied from the live NodePool, as Karpenter copies them onto its claims: without them its
drift check cannot compare the claim with the NodePool (and leaves it alone)."""
CHOSEN_LABELS = (INSTANCE_TYPE_LABEL, ZONE_LABEL, CAPACITY_TYPE_LABEL)
"""What the plan chose for a node and the registered node is compared on."""
NOT_CARRIED = frozenset({HOSTNAME_LABEL})
"""Labels of the candidate the claim does not require: the provider names the node."""


@dataclass(frozen=True)
class PoolIdentity:
    """What a claim needs from the live NodePool beyond its spec."""

    uid: str
    annotations: Mapping[str, str]


def claim_requirements(node_pool: NodePool, labels: Mapping[str, str],
                       alternatives: Sequence[Mapping[str, str]] = ()) -> list[dict[str, Any]]:
    """The NodePool's requirements narrowed to the node of ``labels``: one ``In`` per label it
    registers with (but the hostname), its value first, then the values of the ``alternatives``
    (the labels of the other nodes the claim admits to keep the NodePool's ``minValues``, which
    the requirement on a key with one carries); then the NodePool's requirements on other labels
    as they are (with their ``minValues``)."""
    pinned = {key: value for key, value in labels.items() if key not in NOT_CARRIED}
    out: list[dict[str, Any]] = []
    for key, value in sorted(pinned.items()):
        values = [value, *sorted({other[key] for other in alternatives if key in other} - {value})]
        item: dict[str, Any] = {"key": key, "operator": IN, "values": values}
        if key in node_pool.min_values:
            item["minValues"] = node_pool.min_values[key]
        out.append(item)
    for requirement in node_pool.requirements:
        if requirement.key in pinned:
            continue
        item = {"key": requirement.key, "operator": requirement.operator, "values": list(requirement.values)}
        if requirement.key in node_pool.min_values:
            item["minValues"] = node_pool.min_values[requirement.key]
        out.append(item)
    return out


def node_class_label(group: str, kind: str) -> str:
    """``v1.NodeClassLabelKey``: the label naming a node's NodeClass (``karpenter.kwok.sh/kwoknodeclass``)."""
    return f"{group}/{kind.lower()}"


def quantity(resource: str, amount: int) -> str:
    """An integer amount (milli-CPU, bytes or a count) as a Kubernetes quantity."""
    return f"{amount}m" if resource == "cpu" else str(amount)


def taint_object(taint: Taint) -> dict[str, str]:
    return {"key": taint.key, **({"value": taint.value} if taint.value else {}), "effect": taint.effect}


@dataclass(frozen=True)
class ClaimState:
    """Where one NodeClaim stands: ``node`` once initialized (its Node is Ready, startup taints
    gone, resources registered), else "" with ``waiting`` saying on what."""

    node: str
    waiting: str
    launched: bool
    registered: bool


def claim_state(claim: Mapping[str, Any]) -> ClaimState:
    """The state of a NodeClaim read from the API server, from its status conditions."""
    status = claim.get("status") or {}
    conditions = {c.get("type", ""): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}

    def true(kind: str) -> bool:
        return str(conditions.get(kind, {}).get("status", "")) == "True"

    launched, registered = true("Launched"), true("Registered")
    node = str(status.get("nodeName") or "")
    if true("Initialized") and node:
        return ClaimState(node, "", launched, registered)
    kind = next((k for k in ("Launched", "Registered", "Initialized") if not true(k)), "Initialized")
    condition = conditions.get(kind, {})
    detail = ": ".join(str(part) for part in (condition.get("reason"), condition.get("message")) if part)
    return ClaimState("", f"not {kind.lower()}" + (f" ({detail})" if detail else ""), launched, registered)


def chosen(labels: Mapping[str, str]) -> tuple[str, ...]:
    """A node's instance type, zone and capacity type, from its labels."""
    return tuple(labels.get(key, "") for key in CHOSEN_LABELS)
