"""``kubeplace bind``: verify a plan against the cluster as it is now, confirm, bind."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import click

from kubeplace.cli.options import Source
from kubeplace.cli.render import dump, stdout_console, table
from kubeplace.kube.binder import Binding, BindResult, Outcome
from kubeplace.kube.claim_binder import allocate_claims
from kubeplace.kube.client import Cluster
from kubeplace.kube.errors import InputError, KubeplaceError, PlanVerificationFailed
from kubeplace.kube.files import read_document
from kubeplace.kube.gpu_conventions import GpuConventions
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.objects import Pod, Snapshot
from kubeplace.kube.volume_binder import PodVolumes, bind_with_volumes
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.models.gpu import device_notes
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.plan import Placement, placements_from_dict
from kubeplace.plan.verify import Violation


def run_bind(src: Source, config: Configuration, profile: Profile, solver: SolverSettings,
             plan_file: Path | None, dry_run: bool, yes: bool, output: str) -> bool:
    if src.paths:
        raise InputError("bind works on the live cluster; give no SOURCE (use --plan FILE to bind a saved plan)")
    document = read_document(plan_file) if plan_file is not None else None
    if isinstance(document, Mapping) and document.get("provision"):
        raise InputError("the plan adds new nodes, which bind cannot create: bind it with "
                         "`kubeplace plan --provision --apply`", file=str(plan_file), field="provision")
    saved = placements_from_dict(document, str(plan_file)) if plan_file is not None else None
    cluster = connect(src.kubeconfig, src.context)
    snapshot = src.measured(load_live_snapshot(cluster, scheduler_name=profile.scheduler_name,
                                               namespaces=src.namespaces(), selector=src.selector))
    if saved is not None:
        placements = saved
    else:
        from kubeplace.plan.pipeline import make_plan

        planned = make_plan(snapshot, config, profile, solver)
        if planned.violations:  # made from this very snapshot: kubeplace contradicts itself
            raise PlanVerificationFailed(tuple(map(str, planned.violations)))
        placements = planned.plan.placements
    placements = with_current_uids(placements, snapshot)
    plan_order = {(p.namespace, p.name): i for i, p in enumerate(placements)}
    placements, taken = split_bound_meanwhile(placements, snapshot, dry_run)
    violations = verify_plan(snapshot, placements, config, profile)
    if violations:
        raise _refusal(violations, plan_order, str(plan_file) if plan_file is not None else "")
    if not placements and not taken:
        click.echo("nothing to bind")
        return True
    if placements and not yes and not _confirm(len(placements), dry_run):
        click.echo("aborted; nothing was bound", err=True)
        return False
    results = sorted(taken + bind_placements(cluster, snapshot, placements, config, dry_run),
                     key=lambda r: plan_order[(r.binding.namespace, r.binding.name)])
    report_results(results, output, dry_run)
    return all(r.outcome == "bound" for r in results)


def bind_placements(cluster: Cluster, snapshot: Snapshot, placements: Sequence[Placement], config: Configuration,
                    dry_run: bool) -> list[BindResult]:
    """Binds verified placements (their dynamic resource claims allocated and their volumes bound
    first), one result per pod."""
    pods = {(p.namespace, p.name): p for p in snapshot.pending}
    conv = config.gpu
    bindings = [Binding(p.namespace, p.name, p.uid, p.node, _device_note(p, pods, conv)) for p in placements]
    claims = {f"{p.namespace}/{p.name}": p.claims for p in placements if p.claims}
    bindings, not_allocated = allocate_claims(cluster, bindings, claims, dry_run)
    return not_allocated + bind_with_volumes(cluster, bindings, _volume_work(placements, snapshot), dry_run)


def _refusal(violations: Sequence[Violation], plan_order: Mapping[tuple[str, str], int],
            plan_file: str) -> KubeplaceError:
    """The one line for a plan that fails verification, before anything is written: the first
    violation, by the plan file, the pod and its placement (a plan kubeplace made just now and
    refuses is a bug: exit 3, as for ``plan``)."""
    if not plan_file:
        return PlanVerificationFailed(tuple(map(str, violations)))
    first = violations[0]
    index = plan_order.get((first.namespace, first.name))
    more = f" (and {len(violations) - 1} more violation(s))" if len(violations) > 1 else ""
    return InputError(f"{first.detail} [{first.rule}]{more}; the plan is refused, nothing was bound", file=plan_file,
                      obj=f"{first.namespace}/{first.name}" if first.namespace else first.name,
                      field=f"placements[{index}] (node {first.node})" if index is not None else "")


def _volume_work(placements: Sequence[Placement], snapshot: Snapshot) -> dict[str, PodVolumes]:
    """The volumes to bind before each pod (the plan's choices for its unbound claims)."""
    labels = {n.name: n.labels for n in snapshot.nodes}
    return {f"{p.namespace}/{p.name}": PodVolumes(p.namespace, p.name, p.node, labels.get(p.node, {}), p.volumes)
            for p in placements if p.volumes}


def split_bound_meanwhile(placements: tuple[Placement, ...], snapshot: Snapshot,
                           dry_run: bool) -> tuple[tuple[Placement, ...], list[BindResult]]:
    """A saved plan may name pods that another scheduler (or a person) bound since it was made.

    Those are not a reason to refuse the rest of the plan: the API server would answer 409 for
    them (nodeName is set once), so they are reported as conflicts, pod by pod, without a request,
    and the other placements are verified against the cluster as it is now (usage included)."""
    pending = {(p.namespace, p.name) for p in snapshot.pending}
    bound = {(p.namespace, p.name): p.node_name for p in snapshot.bound}
    keep: list[Placement] = []
    taken: list[BindResult] = []
    for p in placements:
        node = bound.get((p.namespace, p.name))
        if (p.namespace, p.name) in pending or node is None:
            keep.append(p)
            continue
        message = (f"already bound to node {node} since the plan was made (the API server answers "
                   "409 Conflict to a second binding); not sent")
        taken.append(BindResult(Binding(p.namespace, p.name, p.uid, p.node), Outcome.CONFLICT, message, dry_run))
    return tuple(keep), taken


def with_current_uids(placements: tuple[Placement, ...], snapshot: object) -> tuple[Placement, ...]:
    """A plan file may predate a pod being recreated under the same name: keep the uid it was
    planned for (verification then refuses the plan before anything is written: the claims and
    volumes written before the pod would name the new pod with the old uid); fill it in when absent."""
    from kubeplace.kube.objects import Snapshot

    assert isinstance(snapshot, Snapshot)
    uid = {(p.namespace, p.name): p.uid for p in snapshot.pending}
    return tuple(p if p.uid else replace(p, uid=uid.get((p.namespace, p.name), "")) for p in placements)


def _device_note(p: Placement, pods: Mapping[tuple[str, str], Pod], conv: GpuConventions) -> dict[str, str]:
    """Koordinator's device-allocated annotation for a GPU pod (see models/gpu.py)."""
    pod = pods.get((p.namespace, p.name))
    return {} if pod is None else device_notes(p.gpus, pod.requests, conv)


def _confirm(count: int, dry_run: bool) -> bool:
    if not sys.stdin.isatty():
        click.echo("error: refusing to bind without confirmation on a non-interactive input; pass --yes",
                   err=True)
        return False
    what = "validate (server dry run)" if dry_run else "bind"
    return click.confirm(f"{what} {count} pod(s)?", default=False)


def report_results(results: list[BindResult], output: str, dry_run: bool) -> None:
    if output in ("json", "yaml"):
        data = {"dryRun": dry_run, "results": [
            {"namespace": r.binding.namespace, "name": r.binding.name, "node": r.binding.node,
             "outcome": r.outcome, "message": r.message} for r in results]}
        click.echo(dump(data, output), nl=False)
        return
    rows = table("NAMESPACE", "POD", "NODE", "RESULT", "MESSAGE")
    for r in results:
        rows.add_row(r.binding.namespace, r.binding.name, r.binding.node, r.outcome, r.message)
    console = stdout_console()
    console.print(rows)
    bound = sum(r.outcome == "bound" for r in results)
    console.print(f"\n{bound}/{len(results)} bound{' (server dry run: nothing persisted)' if dry_run else ''}",
                  highlight=False)
