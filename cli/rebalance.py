"""``kubeplace rebalance [SOURCE...]``: which running pods to move where, and (with --apply) evict them.

Registered in cli/main.py with ``main.add_command(rebalance_command)``. Without ``--apply`` it is
a dry run that writes nothing. SOURCE files are read as ``plan`` reads them (plus
PodDisruptionBudgets), so a cluster can be rebalanced on paper.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from kubeplace.cli.options import (
    FiniteFloatRange,
    Source,
    cluster_options,
    exit_with,
    load_config,
    node_timeout_option,
    note_skipped,
    refuse_input_as_report,
    report_option,
    solver_options,
    solver_settings,
)
from kubeplace.cli.render import dump, progress, recorder, say, stdout_console, table
from kubeplace.kube.errors import EXIT_INCOMPLETE, INT32_MAX, InputError, KubeplaceError
from kubeplace.kube.text import printable
from kubeplace.models.framework import Objective


@click.command("rebalance")
@click.argument("source", nargs=-1, type=click.Path(path_type=Path, exists=True))
@cluster_options
@solver_options
@click.option("--max-moves", type=click.IntRange(0, INT32_MAX), default=None,
              help="At most this many pods move in total.")
@click.option("--max-moves-per-node", type=click.IntRange(0, INT32_MAX), default=None,
              help="At most this many pods move away from any one node.")
@click.option("--max-moves-per-namespace", type=click.IntRange(0, INT32_MAX), default=None,
              help="At most this many pods of any one namespace move.")
@click.option("--exclude-namespace", multiple=True, metavar="NS",
              help="Never move pods of this namespace (repeatable).")
@click.option("--exclude-selector", default=None, metavar="SELECTOR", help="Never move pods matching this selector.")
@click.option("--allow-local-storage", is_flag=True, help="Pods with emptyDir/hostPath volumes may move too.")
@click.option("--make-room-for", default=None, metavar="NS/NAME",
              help="The fewest moves after which this pending pod (or gang) fits.")
@click.option("--profile", type=click.Choice([o.value for o in Objective]), default=None,
              help="Objective of the moves (default: the scheduler profile's objective).")
@click.option("--move-cost", type=FiniteFloatRange(min=0), default=None,
              help="Trade: a move must gain this much objective (default: best objective, then fewest moves).")
@click.option("--consolidate", is_flag=True,
              help="Which nodes to remove so that the cost per hour after moving their pods is least.")
@click.option("--replace", "replace_nodes", is_flag=True,
              help="With --consolidate: cheaper new nodes (NodePools' offerings) may take the removed nodes' pods.")
@click.option("--catalogue", "catalogue_paths", multiple=True, metavar="FILE",
              type=click.Path(path_type=Path, dir_okay=False),
              help="With --consolidate: instance types and prices; a node's price is the offering its labels name.")
@click.option("--node-group", "node_groups", multiple=True, metavar="KIND/NAME",
              help="With --consolidate: nodes of this group of another controller may go too (repeatable; KIND "
                   "eks, eksctl, gke, aks or capi). Karpenter's nodes need no opt-in; control-plane nodes never go.")
@click.option("--apply", "apply_", is_flag=True, help="Evict the planned pods (default: dry run, nothing written).")
@node_timeout_option("With --consolidate --replace --apply")
@click.option("--wave-size", type=click.IntRange(min=1), default=1, show_default=True,
              help="Evictions per wave; the cluster is re-checked against the plan between waves.")
@click.option("--lease-namespace", default="kubeplace-system", show_default=True,
              help="Namespace of the kubeplace-rebalance Lease and the targets ConfigMap.")
@click.option("--eviction-log", "eviction_log", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="With --apply: write each eviction's outcome here as it goes (an interrupted run keeps "
                   "what was moved).")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", help="Output format.")
@report_option
def rebalance_command(source: Sequence[Path], kubeconfig: str | None, context: str | None, namespace: str | None,
                      all_namespaces: bool, selector: str | None, metrics_max_age: float, config_path: Path | None,
                      scheduler_name: str | None, backend: str | None, time_limit: float | None,
                      workers: int | None, gap: float | None, seed: int | None, max_moves: int | None,
                      max_moves_per_node: int | None, max_moves_per_namespace: int | None,
                      exclude_namespace: tuple[str, ...], exclude_selector: str | None, allow_local_storage: bool,
                      make_room_for: str | None, profile: str | None, move_cost: float | None, consolidate: bool,
                      replace_nodes: bool, catalogue_paths: tuple[Path, ...], node_groups: tuple[str, ...],
                      apply_: bool, node_timeout: float,
                      wave_size: int, lease_namespace: str, eviction_log: Path | None, output: str,
                      report_path: Path | None) -> None:
    """Move running pods to balance (or pack) the cluster, or to make room for a pending pod.

    Only pods that may move are considered (never mirror, static, DaemonSet, terminating,
    system-critical or bare pods, nor pods with local storage unless allowed); -n and -l
    restrict the pods that may move. PodDisruptionBudgets' disruptionsAllowed are budgets.
    Evicted pods are recreated by their controllers and placed by their scheduler.
    --consolidate chooses the nodes to remove among those a Karpenter NodeClaim owns and those of
    the --node-group groups (with --apply: cordoned, drained, then removed through their owner;
    a Node object is never deleted; with --replace, the new nodes are created and initialized first).
    """
    try:
        _run(locals())
    except KubeplaceError as e:
        exit_with(e)


def _run(a: dict[str, Any]) -> None:
    from kubeplace.rebalance.apply import apply_moves, with_owners
    from kubeplace.rebalance.cluster_state import load_file_state, load_live_state
    from kubeplace.rebalance.makeroom import make_room
    from kubeplace.rebalance.model import Budgets
    from kubeplace.rebalance.movable import Rules
    from kubeplace.rebalance.solve_moves import Settings, rebalance

    refuse_input_as_report(a["report_path"], a["source"], a["config_path"], a["kubeconfig"])
    config = load_config(a["config_path"])
    prof = config.profile(a["scheduler_name"])
    if a["profile"]:
        prof = replace(prof, objective=Objective(a["profile"]))
    solver = solver_settings(config, a["backend"], a["time_limit"], a["workers"], a["gap"], a["seed"])
    src = Source(tuple(a["source"]), a["kubeconfig"], a["context"], a["namespace"], a["all_namespaces"],
                 a["selector"], a["metrics_max_age"])
    if a["apply_"] and src.paths:
        raise KubeplaceError("--apply needs the live cluster; SOURCE files are planned on paper only")
    rules = Rules(frozenset(a["exclude_namespace"]), a["exclude_selector"], _frozen(src.namespaces()),
                  a["selector"], a["allow_local_storage"])
    rules.check()
    catalogue = _catalogue(a)
    node_groups = _node_groups(a)
    cluster = None
    if src.paths:
        state = load_file_state(list(src.paths), prof.scheduler_name)
        note_skipped(state.snapshot)
    else:
        from kubeplace.kube.kubeconfig import connect

        cluster = connect(a["kubeconfig"], a["context"])
        state = load_live_state(cluster, prof.scheduler_name)
    state = replace(state, snapshot=src.measured(state.snapshot))
    settings = Settings(budgets=Budgets(a["max_moves"], a["max_moves_per_node"], a["max_moves_per_namespace"]),
                        move_cost=a["move_cost"], solver=solver)
    placements: tuple[tuple[str, str], ...] = ()
    with progress(True, solver.time_limit) as show:
        on_event, events = recorder(show)
        if a["consolidate"]:
            from kubeplace.rebalance.consolidate import consolidate

            consolidation = consolidate(state, catalogue, rules, config, prof, settings, a["replace_nodes"],
                                        node_groups)
        elif a["make_room_for"]:
            room = make_room(state, a["make_room_for"], rules, config, prof, settings)
            doc, moves, ok, placements = room.to_dict(), list(room.moves), room.fits, room.placements
        else:
            plan = rebalance(_layout(state, rules, config, prof), settings, on_event)
            doc, moves, ok = plan.to_dict(), list(plan.moves), True
    if a["consolidate"]:
        consolidation = replace(consolidation, moves=tuple(with_owners(consolidation.moves, state)))
        if a["report_path"] is not None:
            _consolidation_report(consolidation, state, config, events, a["report_path"])
        _consolidated(consolidation, cluster, a, state.snapshot)
    moves = with_owners(moves, state)
    if a["apply_"] and moves:
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            report = apply_moves(cluster, moves, dry_run=False, wave_size=a["wave_size"],
                                 lease_namespace=a["lease_namespace"], report_path=a["eviction_log"])
        finally:
            signal.signal(signal.SIGTERM, previous)
        doc["apply"] = report.to_dict()
        ok = ok and report.complete
    else:
        doc["apply"] = {"dry_run": True, "evicted": 0}
    _print(doc, a["output"], bool(a["make_room_for"]))
    if a["report_path"] is not None:
        from kubeplace.report.build import rebalance_report
        from kubeplace.report.html import write_report

        visual = rebalance_report(state.snapshot, moves, placements, _summary(doc, bool(a["make_room_for"])), events,
                                  doc.get("notes", []), config.gpu)
        write_report(a["report_path"], visual)
        click.echo(f"report: {printable(str(a['report_path']))}", err=True)
    sys.exit(0 if ok else EXIT_INCOMPLETE)


def _node_groups(a: dict[str, Any]) -> frozenset[str]:
    from kubeplace.rebalance.ownership import parse_node_groups

    return parse_node_groups(a["node_groups"])


def _catalogue(a: dict[str, Any]) -> tuple[Any, ...]:
    if not a["consolidate"]:
        if a["catalogue_paths"] or a["replace_nodes"] or a["node_groups"]:
            flag = "--catalogue" if a["catalogue_paths"] else "--replace" if a["replace_nodes"] else "--node-group"
            raise InputError(f"{flag} is read only with --consolidate", field=flag)
        return ()
    if a["replace_nodes"] and not a["catalogue_paths"]:
        raise InputError("--replace needs the instance types new nodes can be launched as", field="--catalogue",
                         expected="a catalogue file (Karpenter's kwok instance_types.json, or the YAML form)")
    if a["make_room_for"]:
        raise InputError("--consolidate and --make-room-for cannot be combined", field="--consolidate")
    from kubeplace.kube.files import load_catalogue

    return load_catalogue(list(a["catalogue_paths"])) if a["catalogue_paths"] else ()


def _consolidated(result: Any, cluster: Any, a: dict[str, Any], snapshot: Any) -> None:
    doc = result.to_dict()
    ok = True
    if a["apply_"] and result.drain:
        from kubeplace.rebalance.drain import Replacement, drain_nodes

        replacement = Replacement(result.added, snapshot, a["node_timeout"])
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            report = drain_nodes(cluster, result.drain, result.moves, wave_size=a["wave_size"],
                                 lease_namespace=a["lease_namespace"], report_path=a["eviction_log"],
                                 replacement=replacement)
        finally:
            signal.signal(signal.SIGTERM, previous)
        doc["apply"] = report.to_dict()
        ok = report.complete
    else:
        doc["apply"] = {"dry_run": not a["apply_"], "evicted": 0}
    if a["output"] in ("json", "yaml"):
        click.echo(dump(doc, a["output"]), nl=False)
    else:
        _print_consolidation(doc)
    sys.exit(0 if ok else EXIT_INCOMPLETE)


def _consolidation_report(result: Any, state: Any, config: Any, events: Any, path: Path) -> None:
    """The rebalance report of the moves, headed by the consolidation's summary and its nodes to drain."""
    from kubeplace.report.build import rebalance_report
    from kubeplace.report.html import write_report

    summary = _consolidation_lines(result.to_dict())
    drains = [f"drain {d.node} ({d.node_pool or 'no NodePool'}, {d.to_dict()['pricePerHour']:.4f}/h, {d.reason})"
              for d in result.drain]
    write_report(path, rebalance_report(state.snapshot, result.moves, (), [*summary, *drains], events,
                                        result.notes, config.gpu))
    click.echo(f"report: {printable(str(path))}", err=True)


