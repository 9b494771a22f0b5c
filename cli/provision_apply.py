"""``kubeplace plan --provision --apply``: create the plan's new nodes through Karpenter, wait
until they are ready, and bind the pods as ``bind`` binds them.

One NodeClaim per new node (``plan.new_nodes``); Karpenter launches it and the node registers
under a name its provider chooses, which replaces the plan's ``<nodePool>-<n>``. Once every claim
is initialized (or the timeout passes), the cluster is read again and the plan is verified
against it as it then is: a pod whose node did not come, or that no longer fits where it was
planned, is reported with the reason and not sent; the others (pods planned on existing nodes
too) are bound through ``pods/binding``, each once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import click

from kubeplace.cli.binding import bind_placements, report_results, split_bound_meanwhile, with_current_uids
from kubeplace.cli.options import Source
from kubeplace.cli.render import dump, stdout_console, table
from kubeplace.kube.binder import Binding, BindResult, Outcome
from kubeplace.kube.catalogue import PRICE_UNIT
from kubeplace.kube.errors import InputError
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.node_claims import chosen
from kubeplace.kube.objects import Snapshot
from kubeplace.models.config import Configuration, Profile
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.new_nodes import (
    Arrival,
    allow_disruption,
    create_claim,
    live_pools,
    to_stderr,
    wait_for_nodes,
    withdrawn,
)
from kubeplace.plan.plan import Placement, Plan
from kubeplace.plan.verify import Violation


def apply_provision(src: Source, config: Configuration, profile: Profile, snapshot: Snapshot,
                    plan: Plan, timeout: float, output: str) -> bool:
    """Creates the new nodes, waits for them, binds the plan; True when every pod was bound."""
    if src.paths:
        raise InputError("--apply creates nodes and binds pods in the live cluster; give no SOURCE", field="--apply")
    started = time.monotonic()
    cluster = connect(src.kubeconfig, src.context)
    new_nodes = plan.provision.nodes if plan.provision is not None else ()
    pools = live_pools(cluster)
    pending = {p.key: p for p in snapshot.pending}
    created = {n.name: create_claim(cluster, n, pools, pending, to_stderr) for n in new_nodes}
    arrivals = wait_for_nodes(cluster, new_nodes, created, timeout, started, to_stderr)
    arrivals = [withdrawn(cluster, a) for a in arrivals]
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
    allow_disruption(cluster, arrivals, to_stderr)
    _report(plan, arrivals, results, seconds, output)
    return all(r.outcome == Outcome.BOUND for r in results)


def compared(arrival: Arrival, live: Snapshot) -> Arrival:
    """The arrival with a note when its node registered as another instance type, zone or capacity
    type than planned (Karpenter re-picked), or is not in the cluster read after."""
    if not arrival.node:
        return arrival
    node = next((n for n in live.nodes if n.name == arrival.node), None)
    if node is None:
        return replace(arrival, node="", note=f"node {arrival.node} of NodeClaim {arrival.claim} is gone")
    template = arrival.planned.template
    planned = (template.instance_type.name, template.offering.zone, template.offering.capacity_type)
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


def _report(plan: Plan, arrivals: Sequence[Arrival], results: Sequence[BindResult], seconds: float,
            output: str) -> None:
    nodes = [{"node": a.planned.name, "nodeClaim": a.claim, "registeredAs": a.node,
              "instanceType": a.planned.template.instance_type.name, "zone": a.planned.template.offering.zone,
              "capacityType": a.planned.template.offering.capacity_type,
              "pricePerHour": a.planned.template.price / PRICE_UNIT, "seconds": round(a.seconds, 1), "note": a.note}
             for a in arrivals]
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
