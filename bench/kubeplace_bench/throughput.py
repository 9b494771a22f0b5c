"""``kubeplace bench throughput``: kubeplace serve and the kube-scheduler on a real API server,
measured from a pod watch, side by side.

On a running control plane (:mod:`kubeplace_bench.controlplane`): the workload's kwok nodes are
created once and made schedulable (Ready, and the ``node.kubernetes.io/not-ready`` taint that
the API server puts on every new node removed by the harness once kwok reports the node Ready,
instead of waiting minutes for the node lifecycle controller to get to it). Then, for each
scheduler in turn, on the same emptied cluster, in a namespace of its own:

1. a watch on the namespace's pods starts (:class:`throughput_measure.Tracker`);
2. a backlog workload creates every pod, then starts the scheduler; an arrival workload starts
   the scheduler, waits until it is ready, then creates the pods on their schedule (churn:
   then deletes bound pods and creates new ones at its rate);
3. the run ends when every pod is bound, or nothing was bound for ``settle`` seconds after the
   last arrival, or after ``timeout``; the scheduler's CPU time and peak resident memory are read
   from ``/proc`` before it is stopped; the pods are deleted.

The schedulers (started by :mod:`kubeplace_bench.throughput_schedulers`):

- ``kubeplace``: ``python -m kubeplace.cli.main serve`` of this checkout as a subprocess,
  authenticated as the ``kubeplace`` ServiceAccount's user with only deploy/rbac.yaml's rights,
  holding its Lease in ``kubeplace-system`` as deployed;
- ``kube-scheduler``: the pinned kube-scheduler, default profile, client QPS and burst raised to
  ``qps`` (default 5,000, as scheduler_perf runs it) so its 50 QPS default does not throttle it.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import urllib3
import yaml

from kubeplace_bench.cluster import BenchError, Say
from kubeplace_bench.controlplane import ControlPlane, wait_for
from kubeplace_bench.controlplane_binaries import REPO_ROOT
from kubeplace_bench.throughput_measure import (
    Tracker,
    device_conflicts,
    gang_figures,
    gpu_figures,
    memory_growth,
    overcommitted_by_annotation,
    pod_figures,
    top_reasons,
)
from kubeplace_bench.throughput_schedulers import (
    KUBE_SCHEDULER,
    KUBEPLACE,
    SCHEDULER_NAMES,
    Sampler,
    process_stats,
    serve_metrics,
    start_kube_scheduler,
    start_kubeplace,
)
from kubeplace_bench.throughput_workloads import Workload, gangs_of, gpu_milli, gpu_need, node_gpus

NOT_READY = "node.kubernetes.io/not-ready"
RBAC_FILE = REPO_ROOT / "deploy" / "rbac.yaml"

@dataclass(frozen=True)
class Settings:
    settle: float = 15.0
    """A run ends after this many seconds without a new binding (after the last arrival)."""
    timeout: float = 900.0
    """Bound on each wait and on each scheduler's run."""
    qps: int = 5000
    """The kube-scheduler's client QPS and burst."""
    kubeplace_args: tuple[str, ...] = ()
    """Extra ``kubeplace serve`` arguments."""
    creators: int = 4
    """Threads creating pods and nodes."""
    seed: int = 0


# --------------------------------------------------------------------------- the API, plainly


class Api:
    """JSON over one urllib3 pool as the cluster admin (the typed client costs ~25 ms a pod)."""

    def __init__(self, plane: ControlPlane, connections: int = 8) -> None:
        self.server = plane.server
        self.headers = {"Authorization": f"Bearer {plane.admin_token}", "Content-Type": "application/json"}
        self.http = urllib3.PoolManager(maxsize=connections, ca_certs=str(plane.ca_cert), cert_reqs="CERT_REQUIRED")

    def request(self, method: str, path: str, body: Any = None, ok: Sequence[int] = (200, 201),
                content_type: str = "application/json", timeout: float = 60) -> Any:
        headers = {**self.headers, "Content-Type": content_type}
        data = json.dumps(body).encode() if body is not None else None
        response = self.http.request(method, f"{self.server}{path}", body=data, headers=headers,
                                     timeout=urllib3.Timeout(connect=10, read=timeout), retries=False)
        if response.status not in ok:
            raise BenchError(f"{method} {path}: HTTP {response.status}: {response.data[:300].decode(errors='replace')}")
        return json.loads(response.data) if response.data else None

    def stream(self, path: str, timeout: float) -> Any:
        return self.http.request("GET", f"{self.server}{path}", headers=self.headers, preload_content=False,
                                 timeout=urllib3.Timeout(connect=10, read=timeout + 10), retries=False)

    def close(self) -> None:
        self.http.clear()


