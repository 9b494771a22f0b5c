"""The openb benchmarks: kubeplace and the baselines side by side, as a table and as JSON.

``batch``: every pod of a list pending at once on an empty cluster. kubeplace runs in this process
(rows -> manifests -> ``kube.parse.build_snapshot`` -> ``plan.pipeline.make_plan``, profile
``binpack`` with ``placementWeight: gpu``); every one of its placements is then replayed on the
independent device simulator (``bench.gpusim``), and one the simulator refuses is a failure, reported
and not counted. When the plan gives no device indices for a GPU pod, the harness picks them itself,
first-fit per node
(whole-GPU pods first, then shares largest first) and says so. The baselines run one pod at a time
(``bench.baselines``); the LP bound caps GPU milli and pod count.

``replay``: FGD's saturation protocol. Pods are drawn with replacement (fixed seeds) from the list
until the GPUs requested reach 130% of the cluster's, kept in arrival (list) order (``shuffle``:
the FGD artifact's variant, the whole list plus draws in a random order); each baseline
places them one at a time, kubeplace in windows of N arrivals with the earlier placements bound
(``nodeName`` plus Koordinator's device-allocated annotation), profile ``defrag`` with GPU
placed first (seeds 1-3 of the default list, windows of 100, 1 s: kubeplace 94.87% on average,
FGD 94.24%, in the same run).
Pods a policy cannot place when they arrive are dropped. The figure is the GPU allocation ratio at
the end, averaged over seeds.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kubeplace.simulate.policies.typical import TaskDistribution, task_distribution
from kubeplace_bench import openb
from kubeplace_bench.baselines import (
    POLICIES,
    Bound,
    PolicyResult,
    lp_bound,
    measure,
    place_one_at_a_time,
    run_baseline,
)
from kubeplace_bench.fragmentation import cluster_fragmentation
from kubeplace_bench.gpusim import WHOLE, Cluster, NodeSpec, Placed, PodSpec, metrics

KUBEPLACE = "kubeplace"
SATURATION = 1.3


# --- kubeplace ----------------------------------------------------------------------------------


@dataclass
class Validated:
    placed: list[tuple[int, Placed]] = field(default_factory=list)  # (pod index, placement)
    failures: list[dict[str, Any]] = field(default_factory=list)
    devices_from_plan: int = 0
    devices_by_harness: int = 0


def plan_openb(nodes: Sequence[NodeSpec], pending: Sequence[PodSpec], bound: Sequence[tuple[PodSpec, str, str,
               tuple[int, ...]]] = (), *, time_limit: float, seed: int = 0, objective: str = "binpack") -> Any:
    """kubeplace's plan for ``pending`` with ``bound`` = (pod, kube name, kube node, devices) running."""
    from kubeplace.kube.parse import build_snapshot
    from kubeplace.models.config import Configuration, Profile, SolverSettings
    from kubeplace.models.framework import Objective
    from kubeplace.plan.pipeline import make_plan

    node_docs, pod_docs = openb.manifests(nodes, pending)
    running = [openb.pod_manifest(p, name=name, node=node, devices=devices) for p, name, node, devices in bound]
    snapshot = build_snapshot([(m, "openb") for m in (*node_docs, *running, *pod_docs)], scheduler_name=openb.SCHEDULER)
    profile = Profile(scheduler_name=openb.SCHEDULER, objective=Objective(objective), placement_weight="gpu")
    return make_plan(snapshot, Configuration(profiles=(profile,)), profile,
                     SolverSettings(time_limit=time_limit, seed=seed)).plan