def _consolidation_lines(doc: dict[str, Any]) -> list[str]:
    c, s = doc["consolidate"], doc["summary"]
    return [f"consolidate: cost per hour {c['costPerHourBefore']:.4f} -> {c['costPerHourAfter']:.4f} "
            f"(bound {c['bound']:.4f}), {s['nodes_removed']} node(s) removed, {s['pods_moved']} pod(s) moved, "
            f"{len(c['kept'])} may not go",
            f"Solver: status {s['status']}, {s['seconds']:.2f}s; verified: {'yes' if s['verified'] else 'no'}"]


def _print_consolidation(doc: dict[str, Any]) -> None:
    console = stdout_console()
    c = doc["consolidate"]
    applied = {n["node"]: n["outcome"] for n in doc["apply"].get("nodes", [])}
    nodes = table("DRAIN", "NODEPOOL", "PRICE/H", "REASON", "PODS", *(["OUTCOME"] if applied else []))
    added = table("NEW NODE", "NODEPOOL", "INSTANCE TYPE", "ZONE", "CAPACITY TYPE", "PRICE/H", "PODS")
    for n in c["add"]:
        added.add_row(n["node"], n["nodePool"], n["instanceType"], n["zone"], n["capacityType"],
                      f"{n['pricePerHour']:.4f}", str(len(n["pods"])))
    for d in c["drain"]:
        extra = [applied.get(d["node"], "")] if applied else []
        nodes.add_row(d["node"], d["nodePool"] or d.get("nodeGroup") or "-", f"{d['pricePerHour']:.4f}", d["reason"],
                      str(len(d["pods"])),
                      *extra)
    if c["drain"]:
        console.print(nodes)
    if c["add"]:
        console.print(added)
    evicted = {(r["namespace"], r["name"]): r["outcome"] for r in doc["apply"].get("results", [])}
    rows = table("POD", "FROM", "TO", *(["OUTCOME"] if evicted else []))
    for m in doc["moves"]:
        extra = [evicted.get((m["namespace"], m["name"]), "")] if evicted else []
        rows.add_row(f"{m['namespace']}/{m['name']}", m["from"], m["to"], *extra)
    if doc["moves"]:
        console.print(rows)
    for line in _consolidation_lines(doc):
        say(console, line)
    report = doc["apply"]
    if report.get("dry_run"):
        say(console, "dry run: nothing evicted or deleted (--apply to drain)")
        for d in c["drain"]:
            if d.get("removeWith"):
                say(console, f"{d['node']}: --apply drains it and leaves it cordoned; then: {d['removeWith']}")
            elif d.get("machine"):
                say(console, f"{d['node']}: --apply drains it, annotates Machine {d['machine']} "
                             f"cluster.x-k8s.io/delete-machine and scales MachineDeployment {d['nodeGroup']} down")
    elif "nodes" in report:
        for n in report["added"]:
            note = f" ({n['note']})" if n["note"] else ""
            say(console, f"new node {n['node']}: NodeClaim {n['nodeClaim'] or '-'}, registered as "
                         f"{n['registeredAs'] or '-'} after {n['seconds']:.0f}s{note}")
        line = f"evicted {report['evicted']}/{len(report['results'])}, nodes removed {report['nodes_removed']}"
        if report.get("nodes_drained"):
            line += f", drained for their node group to remove {report['nodes_drained']}"
        say(console, line + (f"; stopped: {report['stopped']}" if report["stopped"] else ""))
        for n in report["nodes"]:
            if n["outcome"] not in ("NodeClaim deleted",) and n["message"]:
                say(console, f"{n['node']}: {n['outcome']}: {n['message']}")
    for line in kept_lines(c["kept"]):
        say(console, f"kept {line}")
    for note in doc.get("notes", []):
        say(console, f"note: {note}")