class PodWatch:
    """Lists, then watches the pods of one namespace, feeding a tracker until stopped."""

    def __init__(self, api: Api, namespace: str, tracker: Tracker) -> None:
        self.api, self.namespace, self.tracker = api, namespace, tracker
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"watch-{namespace}")
        self.errors: list[str] = []

    def __enter__(self) -> PodWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        base = f"/api/v1/namespaces/{self.namespace}/pods"
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    listed = self.api.request("GET", base)
                    now = time.monotonic()
                    for item in listed["items"]:
                        self.tracker.observe("ADDED", item, now)
                    version = listed["metadata"]["resourceVersion"]
                version = self._watch(base, version)
            except Exception as error:  # a broken watch restarts from a fresh list
                self.errors.append(str(error))
                version = ""
                self._stop.wait(0.5)

    def _watch(self, base: str, version: str) -> str:
        query = urllib.parse.urlencode({"watch": "1", "resourceVersion": version, "timeoutSeconds": "30",
                                        "allowWatchBookmarks": "true"})
        response = self.api.stream(f"{base}?{query}", 30)
        try:
            pending = b""
            for chunk in response.stream(amt=None, decode_content=True):
                now = time.monotonic()
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        return ""
                    version = (obj.get("metadata") or {}).get("resourceVersion", version)
                    if event.get("type") != "BOOKMARK":
                        self.tracker.observe(str(event.get("type")), obj, now)
                if self._stop.is_set():
                    break
        finally:
            response.release_conn()
        return version


# --------------------------------------------------------------------------- the harness