def validate(cluster: Cluster, pods: Sequence[PodSpec], plan: Any) -> Validated:
    """Replays the plan's placements on ``cluster`` (mutated): given devices as they are, missing
    ones first-fit per node. Refused placements become failures with the simulator's reason."""
    by_name = {openb.kube_name(p.name): j for j, p in enumerate(pods)}
    out = Validated()
    seen: set[int] = set()
    todo: list[tuple[int, int]] = []
    for pl in plan.placements:
        j, i = by_name.get(pl.name), cluster.index.get(pl.node)
        if j is None or i is None or j in seen:
            why = "placed twice" if j in seen else "unknown pod" if j is None else "unknown node"
            out.failures.append({"pod": pl.name, "node": pl.node, "gpus": list(pl.gpus), "reason": why})
            continue
        seen.add(j)
        if pods[j].num_gpu and not pl.gpus:
            todo.append((j, i))
            continue
        out.devices_from_plan += bool(pl.gpus)
        _accept(cluster, pods, j, i, tuple(pl.gpus), out)
    todo.sort(key=lambda ji: (ji[1], -int(pods[ji[0]].gpu_milli >= WHOLE), -pods[ji[0]].gpu_total))
    for j, i in todo:
        out.devices_by_harness += 1
        devices = cluster.first_fit_devices(pods[j], i)
        if len(devices) < pods[j].num_gpu:
            out.failures.append({"pod": pods[j].name, "node": cluster.nodes[i].name, "gpus": [],
                                 "reason": f"no room on the devices for {pods[j].num_gpu} x {pods[j].gpu_milli} milli"})
            continue
        _accept(cluster, pods, j, i, devices, out)
    return out


def _accept(cluster: Cluster, pods: Sequence[PodSpec], j: int, i: int, devices: tuple[int, ...],
            out: Validated) -> None:
    reason = cluster.place(pods[j], i, devices)
    if reason is None:
        out.placed.append((j, Placed(pods[j].name, cluster.nodes[i].name, devices)))
    else:
        out.failures.append({"pod": pods[j].name, "node": cluster.nodes[i].name, "gpus": list(devices),
                             "reason": reason})


def _device_source(v: Validated) -> str:
    if v.devices_by_harness and v.devices_from_plan:
        return "plan, harness first-fit where missing"
    return "harness first-fit" if v.devices_by_harness else "plan"


def run_kubeplace(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], dist: TaskDistribution, *,
                  time_limit: float, seed: int = 0, trace: bool = False) -> PolicyResult:
    with measure(trace) as m:
        plan = plan_openb(nodes, pods, time_limit=time_limit, seed=seed)
    cluster = Cluster.build(nodes)
    v = validate(cluster, pods, plan)
    s = plan.summary
    extra = {"solve_seconds": s.seconds, "status": s.status, "plan_pods_placed": s.pods_placed,
             "devices": _device_source(v), "failures": len(v.failures), "failed": v.failures[:20],
             "proved_bound_gpu_milli": _proved_gpu_bound(plan, len(pods))}
    return PolicyResult(KUBEPLACE, [p for _, p in v.placed],
                        metrics(cluster, (pods[j] for j, _ in v.placed), cluster_fragmentation(cluster, dist)),
                        m.seconds, m.peak_mib, len(pods), extra)


def _proved_gpu_bound(plan: Any, n_pods: int) -> int | None:
    """The bound kubeplace proved (column generation), in milli-GPU: with the GPU placement
    weight a pod weighs gpu_milli * (P + 1) + 1, so weight // (P + 1) bounds the milli-GPU."""
    if plan.summary.bound is None or "bound proved by column generation" not in plan.steps:
        return None
    return int(plan.summary.bound) // (n_pods + 1)


# --- scenarios ------------------------------------------------------------------------------------


def batch(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], *, time_limit: float, seed: int = 0,
          trace: bool = False, sources: tuple[str, str] = ("", "")) -> tuple[dict[str, Any], PolicyResult]:
    """Scenario 1 (batch fill): the JSON document and kubeplace's result (for its placements)."""
    dist = task_distribution(pods)
    bound = lp_bound(nodes, pods)
    baselines = [run_baseline(p, nodes, pods, dist=dist, seed=seed, trace=trace) for p in POLICIES]
    results = [run_kubeplace(nodes, pods, dist, time_limit=time_limit, seed=seed, trace=trace), *baselines]
    doc = {"input": _input(nodes, pods, sources), "lp_bound": bound.as_dict(),
           "memory": "tracemalloc peak" if trace else "resident set growth",
           "policies": {r.name: {**r.as_dict(), "gpu_milli_of_bound": _share(r.metrics.gpu_milli_placed, bound)}
                        for r in results}}
    return doc, results[0]


def _share(value: int, bound: Bound) -> float:
    return round(value / bound.gpu_milli, 6) if bound.gpu_milli else 0.0


