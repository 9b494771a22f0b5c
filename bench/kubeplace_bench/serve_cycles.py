"""What one ``kubeplace serve`` cycle costs at cluster scale, in process (``kubeplace bench serve-cycles``).

A serve scheduler on ``nodes`` nodes of 4 CPU / 32 GiB (two pools) running ``bound`` pods plans
one gang of ``gang`` pods per cycle, as the gangs throughput bench makes them arrive: each gang's
pods come as watch events (JSON, as the API server sends them, through the store and the
scheduler's event handler), one cycle plans, verifies and binds them (to a client that records
the bindings and Events: no HTTP), then the watch shows them bound and running. The figure is the
process's CPU time per gang, the cycle's and the events' apart: what the gangs bench's CPU
seconds are made of, but for HTTP, without a control plane and without its noise.

With ``--baseline DIR`` the same harness runs on the kubeplace checkout in DIR too, in a
subprocess of its own, alternating with this checkout's runs (the same conditions: the load of
the machine drifts); both are printed side by side. ``python -m kubeplace_bench.serve_cycles``
runs one measurement and prints its JSON (what the subprocess does).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve import loop
from kubeplace.serve.informer import ADDED, MODIFIED, Store
from kubeplace.serve.loop import Scheduler, ServeClient
from kubeplace.serve.settings import ServeSettings

RawObject = dict[str, Any]
GANG_LABEL, MIN_MEMBER = "kubeplace.io/gang", "kubeplace.io/gang-min-member"
STAMP = "2026-01-01T00:00:00Z"


class RecordingClient:
    """The writes a gang cycle makes (bindings and Events), recorded in memory; nothing else is
    asked of it here."""

    def __init__(self) -> None:
        self.bindings: list[tuple[str, str]] = []
        self.events = 0

    def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
             annotations: Mapping[str, str] | None = None) -> None:
        self.bindings.append((f"{namespace}/{name}", node))

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        self.events += 1

    def patch_object_status(self, group: str, version: str, plural: str, namespace: str, name: str,
                            status: Mapping[str, Any]) -> None:
        pass

    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        return None


def _node(name: str, pool: str) -> RawObject:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1",
                         "labels": {"kubernetes.io/hostname": name, "pool": pool}},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                       "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, cpu: str, memory: str, labels: Mapping[str, str] | None = None,
         annotations: Mapping[str, str] | None = None, node: str = "") -> RawObject:
    """A pod as the API server shows it (defaulted fields, managed fields, status)."""
    spec: RawObject = {
        "schedulerName": "kubeplace", "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "serviceAccountName": "default", "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        "tolerations": [{"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300} for t in ("not-ready", "unreachable")]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": STAMP, "labels": dict(labels or {}),
                         "annotations": dict(annotations or {}),
                         "managedFields": [{"manager": "bench", "operation": "Update", "apiVersion": "v1",
                                            "time": STAMP, "fieldsType": "FieldsV1",
                                            "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
            "spec": spec, "status": {"phase": "Running" if node else "Pending", "qosClass": "Burstable"}}


class Harness:
    def __init__(self, nodes: int, bound: int, gang: int, seed: int) -> None:
        rng = random.Random(seed)
        self.gang = gang
        self.store = Store()
        self.store.replace("nodes", [_node(f"n{i:05d}", "a" if i < nodes // 2 else "b") for i in range(nodes)])
        self.store.replace("pods", [_pod(f"r{i:05d}", rng.choice(["500m", "1", "2"]), rng.choice(["1Gi", "2Gi", "4Gi"]),
                                         node=f"n{rng.randrange(nodes):05d}") for i in range(bound)])
        self.client = RecordingClient()
        self.scheduler = Scheduler(cast(ServeClient, self.client), self.store, Configuration(), Profile(),
                                   SolverSettings(time_limit=5, workers=1),
                                   ServeSettings(batch_window=0, initial_backoff=1, max_backoff=10))
        self.version = 1
        self.events_seconds = 0.0
        self.cycle_seconds = 0.0

    def _watch(self, event: str, obj: RawObject) -> None:
        """One watch event as the informer applies it: decoded from JSON, stored, handled."""
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        line = json.dumps({"type": event, "object": obj})
        started = time.process_time()
        decoded = json.loads(line)
        new = decoded["object"]
        old = self.store.apply("pods", decoded["type"], new)
        self.scheduler.on_change("pods", decoded["type"], old, new)
        self.events_seconds += time.process_time() - started

    def gang_cycle(self, serial: int) -> int:
        """Gang ``g<serial>`` arrives, one cycle plans and binds it, the watch shows it bound and
        running; the pods bound."""
        name = f"g{serial:05d}"
        for k in range(self.gang):
            self._watch(ADDED, _pod(f"{name}-{k}", "1", "2Gi", {GANG_LABEL: name}, {MIN_MEMBER: str(self.gang)}))
        started = time.process_time()
        units = self.scheduler.queue.pop_batch(window=0, size=1000, timeout=0)
        report = self.scheduler.cycle(units) if units else None
        self.scheduler.collector.between_cycles()
        self.cycle_seconds += time.process_time() - started
        bound = report.bound if report is not None else []
        for key, node in self.client.bindings[-len(bound):] if bound else []:
            pod = copy.deepcopy(self.store.get("pods", key) or {})
            pod["spec"]["nodeName"] = node
            pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": STAMP}]
            self._watch(MODIFIED, copy.deepcopy(pod))
            pod["status"].update(phase="Running", hostIP="127.0.0.1", podIP="10.0.0.1", startTime=STAMP)
            self._watch(MODIFIED, pod)
        return len(bound)


def measure(nodes: int, bound: int, cycles: int, gang: int = 5, seed: int = 0, warm: int = 3) -> dict[str, Any]:
    """One run: ``warm`` gangs first (the memos and kept sums filled), then ``cycles`` gangs measured."""
    harness = Harness(nodes, bound, gang, seed)
    harness.scheduler.warm_up()
    for serial in range(warm):
        harness.gang_cycle(serial)
    harness.events_seconds = harness.cycle_seconds = 0.0
    started, wall = time.process_time(), time.perf_counter()
    placed = sum(harness.gang_cycle(serial) for serial in range(warm, warm + cycles))
    cpu = time.process_time() - started
    harness.scheduler.close()
    return {"nodes": nodes, "bound": bound, "gangs": cycles, "gang_pods": gang, "pods_bound": placed,
            "cpu_ms_per_gang": round(cpu / cycles * 1000, 2),
            "cycle_cpu_ms_per_gang": round(harness.cycle_seconds / cycles * 1000, 2),
            "events_cpu_ms_per_gang": round(harness.events_seconds / cycles * 1000, 2),
            "wall_ms_per_gang": round((time.perf_counter() - wall) / cycles * 1000, 2),
            "load_average": round(os.getloadavg()[0], 1), "code": str(Path(loop.__file__).resolve().parents[1])}


def in_subprocess(checkout: Path, nodes: int, bound: int, cycles: int, gang: int, seed: int) -> dict[str, Any]:
    """:func:`measure` on the kubeplace checkout ``checkout`` (this harness, that checkout's kubeplace)."""
    bench_dir = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(checkout), str(bench_dir)))}
    out = subprocess.run([sys.executable, "-m", "kubeplace_bench.serve_cycles", f"--nodes={nodes}", f"--bound={bound}",
                          f"--cycles={cycles}", f"--gang={gang}", f"--seed={seed}"],
                         env=env, cwd=checkout, capture_output=True, text=True, check=False)  # (``-m`` puts
    # the working directory first on the path: from another checkout it would load that one's kubeplace)
    result: dict[str, Any] = json.loads(out.stdout) if out.returncode == 0 else {}
    if out.returncode != 0:
        raise RuntimeError(f"the harness failed on {checkout}: {out.stderr.strip().splitlines()[-1:]}")
    if result["code"] != str(checkout.resolve()):
        raise RuntimeError(f"the harness ran the kubeplace of {result['code']}, not of {checkout}")
    return result