class Harness:
    """Runs workloads on a running control plane; see the module docstring."""

    def __init__(self, plane: ControlPlane, settings: Settings = Settings(), say: Say | None = None) -> None:
        self.plane, self.settings = plane, settings
        self.say: Say = say or (lambda _m: None)
        self.api = Api(plane, connections=max(8, settings.creators * 2))
        self._serves = 0

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- setup

    def apply_rbac(self) -> None:
        """deploy/rbac.yaml, server-side applied document by document, as ``kubectl apply`` does."""
        for doc in (d for d in yaml.safe_load_all(RBAC_FILE.read_text()) if d):
            meta = doc["metadata"]
            path = _object_path(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"))
            self.api.request("PATCH", f"{path}?fieldManager=kubeplace-bench&force=true", doc,
                             content_type="application/apply-patch+yaml")

    def remove_rbac(self) -> None:
        """Deletes what :meth:`apply_rbac` applied (the namespace kubeplace-system stays)."""
        for doc in (d for d in yaml.safe_load_all(RBAC_FILE.read_text()) if d):
            meta = doc["metadata"]
            if doc["kind"] != "Namespace":
                self.api.request("DELETE", _object_path(doc["apiVersion"], doc["kind"], meta["name"],
                                                        meta.get("namespace")), ok=(200, 202, 404))

    def create_nodes(self, nodes: Sequence[Mapping[str, Any]]) -> None:
        started = time.monotonic()
        self._parallel(lambda n: self.api.request("POST", "/api/v1/nodes", n, ok=(201, 409)), nodes)
        self.say(f"{len(nodes)} nodes created in {time.monotonic() - started:.0f}s; waiting for Ready")
        names = {n["metadata"]["name"] for n in nodes}
        wait_for(lambda: self._ready(names) >= len(names), self.settings.timeout,
                 f"{len(names)} kwok nodes to be Ready", interval=1.0)
        deadline, removed = time.monotonic() + self.settings.timeout, 0
        while tainted := self._not_ready_tainted(names):
            if time.monotonic() > deadline:
                raise BenchError(f"{len(tainted)} node(s) still carry the {NOT_READY} taint")
            self._parallel(self._untaint, tainted)  # a 409 (the node changed meanwhile): again next round
            removed += len(tainted)
            time.sleep(1.0)
        if removed:
            self.say(f"removed the {NOT_READY} taint from Ready nodes ({removed} patches; the node lifecycle "
                     "controller takes minutes to get to them)")
        self.say(f"{len(names)} nodes Ready and untainted after {time.monotonic() - started:.0f}s")

    def _ready(self, names: set[str]) -> int:
        return sum(1 for n in self._nodes() if n["metadata"]["name"] in names and _is_ready(n))

    def _not_ready_tainted(self, names: set[str]) -> list[dict[str, Any]]:
        return [n for n in self._nodes() if n["metadata"]["name"] in names
                and any(t.get("key") == NOT_READY for t in (n.get("spec") or {}).get("taints") or [])]

    def _nodes(self) -> list[dict[str, Any]]:
        return list(self.api.request("GET", "/api/v1/nodes")["items"])

    def _untaint(self, node: Mapping[str, Any]) -> None:
        taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != NOT_READY]
        patch = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": taints}}
        self.api.request("PATCH", f"/api/v1/nodes/{node['metadata']['name']}", patch, ok=(200, 409),
                         content_type="application/merge-patch+json")

    def delete_nodes(self, names: Sequence[str]) -> None:
        self._parallel(lambda n: self.api.request("DELETE", f"/api/v1/nodes/{n}", ok=(200, 404)), names)
        left = set(names)
        wait_for(lambda: not left & {n["metadata"]["name"] for n in self._nodes()}, self.settings.timeout,
                 "the workload's nodes to be deleted", interval=1.0)

    def _parallel(self, action: Callable[[Any], Any], items: Sequence[Any]) -> None:
        with ThreadPoolExecutor(self.settings.creators) as pool:
            for _ in pool.map(action, items):
                pass

    def ensure_namespace(self, namespace: str) -> None:
        self.api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": namespace}}, ok=(201, 409))
        wait_for(lambda: self._service_account(namespace), self.settings.timeout, f"ServiceAccount in {namespace}")

    def _service_account(self, namespace: str) -> bool:
        found = self.api.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default", ok=(200, 404))
        return bool(found and found.get("kind") != "Status")

    # ----- one scheduler on one workload

    def run(self, workload: Workload, scheduler: str) -> dict[str, Any]:
        namespace = f"tp-{scheduler}"
        self.ensure_namespace(namespace)
        self._check_empty(workload)
        tracker = Tracker()
        name = SCHEDULER_NAMES[scheduler]
        pods = [_for(a.pod, namespace, name) for a in workload.arrivals]
        try:
            with PodWatch(self.api, namespace, tracker) as watch:
                if workload.backlog:
                    created = time.monotonic()
                    self._parallel(lambda p: self._create(namespace, p), pods)
                    wait_for(lambda: tracker.count() >= len(pods), self.settings.timeout, "the watch to see every pod")
                    self.say(f"  {scheduler}: {len(pods)} pods created in {time.monotonic() - created:.1f}s")
                out = self._schedule(workload, scheduler, namespace, pods, tracker)
                if watch.errors:
                    out["watch_errors"] = len(watch.errors)
        finally:
            self.delete_pods(namespace)
        return out

    def _schedule(self, workload: Workload, scheduler: str, namespace: str, pods: list[dict[str, Any]],
                  tracker: Tracker) -> dict[str, Any]:
        launched = time.monotonic()
        metrics_port = 0
        if scheduler == KUBE_SCHEDULER:
            process = start_kube_scheduler(self.plane, self.settings.qps, self.settings.timeout)
        else:
            self._serves += 1
            process, metrics_port = start_kubeplace(self.plane, self.settings.kubeplace_args, self.settings.timeout,
                                                    self._serves)
        ready = time.monotonic()
        start = launched if workload.backlog else ready
        try:
            with Sampler(process.process.pid) as sampler:
                feeder = Feeder(self, workload, namespace, pods, tracker, ready)
                with feeder:
                    self._wait_done(workload, tracker, feeder)
                cpu, _, peak = process_stats(process.process.pid)
                extra = serve_metrics(metrics_port) if metrics_port else {}
        finally:
            process.stop()
        tracks = tracker.snapshot()
        out = pod_figures(tracks, start)
        out |= {"cpu_seconds": round(cpu, 1), "peak_mib": round(peak, 1),
                "seconds_to_ready": round(ready - launched, 2)}
        out["pending_reasons"] = self._pending_reasons(namespace, tracks)
        if workload.gangs:
            out |= gang_figures(tracks, gangs_of(workload.arrivals), workload.gangs, start)
        milli = {p["metadata"]["name"]: gpu_milli(p) for p in pods}
        if any(milli.values()):
            out |= gpu_figures(tracks, milli)
            conflicts, milli_out = self._device_conflicts(workload, pods, tracks)
            out["gpu_pods_device_conflicts"] = conflicts
            out["gpus_bound_on_devices"] = round(out["gpus_bound"] - milli_out / 1000, 2)
            listed = self.api.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
            annotated, overcommitted = overcommitted_by_annotation(listed)
            out["gpu_pods_with_device_annotation"] = annotated
            out["gpu_pods_on_overcommitted_devices"] = overcommitted
        if workload.churn_seconds:
            out |= memory_growth(sampler.samples, 60.0)
            out["pods_created"] = len(tracks)
            out["pods_deleted"] = feeder.deleted
        if extra:
            out["serve"] = extra
        if scheduler == KUBEPLACE:
            out["log_lines"] = sum(1 for _ in process.log_path.open(errors="replace"))
        return out

    @staticmethod
    def _device_conflicts(workload: Workload, pods: Sequence[dict[str, Any]],
                          tracks: Mapping[str, Any]) -> tuple[int, int]:
        placed: dict[str, list[tuple[int, int]]] = {}
        for pod in pods:
            track = tracks.get(pod["metadata"]["name"])
            need = gpu_need(pod)
            if track is not None and track.bound is not None and need[0]:
                placed.setdefault(track.node, []).append(need)
        return device_conflicts(placed, {n["metadata"]["name"]: node_gpus(n) for n in workload.nodes})

    def _wait_done(self, workload: Workload, tracker: Tracker, feeder: Feeder) -> None:
        deadline = time.monotonic() + self.settings.timeout
        while True:
            now = time.monotonic()
            if feeder.finished.is_set():
                pending = tracker.count(bound=False)
                if pending == 0 and tracker.count() >= feeder.created:
                    return
                last = max(tracker.last_bound or 0.0, feeder.finished_at)
                if now - last >= self.settings.settle:
                    return
            if now > deadline:
                self.say(f"  stopped after {self.settings.timeout:.0f}s")
                return
            if feeder.error is not None:
                raise feeder.error
            time.sleep(0.1)

    def _create(self, namespace: str, pod: Mapping[str, Any]) -> None:
        self.api.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod, ok=(201,))

    def _pending_reasons(self, namespace: str, tracks: Mapping[str, Any]) -> dict[str, int]:
        pending = {n for n, t in tracks.items() if t.bound is None and t.deleted is None}
        if not pending:
            return {}
        events = self.api.request("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
        last: dict[str, tuple[str, str]] = {}
        for e in events:
            name = (e.get("involvedObject") or {}).get("name", "")
            if name in pending and e.get("reason") == "FailedScheduling":
                stamp = str(e.get("lastTimestamp") or e.get("eventTime") or "")
                if name not in last or stamp >= last[name][0]:
                    last[name] = (stamp, str(e.get("message", ""))[:200])
        messages = {n: m for n, (_, m) in last.items()}
        messages |= {n: "(no FailedScheduling event)" for n in pending - set(messages)}
        return top_reasons(messages)

    def _check_empty(self, workload: Workload) -> None:
        names = {n["metadata"]["name"] for n in workload.nodes}
        busy = [p["metadata"]["name"] for p in self.api.request("GET", "/api/v1/pods")["items"]
                if (p.get("spec") or {}).get("nodeName") in names]
        if busy:
            raise BenchError(f"the workload's nodes are not empty: {len(busy)} pod(s), e.g. {busy[0]}")

    def delete_pods(self, namespace: str) -> None:
        """Deletes the namespace's pods; a collection delete of 10,000 pods can outlast the API
        server's request timeout, so it is asked again until the pods are gone."""
        path = f"/api/v1/namespaces/{namespace}/pods"
        deadline = time.monotonic() + self.settings.timeout
        while self.api.request("GET", f"{path}?limit=1")["items"]:
            if time.monotonic() > deadline:
                raise BenchError(f"the pods of {namespace} were not deleted in {self.settings.timeout:.0f}s")
            with contextlib.suppress(BenchError, urllib3.exceptions.HTTPError):
                self.api.request("DELETE", path, {"gracePeriodSeconds": 0}, ok=(200, 404), timeout=300)
            time.sleep(0.5)


class Feeder:
    """Creates an arrival workload's pods on schedule (and churns), in a thread."""

    def __init__(self, harness: Harness, workload: Workload, namespace: str, pods: list[dict[str, Any]],
                 tracker: Tracker, ready: float) -> None:
        self.harness, self.workload, self.namespace, self.pods = harness, workload, namespace, pods
        self.tracker, self.ready = tracker, ready
        self.created = len(pods) if workload.backlog else 0
        self.deleted = 0
        self.finished = threading.Event()
        self.finished_at = 0.0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="feeder")

    def __enter__(self) -> Feeder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        try:
            if not self.workload.backlog:
                self._arrivals()
            if self.workload.churn_seconds:
                self._churn()
        except BaseException as error:  # reported by the harness's wait
            self.error = error
        self.finished_at = time.monotonic()
        self.finished.set()

    def _arrivals(self) -> None:
        index = 0
        arrivals = self.workload.arrivals
        with ThreadPoolExecutor(self.harness.settings.creators) as pool:
            while index < len(arrivals) and not self._stop.is_set():
                due = self.ready + arrivals[index].at
                wait = due - time.monotonic()
                if wait > 0:
                    self._stop.wait(wait)
                batch = []
                while index < len(arrivals) and self.ready + arrivals[index].at <= time.monotonic():
                    batch.append(self.pods[index])
                    index += 1
                for _ in pool.map(lambda p: self.harness._create(self.namespace, p), batch):
                    pass
                self.created += len(batch)

    def _churn(self) -> None:
        rng = random.Random(self.harness.settings.seed)
        template = self.pods[0] if self.pods else None
        if template is None:
            return
        end = time.monotonic() + self.workload.churn_seconds
        tick, serial = 1.0, 0
        while time.monotonic() < end and not self._stop.is_set():
            started = time.monotonic()
            count = max(1, round(self.workload.churn_rate * tick))
            bound = self.tracker.bound_now()
            victims = rng.sample(bound, min(count, len(bound)))
            path = f"/api/v1/namespaces/{self.namespace}/pods"
            for name in victims:
                self.harness.api.request("DELETE", f"{path}/{name}", {"gracePeriodSeconds": 0}, ok=(200, 404))
            self.deleted += len(victims)
            for _ in range(len(victims)):
                fresh = json.loads(json.dumps(template))
                fresh["metadata"]["name"] = f"churn-{serial:07d}"
                serial += 1
                self.harness._create(self.namespace, fresh)
                self.created += 1
            self._stop.wait(max(0.0, tick - (time.monotonic() - started)))


