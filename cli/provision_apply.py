"""``kubeplace plan --provision --apply``: create the plan's new nodes through Karpenter, wait
until they are ready, and bind the pods as ``bind`` binds them.

One NodeClaim per new node (``kube.node_claims``); Karpenter launches it and the node registers
under a name its provider chooses, which replaces the plan's ``<nodePool>-<n>``. Once every claim
is initialized (or the timeout passes), the cluster is read again and the plan is verified
against it as it then is: a pod whose node did not come, or that no longer fits where it was
planned, is reported with the reason and not sent; the others (pods planned on existing nodes
too) are bound through ``pods/binding``, each once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import click

from kubeplace.cli.binding import bind_placements, report_results, split_bound_meanwhile, with_current_uids
from kubeplace.cli.options import Source
from kubeplace.cli.render import dump, stdout_console, table
from kubeplace.kube.binder import Binding, BindResult, Outcome
from kubeplace.kube.capacity import Candidate, candidate_nodes
from kubeplace.kube.catalogue import PRICE_UNIT, InstanceType
from kubeplace.kube.client import Cluster
from kubeplace.kube.errors import ClusterError, InputError, NotFound
from kubeplace.kube.karpenter import GROUP
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.node_claims import (
    DO_NOT_DISRUPT,
    PLURAL,
    VERSION,
    PoolIdentity,
    chosen,
    claim_state,
    node_claim,
)
from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, Profile
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.plan import NewNode, Placement, Plan
from kubeplace.plan.verify import Violation

POLL_SECONDS = 1.0
"""How often the NodeClaims are read while waiting."""


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


def apply_provision(src: Source, config: Configuration, profile: Profile, snapshot: Snapshot,
                    catalogue: Sequence[InstanceType], plan: Plan, timeout: float, output: str) -> bool:
    """Creates the new nodes, waits for them, binds the plan; True when every pod was bound."""
    if src.paths:
        raise InputError("--apply creates nodes and binds pods in the live cluster; give no SOURCE", field="--apply")
    started = time.monotonic()
    cluster = connect(src.kubeconfig, src.context)
    new_nodes = plan.provision.nodes if plan.provision is not None else ()
    pools = {str(p.get("metadata", {}).get("name", "")): p.get("metadata", {})
             for p in cluster.list_objects(GROUP, VERSION, "nodepools")}
    created = {n.name: _create_claim(cluster, snapshot, catalogue, n, pools) for n in new_nodes}
    arrivals = wait_for_nodes(cluster, new_nodes, created, timeout, started)
    arrivals = [_withdrawn(cluster, a) for a in arrivals]
    live = src.measured(load_live_snapshot(cluster, scheduler_name=profile.scheduler_name,
                                           namespaces=src.namespaces(), selector=src.selector))
    arrivals = [compared(a, live) for a in arrivals]
    placements = with_current_uids(plan.placements, live)
    order = {(p.namespace, p.name): i for i, p in enumerate(placements)}
    placements, missing = onto_registered(placements, arrivals)
    placements, taken = split_bound_meanwhile(placements, live, False)
    placements, refused = still_fitting(live, placements, config, profile)
    results = sorted([*missing, *taken, *refused, *bind_placements(cluster, live, placements, config, False)],
                     key=lambda r: order[(r.binding.namespace, r.binding.name)])
    seconds = time.monotonic() - started
    _allow_disruption(cluster, arrivals)
    _report(plan, arrivals, results, seconds, output)
    return all(r.outcome == Outcome.BOUND for r in results)


def _create_claim(cluster: Cluster, snapshot: Snapshot, catalogue: Sequence[InstanceType], new: NewNode,
                  pools: Mapping[str, Mapping[str, Any]]) -> tuple[str, str]:
    """(the NodeClaim's name, "") once created, or ("", why not)."""
    candidate = bought_as(new, snapshot, catalogue)
    meta = pools.get(new.node_pool)
    if meta is None:
        return "", f"NodePool {new.node_pool} is no longer in the cluster"
    pods = {p.key: p for p in snapshot.pending}
    requests: dict[str, int] = {}
    for key in new.pods:
        for resource, amount in pods[key].requests.items():
            requests[resource] = requests.get(resource, 0) + amount
    identity = PoolIdentity(str(meta.get("uid", "")), dict(meta.get("annotations") or {}))
    try:
        made = cluster.create_object(GROUP, VERSION, PLURAL, node_claim(candidate, new.name, requests, identity))
    except ClusterError as error:
        return "", f"NodeClaim not created: {error}"
    name = str(made.get("metadata", {}).get("name", ""))
    click.echo(f"created NodeClaim {name} for {new.name} ({new.instance_type}, {new.zone}, {new.capacity_type})",
               err=True)
    return name, ""


def bought_as(new: NewNode, snapshot: Snapshot, catalogue: Sequence[InstanceType]) -> Candidate:
    """The candidate a new node of the plan was bought as (its NodePool, instance type and
    offering, with the alternatives its NodePool's minValues ask for), as
    :func:`kube.capacity.candidate_nodes` builds it for the plan."""
    pool = next(p for p in snapshot.node_pools if p.name == new.node_pool)
    return next(c for c in candidate_nodes([pool], catalogue, snapshot.daemon_pods)
                if c.instance_type.name == new.instance_type and c.offering.zone == new.zone
                and c.offering.capacity_type == new.capacity_type)


class ClaimLister(Protocol):
    """The part of :class:`kube.client.Cluster` waiting needs."""

    def list_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]: ...