def kept_lines(kept: list[dict[str, str]], shown: int = 5) -> list[str]:
    """One line per reason a node may not go, naming its nodes (the first ``shown``, then how many more)."""
    nodes: dict[str, list[str]] = {}
    for k in kept:
        nodes.setdefault(k["why"], []).append(k["node"])
    out = []
    for why, names in nodes.items():
        more = f" and {len(names) - shown} more" if len(names) > shown else ""
        out.append(f"{', '.join(names[:shown])}{more}: {why}")
    return out


def _layout(state: Any, rules: Any, config: Any, prof: Any) -> Any:
    from kubeplace.rebalance.layout import build_layout

    return build_layout(state, rules, config, prof)


def _frozen(namespaces: set[str] | None) -> frozenset[str] | None:
    return None if namespaces is None else frozenset(namespaces)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _summary(doc: dict[str, Any], room: bool) -> list[str]:
    """The summary of the answer: its first line is printed, all of them head the report."""
    s = doc["summary"]
    if room:
        where = ", ".join(f"{p['pod']} -> {p['node']}" for p in doc["placements"])
        return [f"make room for {s['target']}: {s['message']}" + (f" ({where})" if where else "")
                + ("; proven minimal" if s["proven_minimal"] and s["fits"] else "")]
    return [f"{s['profile']}: objective {s['objective_before']:.6g} -> {s['objective_after']:.6g}, "
            f"{s['pods_moved']} pod(s) moved, {s['pods_excluded']} may not move",
            f"Solver: status {s['status']}, {s['seconds']:.2f}s"]


def _print(doc: dict[str, Any], output: str, room: bool) -> None:
    if output in ("json", "yaml"):
        click.echo(dump(doc, output), nl=False)
        return
    console = stdout_console()
    applied = {(r["namespace"], r["name"]): r["outcome"] for r in doc["apply"].get("results", [])}
    rows = table("POD", "FROM", "TO", "WHY", *(["OUTCOME"] if applied else []))
    for m in doc["moves"]:
        extra = [applied.get((m["namespace"], m["name"]), "")] if applied else []
        rows.add_row(f"{m['namespace']}/{m['name']}", m["from"], m["to"], m["why"], *extra)
    if doc["moves"]:
        console.print(rows)
    say(console, _summary(doc, room)[0])
    report = doc["apply"]
    if report.get("dry_run"):
        say(console, "dry run: nothing evicted (--apply to evict)")
    else:
        line = f"evicted {report['evicted']}/{len(report['results'])}"
        if report["stopped"]:
            line += f"; stopped: {report['stopped']}"
        if report["targets_configmap"]:
            line += f"; targets in ConfigMap {report['targets_configmap']}"
        say(console, line)
    for note in doc.get("notes", []):
        say(console, f"note: {note}")
