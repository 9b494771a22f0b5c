"""``kubeplace bench capacity``: the real Karpenter (its kwok provider) and ``kubeplace plan
--provision`` on the same backlogs, catalogue and NodePools.

For each workload, on the control plane emptied of the previous one: Karpenter provisions for the
pending pods while the kube-scheduler binds them to its nodes (nodes by type, zone and capacity
type, cost per hour, pods bound, time to the last binding); then ``kubeplace plan --provision``
plans the same backlog from a snapshot of the same objects (cost per hour, pods placed, time,
bound and gap), in a subprocess run from a kubeplace checkout (this one, or
``--kubeplace-checkout``). Consolidation: a Deployment scaled down leaving half-empty nodes,
then Karpenter's WhenEmptyOrUnderutilized consolidation (cost before and after, nodes removed,
pods evicted, time), and kubeplace's ``rebalance --consolidate --replace --apply`` on the same
cluster built again, Karpenter's consolidation kept off meanwhile (``capacity_karpenter``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from kubeplace_bench.capacity_karpenter import (
    KARPENTER_API,
    Karpenter,
    create,
    karpenter_version,
    kubeplace_consolidates,
    set_consolidate_after,
    start_karpenter,
)
from kubeplace_bench.capacity_workloads import (
    CAPACITY_TYPE_LABEL,
    INSTANCE_TYPE_LABEL,
    ZONE_LABEL,
    Workload,
    prices,
)
from kubeplace_bench.cluster import KUBEPLACE, BenchError, Say
from kubeplace_bench.controlplane import ApiHttp, ApiRefused, ControlPlane, wait_for
from kubeplace_bench.controlplane_binaries import REPO_ROOT

NODEPOOL_LABEL = "karpenter.sh/nodepool"
UNAVAILABLE = "n/a (plan --provision unavailable)"
NO_CONSOLIDATE = "n/a (rebalance --consolidate unavailable)"
APPLIED = "kubeplace-apply"
"""The row of ``plan --provision --apply``, measured on the cluster."""


@dataclass(frozen=True)
class Settings:
    seed: int = 0
    scale: float = 1.0
    time_limit: float = 30.0
    """kubeplace's solver budget per workload, seconds."""
    settle: float = 60.0
    """A run ends after this many seconds without a binding, a node or an eviction."""
    timeout: float = 600.0
    kubeplace_checkout: Path = REPO_ROOT


# --------------------------------------------------------------------------- the cluster as it is


def pool_nodes(api: ApiHttp, pools: Sequence[str]) -> list[dict[str, Any]]:
    selector = f"{NODEPOOL_LABEL} in ({','.join(pools)})"
    items: list[dict[str, Any]] = api.request("GET", "/api/v1/nodes", query={"labelSelector": selector})["items"]
    return items