def _input(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], sources: tuple[str, str]) -> dict[str, Any]:
    return {"nodes": len(nodes), "pods": len(pods), "gpus": sum(n.gpus for n in nodes),
            "node_file": sources[0], "pod_file": sources[1]}


def saturation_sample(pods: Sequence[PodSpec], total_gpus: int, seed: int, ratio: float = SATURATION,
                      shuffle: bool = False) -> list[PodSpec]:
    """Pods drawn with replacement until their GPU requests reach ``ratio`` x capacity, in arrival
    (list) order; each copy is named ``<name>-s<draw>``. With ``shuffle``, the variant of FGD's
    artifact: the whole list plus draws while they stay within ``ratio``, in a random order."""
    rng = np.random.default_rng(seed)
    target = ratio * WHOLE * total_gpus
    if not any(p.gpu_total for p in pods):
        raise ValueError("no pod requests GPUs: the saturation replay needs GPU pods")
    draws = list(range(len(pods))) if shuffle else []
    total = sum(pods[k].gpu_total for k in draws)
    while total < target:
        k = int(rng.integers(len(pods)))
        if shuffle and total + pods[k].gpu_total > target:
            break
        draws.append(k)
        total += pods[k].gpu_total
    order = list(rng.permutation(len(draws))) if shuffle else sorted(range(len(draws)), key=lambda d: (draws[d], d))
    return [_renamed(pods[draws[d]], f"{pods[draws[d]].name}-s{d:05d}") for d in order]


def _renamed(p: PodSpec, name: str) -> PodSpec:
    return PodSpec(name, p.cpu, p.mem, p.num_gpu, p.gpu_milli, p.models, p.creation, p.qos, p.phase)


def replay(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], *, seeds: Sequence[int], window: int,
           time_limit: float, policies: Sequence[str] = (KUBEPLACE, *POLICIES), shuffle: bool = False,
           sources: tuple[str, str] = ("", ""), objective: str = "defrag") -> dict[str, Any]:
    """Scenario 2 (saturation replay): the JSON document."""
    dist = task_distribution(pods)  # the shapes of the list, as FGD's typical pods
    capacity = WHOLE * sum(n.gpus for n in nodes)
    per: dict[str, list[dict[str, Any]]] = {p: [] for p in policies}
    sizes = []
    for seed in seeds:
        arrivals = saturation_sample(pods, sum(n.gpus for n in nodes), seed, shuffle=shuffle)
        sizes.append(len(arrivals))
        for policy in policies:
            cluster = Cluster.build(nodes)
            t0 = time.perf_counter()
            if policy == KUBEPLACE:
                placed, failures = kubeplace_windows(cluster, nodes, arrivals, window, time_limit, seed,
                                                       objective)
            else:
                placed, failures = [j for j, _ in place_one_at_a_time(policy, cluster, arrivals, dist, seed)], 0
            gpu = sum(arrivals[j].gpu_total for j in placed)
            per[policy].append({"seed": seed, "gpu_alloc_ratio": round(gpu / capacity, 6) if capacity else 0.0,
                                "pods_placed": len(placed), "gpu_milli_placed": gpu, "failures": failures,
                                "seconds": round(time.perf_counter() - t0, 3)})
    out: dict[str, Any] = {}
    for policy, runs in per.items():
        out[policy] = {"gpu_alloc_ratio": round(float(np.mean([r["gpu_alloc_ratio"] for r in runs])), 6),
                       "pods_placed": round(float(np.mean([r["pods_placed"] for r in runs])), 1),
                       "seconds": round(float(np.mean([r["seconds"] for r in runs])), 3),
                       "failures": sum(r["failures"] for r in runs), "per_seed": runs}
    return {"input": {**_input(nodes, pods, sources), "seeds": list(seeds), "window": window,
                      "saturation": SATURATION, "order": "shuffled (FGD artifact)" if shuffle else "arrival",
                      "arrivals_per_seed": sizes, "time_limit_per_window": time_limit,
                      "kubeplace_profile": objective},
            "policies": out}