def compare(baseline: Path | None, nodes: int, bound: int, cycles: int, gang: int, seed: int,
            rounds: int) -> dict[str, Any]:
    """``rounds`` runs of this checkout (and of ``baseline``, alternating), each in a subprocess;
    the median of each figure."""
    here = Path(__file__).resolve().parent.parent.parent
    sides = {"kubeplace": here, **({"baseline": baseline} if baseline is not None else {})}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, checkout in sides.items():
            runs[name].append(in_subprocess(checkout, nodes, bound, cycles, gang, seed))
    doc: dict[str, Any] = {"nodes": nodes, "bound": bound, "gangs": cycles, "gang_pods": gang, "rounds": rounds}
    for name, results in runs.items():
        doc[name] = {key: statistics.median(r[key] for r in results)
                     for key in ("cpu_ms_per_gang", "cycle_cpu_ms_per_gang", "events_cpu_ms_per_gang",
                                 "wall_ms_per_gang", "load_average", "pods_bound")}
        doc[name]["checkout"] = str(sides[name])
    return doc


def table(doc: Mapping[str, Any]) -> str:
    names = [n for n in ("kubeplace", "baseline") if n in doc]
    lines = [f"{doc['nodes']} nodes, {doc['bound']} bound pods, {doc['gangs']} gangs of {doc['gang_pods']} pods, "
             f"median of {doc['rounds']} runs (CPU ms per gang)",
             f"{'':12}" + "".join(f"{n:>12}" for n in names)]
    for key, label in (("cpu_ms_per_gang", "total"), ("cycle_cpu_ms_per_gang", "cycle"),
                       ("events_cpu_ms_per_gang", "watch events"), ("wall_ms_per_gang", "wall ms"),
                       ("pods_bound", "pods bound"), ("load_average", "load avg")):
        lines.append(f"{label:12}" + "".join(f"{doc[n][key]:>12}" for n in names))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="One serve-cycles measurement, as JSON.")
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--bound", type=int, default=2500)
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--gang", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(measure(args.nodes, args.bound, args.cycles, args.gang, args.seed)))


if __name__ == "__main__":
    main()