def namespace_pods(api: ApiHttp, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    return items


def node_figures(nodes: Sequence[Mapping[str, Any]], price: Mapping[tuple[str, str, str], float]) -> dict[str, Any]:
    """Nodes by ``type/zone/capacity type`` and their cost per hour from the catalogue."""
    offerings = [tuple(node["metadata"]["labels"].get(key, "?") for key in
                       (INSTANCE_TYPE_LABEL, ZONE_LABEL, CAPACITY_TYPE_LABEL)) for node in nodes]
    counts = Counter("/".join(offering) for offering in offerings)
    cost = sum(price.get((a, b, c), 0.0) for a, b, c in offerings)
    return {"nodes": len(nodes), "nodesByType": dict(sorted(counts.items())), "costPerHour": round(cost, 4)}


# --------------------------------------------------------------------------- provisioning


def karpenter_provisioning(api: ApiHttp, workload: Workload, namespace: str,
                           price: Mapping[tuple[str, str, str], float], settings: Settings,
                           say: Say) -> dict[str, Any]:
    """Karpenter provisions for the workload's pods, which the kube-scheduler binds."""
    pools = [p["metadata"]["name"] for p in workload.node_pools]
    for pool in workload.node_pools:
        create(api, f"{KARPENTER_API}/nodepools", pool)
    start = time.monotonic()
    for pod in workload.pods:
        api.request("POST", f"/api/v1/namespaces/{namespace}/pods", {**pod, "metadata": {
            **pod["metadata"], "namespace": namespace}})
    bound_at = _wait_bound(api, namespace, pools, len(workload.pods), start, settings)
    figures = node_figures(pool_nodes(api, pools), price)
    say(f"  karpenter: {len(bound_at)}/{len(workload.pods)} bound on {figures['nodes']} node(s), "
        f"{figures['costPerHour']:.4f}/h")
    return {"scheduler": "karpenter", "pods": len(workload.pods), "placed": len(bound_at), **figures,
            "seconds": round(max(bound_at.values(), default=0.0), 2)}


def _wait_bound(api: ApiHttp, namespace: str, pools: Sequence[str], wanted: int, start: float,
                settings: Settings) -> dict[str, float]:
    """Seconds from ``start`` to each pod's binding (as first seen), until every pod is bound or
    nothing changed for ``settings.settle`` seconds (or ``settings.timeout`` passed)."""
    bound_at: dict[str, float] = {}
    nodes, last_change = 0, time.monotonic()
    while True:
        now = time.monotonic()
        for pod in namespace_pods(api, namespace):
            if pod["spec"].get("nodeName") and pod["metadata"]["name"] not in bound_at:
                bound_at[pod["metadata"]["name"]], last_change = now - start, now
        count = len(pool_nodes(api, pools))
        if count != nodes:
            nodes, last_change = count, now
        if len(bound_at) >= wanted or now - last_change > settings.settle or now - start > settings.timeout:
            return bound_at
        time.sleep(0.5)


def empty(api: ApiHttp, namespace: str, pools: Sequence[str], say: Say) -> None:
    """The namespace's pods, the NodePools and their nodes deleted (Karpenter terminates its nodes;
    a finalizer it did not remove within two minutes is dropped)."""
    for kind in ("deployments", "replicasets"):  # nothing left to recreate the pods
        api.request("DELETE", f"/apis/apps/v1/namespaces/{namespace}/{kind}")
    api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", query={"gracePeriodSeconds": "0"})
    wait_for(lambda: not namespace_pods(api, namespace), 120, f"the pods of {namespace} deleted", interval=0.5)
    for pool in pools:
        _delete(api, f"{KARPENTER_API}/nodepools/{pool}")
    try:
        wait_for(lambda: not pool_nodes(api, pools) and not _claims(api, pools), 120, "Karpenter's nodes gone", 1.0)
    except TimeoutError:
        say("  Karpenter left nodes behind after 120 s: their finalizers dropped")
        for claim in _claims(api, pools):
            _force_delete(api, f"{KARPENTER_API}/nodeclaims/{claim['metadata']['name']}")
        for node in pool_nodes(api, pools):
            _force_delete(api, f"/api/v1/nodes/{node['metadata']['name']}")
    _delete(api, f"/api/v1/namespaces/{namespace}")


def _claims(api: ApiHttp, pools: Sequence[str]) -> list[dict[str, Any]]:
    selector = f"{NODEPOOL_LABEL} in ({','.join(pools)})"
    items: list[dict[str, Any]] = api.request("GET", f"{KARPENTER_API}/nodeclaims",
                                              query={"labelSelector": selector})["items"]
    return items


def _delete(api: ApiHttp, path: str) -> None:
    try:
        api.request("DELETE", path)
    except ApiRefused as refused:
        if refused.status != 404:
            raise


def _force_delete(api: ApiHttp, path: str) -> None:
    try:
        api.request("PATCH", path, {"metadata": {"finalizers": None}})
    except ApiRefused as refused:
        if refused.status != 404:
            raise
    _delete(api, path)


# --------------------------------------------------------------------------- kubeplace


def write_snapshot(directory: Path, workload: Workload, namespace: str) -> Path:
    """The workload's NodePools and pending pods as the files ``kubeplace plan`` reads, the pods
    given to kubeplace (``spec.schedulerName``)."""
    directory.mkdir(parents=True, exist_ok=True)
    pods = [{**pod, "metadata": {**pod["metadata"], "namespace": namespace},
             "spec": {**pod["spec"], "schedulerName": KUBEPLACE}} for pod in workload.pods]
    namespaced = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    (directory / "cluster.yaml").write_text(yaml.safe_dump_all([namespaced, *workload.node_pools, *pods],
                                                               sort_keys=False))
    return directory


def provision_available(checkout: Path) -> bool:
    """Whether that checkout's ``kubeplace plan`` has ``--provision``."""
    result = _kubeplace(checkout, ["plan", "--help"], timeout=120)
    return result.returncode == 0 and "--provision" in result.stdout


def kubeplace_provisioning(checkout: Path, snapshot: Path, catalogue_file: Path, settings: Settings,
                           say: Say) -> dict[str, Any]:
    """``kubeplace plan SNAPSHOT --provision --catalogue FILE -o json`` from ``checkout``."""
    args = ["plan", str(snapshot), "--provision", "--catalogue", str(catalogue_file), "-o", "json",
            "--time-limit", str(settings.time_limit),
            "--seed", str(settings.seed)]
    start = time.monotonic()
    plan = _kubeplace_json(checkout, args, settings, say)
    seconds = time.monotonic() - start
    if "unavailable" in plan:
        return plan
    figures = provision_figures(plan)
    say(f"  kubeplace: {figures['placed']} placed on {figures['nodes']} new node(s), {figures['costPerHour']}/h")
    return {"scheduler": "kubeplace", **figures, "seconds": round(seconds, 2)}


def provision_figures(plan: Mapping[str, Any]) -> dict[str, Any]:
    """Pods placed, new nodes by type, cost per hour, bound and gap of a provisioning plan (the
    ``provision*`` fields at the top or in its summary), whether the independent verifier
    re-checked it, and the plan's own seconds (the table's are the command's, start-up included)."""
    summary = plan.get("summary") or {}

    def field(name: str) -> Any:
        return plan.get(name, summary.get(name))

    provision = field("provision") or []
    counts = Counter("/".join(str(n.get(key, "?")) for key in ("instanceType", "zone", "capacityType"))
                     for n in provision)
    return {"pods": int(summary.get("pods_placed", 0)) + int(summary.get("pods_unplaced", 0)),
            "placed": int(summary.get("pods_placed", 0)), "nodes": len(provision),
            "nodesByType": dict(sorted(counts.items())), "costPerHour": field("provisionCostPerHour"),
            "bound": field("provisionBound"), "gap": field("provisionGap"), "verified": summary.get("verified"),
            "planSeconds": summary.get("seconds")}


def _kubeplace_json(checkout: Path, args: Sequence[str], settings: Settings, say: Say) -> dict[str, Any]:
    """The JSON a kubeplace command prints, or the row saying it failed (``unavailable``)."""
    return _parsed(_kubeplace(checkout, args, timeout=settings.time_limit * 4 + 300), say)


def _parsed(result: subprocess.CompletedProcess[str], say: Say) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc
    except ValueError:
        line = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        say(f"  kubeplace: failed: {line}")
        return {"scheduler": "kubeplace", "unavailable": f"n/a (failed: {line[:200]})"}


def _kubeplace(checkout: Path, args: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    try:
        return subprocess.run([sys.executable, "-m", "kubeplace.cli.main", *args], cwd=checkout, env=env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"timed out after {timeout:.0f}s")


def _kubeplace_started(checkout: Path, args: Sequence[str], out: IO[str], err: IO[str]) -> subprocess.Popen[str]:
    """A kubeplace command started from the checkout, its output into ``out`` and ``err``."""
    return subprocess.Popen([sys.executable, "-m", "kubeplace.cli.main", *args], cwd=checkout,
                            env={**os.environ, "PYTHONPATH": str(checkout)}, stdout=out, stderr=err,
                            stdin=subprocess.DEVNULL, text=True)


def apply_available(checkout: Path) -> bool:
    """Whether that checkout's ``kubeplace plan`` has ``--apply`` (creating the new nodes)."""
    result = _kubeplace(checkout, ["plan", "--help"], timeout=120)
    return result.returncode == 0 and "--apply" in result.stdout


def kubeplace_applied(api: ApiHttp, kubeconfig: Path, workload: Workload, namespace: str, catalogue_file: Path,
                      price: Mapping[tuple[str, str, str], float], settings: Settings, say: Say) -> dict[str, Any]:
    """``kubeplace plan --provision --apply`` on the emptied cluster: the workload's NodePools and
    pods (given to kubeplace, so that neither the kube-scheduler nor Karpenter acts on them)
    created, then the command creates its nodes as NodeClaims, Karpenter launches them and the
    command binds the pods. Measured on the cluster: nodes launched, their cost, pods bound, and
    the seconds from the command's start (the plan included) to its end, after the last binding."""
    pools = [p["metadata"]["name"] for p in workload.node_pools]
    for pool in workload.node_pools:
        create(api, f"{KARPENTER_API}/nodepools", pool)
    for pod in workload.pods:
        api.request("POST", f"/api/v1/namespaces/{namespace}/pods", {
            **pod, "metadata": {**pod["metadata"], "namespace": namespace},
            "spec": {**pod["spec"], "schedulerName": KUBEPLACE}})
    args = ["plan", "--kubeconfig", str(kubeconfig), "-n", namespace, "--provision", "--catalogue",
            str(catalogue_file), "--apply", "-o", "json", "--time-limit", str(settings.time_limit),
            "--seed", str(settings.seed), "--node-timeout", str(settings.settle)]
    start = time.monotonic()
    result = _kubeplace(settings.kubeplace_checkout, args, timeout=settings.time_limit * 4 + settings.timeout)
    seconds = time.monotonic() - start
    try:
        applied = json.loads(result.stdout)["apply"]
    except (ValueError, KeyError, TypeError):
        line = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        say(f"  kubeplace --apply: failed: {line}")
        return {"scheduler": APPLIED, "unavailable": f"n/a (failed: {line[:200]})"}
    bound = sum(1 for pod in namespace_pods(api, namespace) if pod["spec"].get("nodeName"))
    figures = node_figures(pool_nodes(api, pools), price)
    notes = sorted({n["note"] for n in applied["nodes"] if n["note"]})
    say(f"  kubeplace --apply: {bound}/{len(workload.pods)} bound on {figures['nodes']} node(s), "
        f"{figures['costPerHour']:.4f}/h" + "".join(f"; {note}" for note in notes))
    return {"scheduler": APPLIED, "pods": len(workload.pods), "placed": bound, **figures, "seconds": round(seconds, 2),
            "applySeconds": applied["seconds"], "exitCode": result.returncode, "notes": notes}


# --------------------------------------------------------------------------- consolidation


@dataclass(frozen=True)
class _Fragmented:
    pools: tuple[str, ...]
    nodes: tuple[str, ...]
    pod_uids: frozenset[str]
    figures: Mapping[str, Any]
    pods_per_node: tuple[int, ...]
    """The workload's pods on each node, most first: what the fewest evictions depend on."""


def _fragment(api: ApiHttp, workload: Workload, namespace: str, price: Mapping[tuple[str, str, str], float],
              settings: Settings, say: Say) -> _Fragmented:
    """The Deployment provisioned for by Karpenter (consolidation off), then scaled down."""
    if workload.deployment is None:
        raise BenchError(f"workload {workload.name} has no Deployment to consolidate")
    pools = tuple(p["metadata"]["name"] for p in workload.node_pools)
    for pool in workload.node_pools:
        create(api, f"{KARPENTER_API}/nodepools", pool)
    name, replicas = workload.deployment["metadata"]["name"], workload.deployment["spec"]["replicas"]
    api.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", workload.deployment)
    wait_for(lambda: _bound(api, namespace) >= replicas, settings.timeout, f"{replicas} pods of {name} bound", 1.0)
    api.request("PATCH", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
                {"spec": {"replicas": workload.scale_to}})
    wait_for(lambda: len(namespace_pods(api, namespace)) == workload.scale_to, 120,
             f"{name} scaled down to {workload.scale_to}", 1.0)
    nodes = pool_nodes(api, pools)
    figures = node_figures(nodes, price)
    say(f"  fragmented: {workload.scale_to} pods on {figures['nodes']} node(s), {figures['costPerHour']:.4f}/h")
    pods = namespace_pods(api, namespace)
    on = Counter(p["spec"].get("nodeName", "") for p in pods)
    names = tuple(n["metadata"]["name"] for n in nodes)
    return _Fragmented(pools, names, frozenset(p["metadata"]["uid"] for p in pods), figures,
                       tuple(sorted((on.get(name, 0) for name in names), reverse=True)))


def _consolidated(api: ApiHttp, scheduler: str, workload: Workload, namespace: str, before: _Fragmented,
                  price: Mapping[tuple[str, str, str], float], seconds: float, say: Say) -> dict[str, Any]:
    """The row of a consolidation: the nodes and pods now against ``before``."""
    after_nodes = pool_nodes(api, before.pools)
    after = node_figures(after_nodes, price)
    names_after = {n["metadata"]["name"] for n in after_nodes}
    evicted = len(before.pod_uids - {p["metadata"]["uid"] for p in namespace_pods(api, namespace)})
    say(f"  {scheduler}: {after['nodes']} node(s), {after['costPerHour']:.4f}/h, {evicted} pod(s) evicted")
    return {"scheduler": scheduler, "pods": workload.scale_to, "bound": _bound(api, namespace),
            "nodesBefore": before.figures["nodes"], "costPerHourBefore": before.figures["costPerHour"],
            "nodesByTypeBefore": before.figures["nodesByType"], "podsPerNodeBefore": list(before.pods_per_node),
            "nodesAfter": after["nodes"],
            "costPerHourAfter": after["costPerHour"], "nodesByTypeAfter": after["nodesByType"],
            "nodesRemoved": len(set(before.nodes) - names_after), "nodesLaunched": len(names_after - set(before.nodes)),
            "podsEvicted": evicted, "seconds": round(seconds, 2)}


def karpenter_consolidation(api: ApiHttp, karpenter: Karpenter, plane: ControlPlane, workload: Workload,
                            namespace: str, price: Mapping[tuple[str, str, str], float], catalogue_file: Path | None,
                            settings: Settings, say: Say) -> dict[str, Any]:
    """The Deployment provisioned for, scaled down, then Karpenter's consolidation let loose. With
    ``catalogue_file``, kubeplace's dry run on the same fragmented cluster first (``onThisStart``:
    its cost after and evictions, what the two rows compare on one start), on the pools as
    Karpenter will consolidate them (``consolidateAfter: 0s``) while Karpenter is stopped."""
    before = _fragment(api, workload, namespace, price, settings, say)
    same_start: dict[str, Any] = {}
    if catalogue_file is not None:
        with kubeplace_consolidates(api, karpenter, before.pools, namespace, lambda: True):
            same_start = _dry_run(plane, namespace, catalogue_file, settings, say)
    start = time.monotonic()
    set_consolidate_after(api, before.pools, "0s")
    last_change = _wait_quiet(api, namespace, before.pools, start, settings)
    row = _consolidated(api, "karpenter", workload, namespace, before, price, last_change - start, say)
    return {**row, **({"kubeplaceOnThisStart": same_start} if same_start else {})}


def _consolidate_args(plane: ControlPlane, namespace: str, catalogue_file: Path, settings: Settings) -> list[str]:
    return ["rebalance", "--consolidate", "--replace", "--catalogue", str(catalogue_file), "--kubeconfig",
            str(plane.admin_kubeconfig), "-n", namespace, "--lease-namespace", namespace, "-o", "json",
            "--time-limit", str(settings.time_limit), "--seed", str(settings.seed)]


def _dry_run(plane: ControlPlane, namespace: str, catalogue_file: Path, settings: Settings,
             say: Say) -> dict[str, Any]:
    """``rebalance --consolidate --replace`` without --apply: what kubeplace would do on this cluster."""
    doc = _kubeplace_json(settings.kubeplace_checkout, _consolidate_args(plane, namespace, catalogue_file, settings),
                          settings, say)
    if "unavailable" in doc:
        return {}
    plan = doc.get("consolidate") or {}
    say(f"  kubeplace (dry run on this start): {plan.get('costPerHourAfter')}/h, "
        f"{len(doc.get('moves') or [])} pod(s) to evict")
    return {"costPerHourAfter": plan.get("costPerHourAfter"), "podsEvicted": len(doc.get("moves") or []),
            "nodesRemoved": len(plan.get("drain") or []), "nodesAdded": len(plan.get("add") or [])}


def consolidate_available(checkout: Path) -> bool:
    """Whether that checkout's ``kubeplace rebalance`` has ``--consolidate``."""
    result = _kubeplace(checkout, ["rebalance", "--help"], timeout=120)
    return result.returncode == 0 and "--consolidate" in result.stdout


def kubeplace_consolidation(api: ApiHttp, karpenter: Karpenter, plane: ControlPlane, workload: Workload,
                            namespace: str, price: Mapping[tuple[str, str, str], float], catalogue_file: Path,
                            settings: Settings, say: Say) -> dict[str, Any]:
    """The same fragmented cluster (Karpenter's consolidation left off, ``consolidateAfter:
    Never``), then ``kubeplace rebalance --consolidate --replace --apply`` from the checkout, given
    the pools at ``consolidateAfter: 0s`` while Karpenter is stopped, Karpenter started again once
    it has planned (``capacity_karpenter.kubeplace_consolidates``): it creates the new nodes as
    NodeClaims (Karpenter launches them), cordons the nodes it removes, evicts their pods, deletes
    their NodeClaims (Karpenter terminates the nodes); the kube-scheduler binds the replacements,
    and Karpenter launches nodes for those that fit nowhere. Seconds: from the command's start to
    the last change to the nodes or pods (Karpenter's restart included)."""
    before = _fragment(api, workload, namespace, price, settings, say)
    args = [*_consolidate_args(plane, namespace, catalogue_file, settings), "--apply"]
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = _kubeplace_started(settings.kubeplace_checkout, args, out, err)
        try:
            with kubeplace_consolidates(api, karpenter, before.pools, namespace,
                                        lambda: process.poll() is not None) as hand_back:
                hand_back()
                process.wait(settings.time_limit * 4 + settings.timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        out.seek(0)
        err.seek(0)
        doc = _parsed(subprocess.CompletedProcess(args, process.returncode, out.read(), err.read()), say)
    if "unavailable" in doc:
        return doc
    last_change = _wait_quiet(api, namespace, before.pools, start, settings)
    row = _consolidated(api, "kubeplace", workload, namespace, before, price, last_change - start, say)
    plan = doc.get("consolidate") or {}
    return {**row, "plannedCostPerHourAfter": plan.get("costPerHourAfter"), "boundPerHour": plan.get("bound"),
            "verified": (doc.get("summary") or {}).get("verified"), "status": (doc.get("summary") or {}).get("status"),
            "nodesDeleted": (doc.get("apply") or {}).get("nodes_removed")}


def _bound(api: ApiHttp, namespace: str) -> int:
    return sum(1 for p in namespace_pods(api, namespace)
               if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"))


def _wait_quiet(api: ApiHttp, namespace: str, pools: Sequence[str], start: float, settings: Settings) -> float:
    """The time of the last change to the nodes or pods, once nothing has changed for
    ``settings.settle`` seconds with every pod bound (or ``settings.timeout`` passed)."""
    state: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
    last_change = start
    while True:
        now = time.monotonic()
        pods = namespace_pods(api, namespace)
        seen = (frozenset(n["metadata"]["name"] for n in pool_nodes(api, pools)),
                frozenset(f"{p['metadata']['uid']}@{p['spec'].get('nodeName', '')}" for p in pods))
        if seen != state:
            state, last_change = seen, now
        settled = all(p["spec"].get("nodeName") for p in pods) and now - last_change > settings.settle
        if settled or now - start > settings.timeout:
            return last_change
        time.sleep(1.0)


# --------------------------------------------------------------------------- the run


def run(plane: ControlPlane, build: Path, workloads: Sequence[Workload], types: Sequence[Mapping[str, Any]],
        settings: Settings, say: Say) -> dict[str, Any]:
    """Every workload in turn on the same control plane (emptied in between); the document that
    ``-o json`` prints."""
    price = prices(types)
    with tempfile.TemporaryDirectory(prefix="kubeplace-capacity-") as scratch, ApiHttp(plane) as api:
        catalogue_file = Path(scratch) / "instance_types.json"
        catalogue_file.write_text(json.dumps(types, indent=1))
        karpenter = start_karpenter(plane, api, build, catalogue_file)
        available = provision_available(settings.kubeplace_checkout)
        applies = available and apply_available(settings.kubeplace_checkout)
        consolidating = consolidate_available(settings.kubeplace_checkout)
        say(f"Karpenter up; kubeplace plan --provision {'found' if available else 'unavailable'}, rebalance "
            f"--consolidate {'found' if consolidating else 'unavailable'} in {settings.kubeplace_checkout}")
        results = []
        with plane.start_scheduler():
            for workload in workloads:
                say(f"{workload.name}: {workload.what}")
                namespace = f"capacity-{workload.name}"
                api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
                rows: list[dict[str, Any]]
                if workload.deployment is not None:
                    rows = [karpenter_consolidation(api, karpenter, plane, workload, namespace, price,
                                                    catalogue_file if consolidating else None, settings, say)]
                    empty(api, namespace, [p["metadata"]["name"] for p in workload.node_pools], say)
                    namespace = f"{namespace}-kubeplace"
                    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
                    rows.append(kubeplace_consolidation(api, karpenter, plane, workload, namespace, price,
                                                        catalogue_file, settings, say) if consolidating
                                else {"scheduler": "kubeplace", "unavailable": NO_CONSOLIDATE})
                else:
                    rows = [karpenter_provisioning(api, workload, namespace, price, settings, say)]
                    snapshot = write_snapshot(Path(scratch) / workload.name, workload, namespace)
                    rows.append(kubeplace_provisioning(settings.kubeplace_checkout, snapshot, catalogue_file,
                                                       settings, say) if available
                                else {"scheduler": "kubeplace", "unavailable": UNAVAILABLE})
                    if applies:
                        empty(api, namespace, [p["metadata"]["name"] for p in workload.node_pools], say)
                        namespace = f"capacity-{workload.name}-apply"
                        api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
                        rows.append(kubeplace_applied(api, plane.admin_kubeconfig, workload, namespace,
                                                      catalogue_file, price, settings, say))
                empty(api, namespace, [p["metadata"]["name"] for p in workload.node_pools], say)
                results.append({"workload": workload.name, "what": workload.what,
                                "consolidation": workload.deployment is not None, "results": rows})
    return {"benchmark": "capacity", "karpenter": karpenter_version(), "seed": settings.seed, "scale": settings.scale,
            "timeLimit": settings.time_limit, "settle": settings.settle,
            "kubeplaceCheckout": str(settings.kubeplace_checkout), "instanceTypes": len(types),
            "offerings": len(price), "workloads": results}


# --------------------------------------------------------------------------- the table


def _cell(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec) if spec and isinstance(value, int | float) else str(value)


def table(doc: Mapping[str, Any]) -> str:
    """Provisioning rows, consolidation rows, then the nodes each scheduler chose."""
    lines = [f"{'WORKLOAD':<14}{'SCHEDULER':<16}{'PODS':>5}{'PLACED':>7}{'NODES':>6}{'COST/H':>9}{'BOUND/H':>9}"
             f"{'GAP':>8}{'SECONDS':>9}"]
    consolidation = [f"{'WORKLOAD':<14}{'SCHEDULER':<11}{'NODES':>9}{'COST/H BEFORE':>15}{'AFTER':>9}"
                     f"{'REMOVED':>9}{'LAUNCHED':>9}{'EVICTED':>9}{'SECONDS':>9}"]
    chosen = []
    for entry in doc["workloads"]:
        for row in entry["results"]:
            width = 11 if entry["consolidation"] else 16  # the provisioning rows name kubeplace-apply
            head = f"{entry['workload']:<14}{row['scheduler']:<{width}}"
            if "unavailable" in row:
                (consolidation if entry["consolidation"] else lines).append(f"{head}{row['unavailable']}")
            elif entry["consolidation"]:
                consolidation.append(
                    f"{head}{row['nodesBefore']:>4}->{row['nodesAfter']:<3}{row['costPerHourBefore']:>15.4f}"
                    f"{row['costPerHourAfter']:>9.4f}{row['nodesRemoved']:>9}{row['nodesLaunched']:>9}"
                    f"{row['podsEvicted']:>9}{row['seconds']:>9.1f}")
                same = row.get("kubeplaceOnThisStart")
                if same:
                    consolidation.append(f"{'':<14}(kubeplace's dry run on this start: "
                                         f"{_cell(same['costPerHourAfter'], '.4f')}/h, {same['podsEvicted']} evicted)")
                chosen.append(f"{entry['workload']} {row['scheduler']}: before "
                              f"{_types(row['nodesByTypeBefore'])}; after {_types(row['nodesByTypeAfter'])}")
            else:
                gap = row.get("gap")
                gap_text = f"{gap:.2%}" if isinstance(gap, int | float) else _cell(gap)
                lines.append(f"{head}{row['pods']:>5}{row['placed']:>7}{row['nodes']:>6}"
                             f"{_cell(row['costPerHour'], '.4f'):>9}{_cell(row.get('bound'), '.4f'):>9}"
                             f"{gap_text:>8}{row['seconds']:>9.1f}")
                chosen.append(f"{entry['workload']} {row['scheduler']}: {_types(row['nodesByType'])}")
    return "\n".join([*lines, "", *consolidation, "", "NODES (type/zone/capacity type x count)", *chosen])


def _types(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{name} x{count}" for name, count in counts.items()) or "none"
