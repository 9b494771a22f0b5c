"""A plan's new nodes made real through Karpenter: one NodeClaim each (``kube.node_claims``),
waited for until initialized. Shared by ``plan --provision --apply`` (``cli.provision_apply``,
which then binds the pods) and ``rebalance --consolidate --replace --apply``
(``rebalance.drain``, which drains the old nodes only once every new one is initialized).

Karpenter launches each claim and the node registers under a name its provider chooses, which
replaces the plan's ``<nodePool>-<n>``. Each claim is annotated ``karpenter.sh/do-not-disrupt``
until the caller is done with it (:func:`allow_disruption`): an empty new node is what
Karpenter's consolidation would remove first.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kubeplace.kube.client import Cluster
from kubeplace.kube.errors import ClusterError, NotFound
from kubeplace.kube.karpenter import GROUP
from kubeplace.kube.node_claims import DO_NOT_DISRUPT, PLURAL, VERSION, PoolIdentity, claim_state
from kubeplace.kube.objects import Pod
from kubeplace.plan.plan import NewNode

POLL_SECONDS = 1.0
"""How often the NodeClaims are read while waiting."""
NOT_READY = "not ready"
"""How the note of a claim out of time starts."""

Say = Callable[[str], None]
"""Where progress lines go (the command's stderr)."""


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


@dataclass(frozen=True)
class Arrival:
    """What became of one new node of the plan."""

    planned: NewNode
    claim: str
    """The NodeClaim created for it; "" when it could not be created."""
    node: str
    """The registered node's name once its claim is initialized; "" when it did not come."""
    note: str
    """Why it did not come, or how Karpenter launched it otherwise than planned; "" when as planned."""
    seconds: float
    """From the claim's creation to its node being ready (or to giving up)."""


def live_pools(cluster: Cluster) -> dict[str, Mapping[str, Any]]:
    """The metadata of the cluster's NodePools by name (what a claim needs of its NodePool)."""
    return {str(p.get("metadata", {}).get("name", "")): p.get("metadata", {})
            for p in cluster.list_objects(GROUP, VERSION, "nodepools")}


def create_claim(cluster: Cluster, new: NewNode, pools: Mapping[str, Mapping[str, Any]], pods: Mapping[str, Pod],
                 say: Say) -> tuple[str, str]:
    """(the NodeClaim's name, "") once created, or ("", why not): the claim of the template the
    plan bought ``new`` as. ``pods`` by key hold the pods planned on it (their requests are the
    claim's, with its DaemonSet pods')."""
    template = new.template
    meta = pools.get(template.node_pool.name)
    if meta is None:
        return "", f"NodePool {template.node_pool.name} is no longer in the cluster"
    requests: dict[str, int] = {}
    for key in new.pods:
        for resource, amount in pods[key].requests.items():
            requests[resource] = requests.get(resource, 0) + amount
    identity = PoolIdentity(str(meta.get("uid", "")), dict(meta.get("annotations") or {}))
    try:
        made = cluster.create_object(GROUP, VERSION, PLURAL, template.to_nodeclaim(new.name, requests, identity))
    except ClusterError as error:
        return "", f"NodeClaim not created: {error}"
    name = str(made.get("metadata", {}).get("name", ""))
    say(f"created NodeClaim {name} for {new.name} ({template.instance_type.name}, {template.offering.zone}, "
        f"{template.offering.capacity_type})")
    return name, ""


class ClaimLister(Protocol):
    """The part of :class:`kube.client.Cluster` waiting needs."""

    def list_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]: ...


def wait_for_nodes(cluster: ClaimLister, new_nodes: Sequence[NewNode], created: Mapping[str, tuple[str, str]],
                   timeout: float, started: float, say: Say,
                   on_poll: Callable[[], None] = lambda: None) -> list[Arrival]:
    """Polls the NodeClaims until each is initialized, gone, or ``timeout`` seconds have passed
    (the note of one out of time starts with "not ready"); one line to ``say`` each time the
    count of ready nodes changes. ``on_poll`` is called before each read (a consolidation
    renews its Lease there); what it raises ends the wait."""
    done: dict[str, Arrival] = {n.name: Arrival(n, "", "", created[n.name][1], 0.0) for n in new_nodes
                                if not created[n.name][0]}
    waiting: dict[str, str] = {}
    shown = -1
    while len(done) < len(new_nodes):
        elapsed = time.monotonic() - started
        on_poll()
        claims = {str(c.get("metadata", {}).get("name", "")): c for c in cluster.list_objects(GROUP, VERSION, PLURAL)}
        for new in new_nodes:
            name = created[new.name][0]
            if new.name in done:
                continue
            claim = claims.get(name)
            if claim is None:
                done[new.name] = Arrival(new, name, "", f"Karpenter deleted NodeClaim {name} without launching it "
                                         "(insufficient capacity, or its NodeClass is not ready: its Events say which)",
                                         elapsed)
                continue
            state = claim_state(claim)
            if state.node:
                done[new.name] = Arrival(new, name, state.node, "", elapsed)
            else:
                waiting[new.name] = f"NodeClaim {name} {state.waiting}"
        ready = sum(1 for a in done.values() if a.node)
        if ready != shown:
            say(f"new nodes ready: {ready}/{len(new_nodes)} after {elapsed:.0f}s")
            shown = ready
        if len(done) == len(new_nodes):
            break
        if elapsed >= timeout:
            for new in new_nodes:
                if new.name not in done:
                    done[new.name] = Arrival(new, created[new.name][0], "",
                                             f"{NOT_READY} after {timeout:g}s: {waiting.get(new.name, '')}", elapsed)
            break
        time.sleep(POLL_SECONDS)
    return [done[n.name] for n in new_nodes]


def withdrawn(cluster: Cluster, arrival: Arrival, *, always: bool = False) -> Arrival:
    """A claim whose node did not come in time is deleted (with ``always``, any claim created):
    a node it launched later would have no planned pod (and keep ``karpenter.sh/do-not-disrupt``)."""
    if not arrival.claim or not (always or (not arrival.node and arrival.note.startswith(NOT_READY))):
        return arrival
    try:
        cluster.delete_node_claim(arrival.claim)
    except NotFound:
        return arrival
    except ClusterError as error:
        return replace(arrival, note=f"{arrival.note}; not deleted: {error}".lstrip("; "))
    return replace(arrival, node="", note=f"{arrival.note}; NodeClaim deleted".lstrip("; "))


def allow_disruption(cluster: Cluster, arrivals: Sequence[Arrival], say: Say) -> None:
    """Takes ``karpenter.sh/do-not-disrupt`` off the new nodes once the caller is done with them:
    from now on Karpenter may consolidate them as any node of theirs."""
    for arrival in arrivals:
        if arrival.node:
            try:
                cluster.annotate_node(arrival.node, {DO_NOT_DISRUPT: None})
            except ClusterError as error:
                say(f"warning: {error}; node {arrival.node} keeps {DO_NOT_DISRUPT}")