def wait_for_nodes(cluster: ClaimLister, new_nodes: Sequence[NewNode], created: Mapping[str, tuple[str, str]],
                    timeout: float, started: float) -> list[Arrival]:
    """Polls the NodeClaims until each is initialized, gone, or ``timeout`` seconds have passed
    (the note of one out of time starts with "not ready"); one line on stderr each time the count
    of ready nodes changes."""
    done: dict[str, Arrival] = {n.name: Arrival(n, "", "", created[n.name][1], 0.0) for n in new_nodes
                                if not created[n.name][0]}
    waiting: dict[str, str] = {}
    shown = -1
    while len(done) < len(new_nodes):
        elapsed = time.monotonic() - started
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
            click.echo(f"new nodes ready: {ready}/{len(new_nodes)} after {elapsed:.0f}s", err=True)
            shown = ready
        if len(done) == len(new_nodes):
            break
        if elapsed >= timeout:
            for new in new_nodes:
                if new.name not in done:
                    done[new.name] = Arrival(new, created[new.name][0], "",
                                             f"not ready after {timeout:g}s: {waiting.get(new.name, '')}", elapsed)
            break
        time.sleep(POLL_SECONDS)
    return [done[n.name] for n in new_nodes]


def _withdrawn(cluster: Cluster, arrival: Arrival) -> Arrival:
    """A claim whose node did not come in time is deleted: a node it launched later would have
    no planned pod (and keep ``karpenter.sh/do-not-disrupt``)."""
    if arrival.node or not arrival.claim or not arrival.note.startswith("not ready"):
        return arrival
    try:
        cluster.delete_node_claim(arrival.claim)
    except NotFound:
        return arrival
    except ClusterError as error:
        return replace(arrival, note=f"{arrival.note}; not deleted: {error}")
    return replace(arrival, note=f"{arrival.note}; NodeClaim deleted")


def compared(arrival: Arrival, live: Snapshot) -> Arrival:
    """The arrival with a note when its node registered as another instance type, zone or capacity
    type than planned (Karpenter re-picked), or is not in the cluster read after."""
    if not arrival.node:
        return arrival
    node = next((n for n in live.nodes if n.name == arrival.node), None)
    if node is None:
        return replace(arrival, node="", note=f"node {arrival.node} of NodeClaim {arrival.claim} is gone")
    planned = (arrival.planned.instance_type, arrival.planned.zone, arrival.planned.capacity_type)
    registered = chosen(node.labels)
    if registered == planned:
        return arrival
    return replace(arrival, note=f"Karpenter launched {', '.join(registered)} instead of the planned "
                                 f"{', '.join(planned)}")