def _for(template: Mapping[str, Any], namespace: str, scheduler_name: str) -> dict[str, Any]:
    pod: dict[str, Any] = json.loads(json.dumps(template))
    pod["metadata"]["namespace"] = namespace
    pod["spec"]["schedulerName"] = scheduler_name
    return pod


def _is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _object_path(api_version: str, kind: str, name: str, namespace: str | None) -> str:
    plural = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
              "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings"}[kind]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    return f"{base}/namespaces/{namespace}/{plural}/{name}" if namespace else f"{base}/{plural}/{name}"


# --------------------------------------------------------------------------- the run


def run(plane: ControlPlane, workloads: Sequence[Workload], schedulers: Sequence[str], settings: Settings,
        say: Say | None = None) -> dict[str, Any]:
    """``{workload: {scheduler: figures}}``. The nodes, namespaces and RBAC it made are removed
    afterwards, so a control plane shared with other tests is left as it was."""
    doc: dict[str, Any] = {}
    with Harness(plane, settings, say) as harness:
        harness.apply_rbac()
        try:
            for workload in workloads:
                harness.say(f"{workload.name}: {workload.summary}")
                names = [n["metadata"]["name"] for n in workload.nodes]
                try:
                    harness.create_nodes(workload.nodes)
                    doc[workload.name] = {}
                    for scheduler in schedulers:
                        result = harness.run(workload, scheduler)
                        doc[workload.name][scheduler] = result
                        harness.say(f"  {scheduler}: {result['pods_bound']} bound, {result['pods_per_second']} "
                                    f"pods/s, p99 {result['latency_seconds']['p99']}s, {result['pending']} pending")
                finally:
                    harness.delete_nodes(names)
        finally:
            harness.remove_rbac()
            for scheduler in schedulers:
                harness.api.request("DELETE", f"/api/v1/namespaces/tp-{scheduler}", ok=(200, 202, 404))
    return doc


def notes(workloads: Sequence[Workload], settings: Settings) -> list[str]:
    out = [f"{w.name}: {w.summary}" + "".join(f"; {n}" for n in w.notes) for w in workloads]
    args = f", args: {' '.join(settings.kubeplace_args)}" if settings.kubeplace_args else ""
    out += [
        f"kube-scheduler: default profile, client QPS and burst {settings.qps} (its default of 50 would throttle "
        "its bindings; scheduler_perf raises them the same way), cluster-admin credentials",
        "kubeplace: `kubeplace serve` of this checkout as a subprocess, as the kubeplace ServiceAccount user with "
        f"deploy/rbac.yaml's rights only, Lease in kubeplace-system{args}",
        f"the {NOT_READY} taint of each new node is removed by the harness once kwok reports the node Ready",
        "pods/s and latency count from the scheduler's launch for a backlog (pods created while it was stopped), "
        "from each pod's creation as the watch saw it otherwise; latency percentiles are nearest-rank",
        f"a run ends when every pod is bound or nothing was bound for {settings.settle:g}s",
        "etcd, the API server, kwok and this harness share the machine's cores with the scheduler under test",
    ]
    return out