def kubeplace_windows(cluster: Cluster, nodes: Sequence[NodeSpec], arrivals: Sequence[PodSpec], window: int,
                       time_limit: float, seed: int, objective: str) -> tuple[list[int], int]:
    bound: list[tuple[PodSpec, str, str, tuple[int, ...]]] = []
    placed: list[int] = []
    failures = 0
    for start in range(0, len(arrivals), window):
        chunk = list(arrivals[start:start + window])
        v = validate(cluster, chunk, plan_openb(nodes, chunk, bound, time_limit=time_limit, seed=seed,
                                                         objective=objective))
        failures += len(v.failures)
        for j, p in v.placed:
            bound.append((chunk[j], openb.kube_name(chunk[j].name), openb.kube_name(p.node), p.gpus))
            placed.append(start + j)
    return placed, failures


# --- output ---------------------------------------------------------------------------------------


def write_placements(path: Path, placements: Sequence[Placed]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["pod", "node", "gpus"])
        for p in placements:
            w.writerow([p.pod, p.node, "|".join(str(d) for d in p.gpus)])


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[k])) for r in (header, *rows)) for k in range(len(header))]
    lines = ["  ".join(str(c).rjust(w) if k else str(c).ljust(w)
                       for k, (c, w) in enumerate(zip(r, widths, strict=True))) for r in (header, *rows)]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def batch_table(doc: dict[str, Any]) -> str:
    names = list(doc["policies"])
    pol = doc["policies"]
    bound = doc["lp_bound"]
    rows = [
        ["pods placed", *(f"{pol[n]['pods_placed']}" for n in names)],
        ["GPU milli placed", *(f"{pol[n]['gpu_milli_placed']}" for n in names)],
        ["  % of LP bound", *(f"{100 * pol[n]['gpu_milli_of_bound']:.2f}%" for n in names)],
        ["GPU allocation", *(f"{100 * pol[n]['gpu_alloc_ratio']:.2f}%" for n in names)],
        ["CPU milli placed", *(f"{pol[n]['cpu_milli_placed']}" for n in names)],
        ["fragmentation", *(f"{100 * pol[n]['fragmentation_ratio']:.1f}%" for n in names)],
        ["seconds", *(f"{pol[n]['seconds']:.2f}" for n in names)],
        ["peak MiB", *(f"{pol[n]['peak_mib']:.1f}" for n in names)],
    ]
    inp = doc["input"]
    head = (f"openb batch fill: {inp['nodes']} nodes, {inp['gpus']} GPUs, {inp['pods']} pods; "
            f"LP bound {bound['gpu_milli']} GPU milli, {bound['pods']} pods\n")
    k = pol.get(KUBEPLACE, {})
    notes = ""
    if k:
        notes = (f"kubeplace: solver {k['status']} in {k['solve_seconds']}s; devices from {k['devices']}; "
                 f"{k['failures']} placement(s) refused by the simulator\n")
        notes += "".join(f"  refused {f['pod']} -> {f['node']} {f['gpus']}: {f['reason']}\n" for f in k["failed"][:5])
    return head + _grid(["", *names], rows) + notes + f"memory: {doc['memory']}\n"


def replay_table(doc: dict[str, Any]) -> str:
    pol = doc["policies"]
    names = list(pol)
    inp = doc["input"]
    rows = [["GPU allocation (mean)", *(f"{100 * pol[n]['gpu_alloc_ratio']:.2f}%" for n in names)]]
    for k, seed in enumerate(inp["seeds"]):
        rows.append([f"  seed {seed}", *(f"{100 * pol[n]['per_seed'][k]['gpu_alloc_ratio']:.2f}%" for n in names)])
    rows.append(["pods placed (mean)", *(f"{pol[n]['pods_placed']}" for n in names)])
    rows.append(["seconds (mean)", *(f"{pol[n]['seconds']:.2f}" for n in names)])
    head = (f"openb saturation replay: {inp['nodes']} nodes, {inp['gpus']} GPUs; arrivals to "
            f"{int(100 * inp['saturation'])}% of GPU capacity ({', '.join(map(str, inp['arrivals_per_seed']))} pods, "
            f"{inp['order']} order); kubeplace windows of {inp['window']}, profile {inp['kubeplace_profile']}\n")
    fails = pol.get(KUBEPLACE, {}).get("failures", 0)
    return head + _grid(["", *names], rows) + (f"kubeplace: {fails} placement(s) refused by the simulator\n"
                                               if KUBEPLACE in pol else "")