def onto_registered(placements: Sequence[Placement], arrivals: Sequence[Arrival],
                    ) -> tuple[tuple[Placement, ...], list[BindResult]]:
    """The placements with each new node's name replaced by the registered node's, and a result
    for each pod planned on a new node that did not come."""
    by_name = {a.planned.name: a for a in arrivals}
    keep: list[Placement] = []
    missing: list[BindResult] = []
    for p in placements:
        arrival = by_name.get(p.node)
        if arrival is None:
            keep.append(p)
        elif arrival.node:
            keep.append(replace(p, node=arrival.node))
        else:
            missing.append(BindResult(Binding(p.namespace, p.name, p.uid, p.node), Outcome.NODE_MISSING,
                                      f"new node {p.node} did not come: {arrival.note}"))
    return tuple(keep), missing


def still_fitting(snapshot: Snapshot, placements: Sequence[Placement], config: Configuration,
                  profile: Profile) -> tuple[tuple[Placement, ...], list[BindResult]]:
    """The placements the verifier accepts on the cluster as it is now, and a result for each pod
    it refuses (with the first reason), taken out one round at a time until the rest is accepted
    (a pod may have depended on one taken out)."""
    keep = tuple(placements)
    refused: list[BindResult] = []
    while keep:
        violations = verify_plan(snapshot, keep, config, profile)
        if not violations:
            break
        first: dict[tuple[str, str], Violation] = {}
        for v in violations:
            first.setdefault((v.namespace, v.name), v)
        out = [p for p in keep if (p.namespace, p.name) in first]
        if not out:  # a violation naming no planned pod: nothing is bound
            out = list(keep)
            first = {(p.namespace, p.name): violations[0] for p in keep}
        for p in out:
            v = first[(p.namespace, p.name)]
            refused.append(BindResult(Binding(p.namespace, p.name, p.uid, p.node), Outcome.NOT_FITTING,
                                      f"no longer fits: {v.detail} [{v.rule}]"))
        keep = tuple(p for p in keep if (p.namespace, p.name) not in first)
    return keep, refused


def _allow_disruption(cluster: Cluster, arrivals: Sequence[Arrival]) -> None:
    """Takes ``karpenter.sh/do-not-disrupt`` off the new nodes once their pods are bound: from now
    on Karpenter may consolidate them as any node of theirs."""
    for arrival in arrivals:
        if arrival.node:
            try:
                cluster.annotate_node(arrival.node, {DO_NOT_DISRUPT: None})
            except ClusterError as error:
                click.echo(f"warning: {error}; node {arrival.node} keeps {DO_NOT_DISRUPT}", err=True)


def _report(plan: Plan, arrivals: Sequence[Arrival], results: Sequence[BindResult], seconds: float,
            output: str) -> None:
    nodes = [{"node": a.planned.name, "nodeClaim": a.claim, "registeredAs": a.node,
              "instanceType": a.planned.instance_type, "zone": a.planned.zone,
              "capacityType": a.planned.capacity_type, "pricePerHour": a.planned.price / PRICE_UNIT,
              "seconds": round(a.seconds, 1), "note": a.note} for a in arrivals]
    if output in ("json", "yaml"):
        applied = {"nodes": nodes, "seconds": round(seconds, 1), "results": [
            {"namespace": r.binding.namespace, "name": r.binding.name, "node": r.binding.node,
             "outcome": r.outcome, "message": r.message} for r in results]}
        click.echo(dump({**plan.to_dict(), "apply": applied}, output), nl=False)
        return
    console = stdout_console()
    if arrivals:
        console.print()
        rows = table("NEW NODE", "NODECLAIM", "REGISTERED AS", "SECONDS", "NOTE")
        for a in arrivals:
            rows.add_row(a.planned.name, a.claim or "-", a.node or "-", f"{a.seconds:.1f}", a.note)
        console.print(rows)
    console.print()
    report_results(list(results), output, False)
    console.print(f"applied in {seconds:.1f}s", highlight=False)
