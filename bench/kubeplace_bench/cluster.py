"""``kubeplace bench cluster``: the real kube-scheduler and kubeplace on the same scenario, on a real
control plane (etcd, kube-apiserver, kube-controller-manager, kwok fake nodes) on 127.0.0.1.

Per scenario: the kwok nodes are created once; then each copy of the pods runs on the empty
cluster in turn and is deleted afterwards:

- ``kube-scheduler``: the kube-scheduler (default profile) is started, then the pods are created
  one by one in scenario order with ``schedulerName: default-scheduler`` in ``bench-default``;
  the copy ends when every pod is bound or nothing changed for ``settle`` seconds;
- ``kubeplace``: the same pods with ``schedulerName: kubeplace`` in ``bench-kubeplace``, then
  live snapshot -> ``make_plan`` -> ``verify_plan`` -> ``bind_all`` through pods/binding.

Both copies are measured by one function on the final state read back from the API
(:func:`measure`), whichever scheduler placed the pods.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubeplace.kube.binder import Binding, Outcome, bind_all
from kubeplace.kube.client import Cluster
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.objects import GPU
from kubeplace.kube.parse import build_snapshot
from kubeplace.models import evaluate
from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, SolverSettings, instantiate
from kubeplace.models.config_load import parse_configuration
from kubeplace.models.fragmentation import cluster_fragmentation
from kubeplace.models.gpu import device_notes
from kubeplace.models.problem import Assignment
from kubeplace.plan.checks import verify_plan
from kubeplace.plan.pipeline import make_plan
from kubeplace.serve.app import LeaseSettings, Service
from kubeplace.serve.settings import ServeSettings
from kubeplace_bench.cluster_preempt import preemption_measure
from kubeplace_bench.cluster_scenarios import Scenario
from kubeplace_bench.controlplane import ApiHttp, ApiRefused, ControlPlane, api_client, node_settled, wait_for

DEFAULT_SCHEDULER = "default-scheduler"
KUBEPLACE = "kubeplace"
COPIES = {"kube-scheduler": (DEFAULT_SCHEDULER, "bench-default"), "kubeplace": (KUBEPLACE, "bench-kubeplace")}
SHAPES_SCHEDULER = "bench-shapes"
"""Scheduler name of the in-memory pod copies that stand for the workload's shapes in :func:`measure`."""
KUBEPLACE_CONFIG = {
    "apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementConfiguration",
    "profiles": [{"schedulerName": KUBEPLACE, "pluginConfig": [{"name": "Tenant", "args": {"trustPodTenant": True}}]}],
}
"""kubeplace's configuration here: the bench creates every pod itself, in one untenanted namespace
per copy, so the pods' ``tenant`` label (the ``tenants`` scenario) is trusted to name their tenant."""

Say = Callable[[str], None]


class BenchError(RuntimeError):
    """The benchmark could not run a scenario (a timeout, a refused plan, an unclean cluster)."""


@dataclass(frozen=True)
class Settings:
    seed: int = 0
    time_limit: float = 10.0
    settle: float = 5.0
    """The kube-scheduler copy ends after this many seconds without a new binding."""
    timeout: float = 300.0
    """Bound on each wait (nodes ready, pods placed, pods gone)."""


@dataclass(frozen=True)
class Metrics:
    pods: int
    placed: int
    pending: int
    gpus_placed: int
    balance: float
    """sum over nodes of (u_i - mean u)^2 for cpu plus the same for memory (models/evaluate.balance)."""
    gpu_fragmentation: float
    """FGD fragmentation in GPUs: free GPU capacity the scenario's pod shapes (by popularity) cannot use."""
    gpu_fragmentation_ratio: float
    free_gpus: int
    wall_seconds: float
    """create_seconds + place_seconds."""
    create_seconds: float
    """Creating the pods, one by one in scenario order (the same work in both copies)."""
    place_seconds: float
    """kube-scheduler: from the last pod created to the last binding observed (it binds while the
    pods arrive; polled every 0.2 s, the ``settle`` wait is not counted); kubeplace: snapshot,
    solve, verify and bind."""


# --------------------------------------------------------------------------- metrics


def measure(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Placement metrics of the final state: ``nodes`` and ``pods`` as the API returned them.

    Bound pods are the usage; each pod of the scenario, bound or not, also enters as a pending copy
    so the aggregated model's pod classes are the scenario's shapes and popularity (FGD's task
    distribution). Balance and fragmentation then come from models/evaluate and models/fragmentation
    with no placement on top of the usage.
    """
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    shapes = []
    for p in pods:
        shape = copy.deepcopy(p)
        shape["metadata"] = {**shape["metadata"], "name": f"shape-{p['metadata']['name']}", "uid": ""}
        shape["spec"] = {**shape["spec"], "schedulerName": SHAPES_SCHEDULER}
        shape["spec"].pop("nodeName", None)
        shape["status"] = {"phase": "Pending"}
        shapes.append(shape)
    snapshot = build_snapshot([(o, "bench") for o in (*nodes, *bound, *shapes)], scheduler_name=SHAPES_SCHEDULER)
    config = Configuration()
    profile = config.profile(None)
    agg = aggregate(snapshot, instantiate(config, profile, snapshot), config.gpu)
    problem, empty = agg.problem, Assignment.empty()
    frag, ratio = cluster_fragmentation(problem, empty)
    free_gpus = int((problem.device_free >= 1000).sum()) if problem.has_devices else 0
    return {
        "pods": len(pods),
        "placed": len(bound),
        "pending": len(pods) - len(bound),
        "gpus_placed": sum(_gpus(p) for p in bound),
        "balance": round(evaluate.balance(problem, empty, "cpu") + evaluate.balance(problem, empty, "memory"), 4),
        "gpu_fragmentation": round(frag / 1000, 2),
        "gpu_fragmentation_ratio": round(ratio, 4),
        "free_gpus": free_gpus,
    }


def _gpus(pod: dict[str, Any]) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        total += int(((c.get("resources") or {}).get("requests") or {}).get(GPU, 0))
    return total


# --------------------------------------------------------------------------- the runner


class Runner:
    """Runs scenarios on a running control plane; one instance per control plane."""

    def __init__(self, plane: ControlPlane, settings: Settings = Settings(), say: Say | None = None) -> None:
        self.plane = plane
        self.settings = settings
        self.say: Say = say or (lambda _msg: None)
        self._api = api_client(plane.admin_kubeconfig)
        self.core = k8s.CoreV1Api(self._api)
        self.cluster: Cluster = connect(str(plane.admin_kubeconfig))
        self._http = ApiHttp(plane)

    def close(self) -> None:
        self._http.close()
        self._api.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, scenario: Scenario) -> dict[str, Any]:
        """{"kube-scheduler": metrics, "kubeplace": metrics} for one scenario; its nodes are removed after."""
        names = [n["metadata"]["name"] for n in scenario.nodes]
        self.say(f"{scenario.name}: {scenario.summary}")
        failed = True
        try:
            self._create_nodes(scenario.nodes)
            self._priority_classes(scenario.priority_classes, create=True)
            out: dict[str, Any] = {}
            for label, (scheduler, namespace) in COPIES.items():
                self._ensure_namespace(namespace)
                self._check_empty(names)
                if scenario.background:
                    out[label] = self._preemption_copy(scenario, namespace, scheduler)
                    self.say(f"  {label}: {out[label]['victims']} victims {out[label]['victim_priorities']}, "
                             f"{out[label]['preemptors_bound']}/{out[label]['preemptors']} preemptors bound, "
                             f"{out[label]['wasted_evictions']} wasted evictions")
                else:
                    runner = self._default_copy if scheduler == DEFAULT_SCHEDULER else self._kubeplace_copy
                    out[label] = runner(scenario, namespace)
                    self.say(f"  {label}: {out[label]['placed']}/{out[label]['pods']} placed, "
                             f"{out[label]['gpus_placed']} GPUs, {out[label]['wall_seconds']}s")
                self._delete_pods(namespace)
                self._delete_objects(scenario.objects, namespace)
            failed = False
            return out
        finally:
            try:
                for namespace in (ns for _, ns in COPIES.values()):
                    self._delete_pods(namespace, missing_ok=True)
                    self._delete_objects(scenario.objects, namespace)
                self._delete_nodes(names)
                self._priority_classes(scenario.priority_classes, create=False)
            except Exception:
                if not failed:
                    raise  # else the scenario's own error is the one to report

    # ----- the two copies

    def _default_copy(self, scenario: Scenario, namespace: str) -> dict[str, Any]:
        # The scheduler runs before the pods arrive, so it sees them one by one in creation order, as
        # in a live cluster. (Started after a pre-created backlog, it does not keep creation order.)
        create_seconds = place_seconds = 0.0
        with self.plane.start_scheduler():
            self._create_objects(scenario.objects, namespace)
            wave, total = list(scenario.pods), 0
            while wave:
                started, created = self._create_pods(wave, namespace, DEFAULT_SCHEDULER)
                total += len(wave)
                last_bind = self._wait_settled(namespace, total, started)
                create_seconds += created - started
                place_seconds += max(last_bind, created) - created
                wave = self._followers(scenario, namespace)
        return self._record(scenario, namespace, create_seconds, place_seconds)

    def _kubeplace_copy(self, scenario: Scenario, namespace: str) -> dict[str, Any]:
        create_seconds = place_seconds = 0.0
        self._create_objects(scenario.objects, namespace)
        wave, total, solver = list(scenario.pods), 0, {}
        while wave:
            started, created = self._create_pods(wave, namespace, KUBEPLACE)
            total += len(wave)
            create_seconds += created - started
            solver = self._plan_and_bind(scenario, namespace)
            place_seconds += time.monotonic() - created
            wave = self._followers(scenario, namespace)
        out = self._record(scenario, namespace, create_seconds, place_seconds)
        out["left"] = solver.pop("left")
        out["solver"] = solver
        return out

    def _plan_and_bind(self, scenario: Scenario, namespace: str) -> dict[str, Any]:
        """Plans the namespace's pending pods from a live snapshot, verifies the plan and binds it;
        the solver's summary and the number of pods kubeplace left to the default scheduler."""
        config = parse_configuration(KUBEPLACE_CONFIG)
        profile = config.profile(KUBEPLACE)
        options = SolverSettings(time_limit=self.settings.time_limit, seed=self.settings.seed)
        snapshot = load_live_snapshot(self.cluster, scheduler_name=KUBEPLACE, namespaces={namespace})
        waiting = len(self.cluster.list_pods(namespace)) - self._bound(namespace)
        if len(snapshot.pending) != waiting:
            raise BenchError(f"kubeplace saw {len(snapshot.pending)} pending pods of {waiting}")
        planned = make_plan(snapshot, config, profile, options)
        placements = planned.plan.placements
        violations = verify_plan(snapshot, placements, config, profile)
        if violations:
            raise BenchError(f"{scenario.name}: kubeplace's plan fails verification: {violations[0]}")
        pods = {(p.namespace, p.name): p for p in snapshot.pending}
        conv = config.gpu
        bindings = [Binding(p.namespace, p.name, p.uid, p.node,
                            device_notes(p.gpus, pods[(p.namespace, p.name)].requests, conv)) for p in placements]
        bound_before = self._bound(namespace)
        results = bind_all(self.cluster, bindings, dry_run=False)
        failed = [r for r in results if r.outcome != Outcome.BOUND]
        if failed:
            raise BenchError(f"{scenario.name}: {len(failed)} binding(s) failed, first: {failed[0].message}")
        wait_for(lambda: self._bound(namespace) >= bound_before + len(results), self.settings.timeout,
                 "kubeplace's bindings")
        return {"status": planned.report.status, "seconds": round(planned.report.seconds, 2),
                "backend": planned.report.backend,
                "left": sum(1 for u in planned.plan.unplaced if u.left_to_default_scheduler)}

    def _followers(self, scenario: Scenario, namespace: str) -> list[dict[str, Any]]:
        """The follower pods whose leader is now bound and which do not exist yet, each with the
        nodeSelector that pins it to its leader's domain (``Followers``)."""
        pods = self.cluster.list_pods(namespace)
        bound = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if (p.get("spec") or {}).get("nodeName")}
        labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in scenario.nodes}
        existing = {p["metadata"]["name"] for p in pods}
        wave = []
        for group in scenario.followers:
            if group.leader not in bound:
                continue
            value = labels[bound[group.leader]].get(group.key)
            for template in group.pods:
                if template["metadata"]["name"] not in existing and value is not None:
                    body = copy.deepcopy(template)
                    body["spec"]["nodeSelector"] = {**body["spec"].get("nodeSelector", {}), group.key: value}
                    wave.append(body)
        return wave

    def _preemption_copy(self, scenario: Scenario, namespace: str, scheduler: str) -> dict[str, Any]:
        """The background running, then the preemptors under the kube-scheduler or ``kubeplace
        serve``; measured once nothing changed for ``settle`` seconds and nothing terminates."""
        for k, group in enumerate(scenario.background):
            if k:
                time.sleep(1.2)  # start times differ: the kube-scheduler's last tie-break
            self._create_pods(group, namespace, DEFAULT_SCHEDULER)
        total = sum(len(g) for g in scenario.background)
        wait_for(lambda: self._running(namespace) >= total, self.settings.timeout, f"{total} background pods running")
        scheduling = self.plane.start_scheduler() if scheduler == DEFAULT_SCHEDULER else self._serving(namespace)
        with scheduling:
            started, created = self._create_pods(scenario.pods, namespace, scheduler)
            last = self._wait_quiet(namespace, started)
        events = self._http.request("GET", f"/api/v1/namespaces/{namespace}/events").get("items") or []
        out = preemption_measure(scenario, self.cluster.list_pods(namespace), events)
        out["create_seconds"] = round(created - started, 2)
        out["wall_seconds"] = round(max(last, created) - started, 2)
        return out

    @contextlib.contextmanager
    def _serving(self, namespace: str) -> Iterator[None]:
        """``kubeplace serve`` (preemption on) for the pods of ``namespace``, in this process."""
        config = parse_configuration(KUBEPLACE_CONFIG)
        solver = SolverSettings(time_limit=self.settings.time_limit, seed=self.settings.seed)
        service = Service(self.cluster, config, config.profile(KUBEPLACE), solver,
                          ServeSettings(batch_window=1.0, namespaces=frozenset({namespace}), max_backoff=2.0),
                          LeaseSettings(name=""), "bench", watch_seconds=30)
        service.start(sync_timeout=self.settings.timeout)
        try:
            yield
        finally:
            service.stop(release=True, timeout=self.settings.timeout)

    def _running(self, namespace: str) -> int:
        return sum(1 for p in self.cluster.list_pods(namespace) if (p.get("status") or {}).get("phase") == "Running")

    def _wait_quiet(self, namespace: str, started: float) -> float:
        """Polls until no pod binds or goes for ``settle`` plus ``time_limit`` seconds (kubeplace may
        be planning the next batch meanwhile) and none is terminating; the monotonic time of the
        last change seen."""
        deadline = time.monotonic() + self.settings.timeout
        state: tuple[Any, ...] = ()
        last = started
        while True:
            pods = self.cluster.list_pods(namespace)
            now_state = tuple(sorted((p["metadata"]["name"], bool((p.get("spec") or {}).get("nodeName")))
                                     for p in pods))
            terminating = any(p["metadata"].get("deletionTimestamp") for p in pods)
            now = time.monotonic()
            if now_state != state:
                state, last = now_state, now
            if not terminating and now - last >= self.settings.settle + self.settings.time_limit:
                return last
            if now > deadline:
                raise BenchError(f"{namespace} still changing after {self.settings.timeout:.0f}s")
            time.sleep(0.2)

    def _priority_classes(self, classes: Sequence[tuple[str, int]], create: bool) -> None:
        scheduling = k8s.SchedulingV1Api(self._api)
        for name, value in classes:
            try:
                if create:
                    scheduling.create_priority_class(k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=name),
                                                                         value=value), _preload_content=False)
                else:
                    scheduling.delete_priority_class(name, _preload_content=False)
            except ApiException as e:
                if e.status not in (404, 409):
                    raise

    def _record(self, scenario: Scenario, namespace: str, create_seconds: float,
                place_seconds: float) -> dict[str, Any]:
        nodes = self.cluster.list_nodes()
        pods = self.cluster.list_pods(namespace)
        out = measure(nodes, pods)
        # Followers never created (their leader was not placed) count as pending.
        out["pods"] = scenario.workload_pods
        out["pending"] = scenario.workload_pods - out["placed"]
        out["left"] = 0
        out["create_seconds"] = round(create_seconds, 2)
        out["place_seconds"] = round(max(place_seconds, 0.0), 2)
        out["wall_seconds"] = round(create_seconds + max(place_seconds, 0.0), 2)
        return out

    def _create_objects(self, objects: Sequence[dict[str, Any]], namespace: str) -> None:
        for obj in objects:
            body = copy.deepcopy(obj)
            body["metadata"]["namespace"] = namespace
            try:
                self._http.request("POST", _object_path(obj, namespace), body)
            except ApiRefused as e:
                raise BenchError(f"create {obj['kind']} {namespace}/{obj['metadata']['name']}: {e}") from None

    def _delete_objects(self, objects: Sequence[dict[str, Any]], namespace: str) -> None:
        for obj in objects:
            try:
                self._http.request("DELETE", f"{_object_path(obj, namespace)}/{obj['metadata']['name']}",
                                   query={"propagationPolicy": "Background"})
            except ApiRefused as e:
                if e.status != 404:
                    raise

    # ----- cluster operations, each wait bounded

    def _create_nodes(self, nodes: Sequence[dict[str, Any]]) -> None:
        for n in nodes:
            body: Any = n  # the client takes plain dicts as well as V1Node
            self.core.create_node(body, _preload_content=False)
        names = {n["metadata"]["name"] for n in nodes}
        wait_for(lambda: self._ready_nodes(names) == len(names), self.settings.timeout,
                 f"{len(names)} kwok nodes to be Ready without startup taints", interval=0.5)

    def _ready_nodes(self, names: set[str]) -> int:
        return sum(1 for n in self.cluster.list_nodes() if n["metadata"]["name"] in names and node_settled(n))

    def _delete_nodes(self, names: Sequence[str]) -> None:
        for name in names:
            try:
                self.core.delete_node(name, _preload_content=False)
            except ApiException as e:
                if e.status != 404:
                    raise
        left = set(names)
        wait_for(lambda: not left & {n["metadata"]["name"] for n in self.cluster.list_nodes()},
                 self.settings.timeout, "the scenario's nodes to be deleted", interval=0.5)

    def _ensure_namespace(self, namespace: str) -> None:
        try:
            self.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
        except ApiException as e:
            if e.status != 409:
                raise
        wait_for(lambda: self._has_service_account(namespace), self.settings.timeout,
                 f"ServiceAccount default in {namespace}")

    def _has_service_account(self, namespace: str) -> bool:
        try:
            self.core.read_namespaced_service_account("default", namespace, _preload_content=False)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return True

    def _check_empty(self, nodes: Sequence[str]) -> None:
        """Both copies start from the same empty cluster: no pod on the scenario's nodes."""
        names = set(nodes)
        busy = [p["metadata"]["name"] for p in self.cluster.list_pods()
                if (p.get("spec") or {}).get("nodeName") in names]
        if busy:
            raise BenchError(f"the scenario's nodes are not empty: {len(busy)} pod(s), e.g. {busy[0]}")

    def _create_pods(self, templates: Sequence[dict[str, Any]], namespace: str,
                     scheduler: str) -> tuple[float, float]:
        """Creates the pods one by one in order; (monotonic start, monotonic end)."""
        started = time.monotonic()
        for t in templates:
            body = copy.deepcopy(t)
            body["metadata"]["namespace"] = namespace
            body["spec"]["schedulerName"] = scheduler
            try:
                self._http.request("POST", f"/api/v1/namespaces/{namespace}/pods", body)
            except ApiRefused as e:
                raise BenchError(f"create pod {namespace}/{body['metadata']['name']}: {e}") from None
        return started, time.monotonic()

    def _bound(self, namespace: str) -> int:
        return sum(1 for p in self.cluster.list_pods(namespace) if (p.get("spec") or {}).get("nodeName"))

    def _wait_settled(self, namespace: str, total: int, started: float) -> float:
        """Polls until every pod is bound or no binding happened for ``settle`` seconds; the monotonic
        time the last new binding was observed (``started`` if none)."""
        deadline = time.monotonic() + self.settings.timeout
        bound, last_change, last_bind = -1, time.monotonic(), started
        while True:
            now_bound = self._bound(namespace)
            now = time.monotonic()
            if now_bound != bound:
                if now_bound > max(bound, 0):
                    last_bind = now
                bound, last_change = now_bound, now
            if bound >= total or now - last_change >= self.settings.settle:
                return last_bind
            if now > deadline:
                raise BenchError(f"the kube-scheduler was still binding after {self.settings.timeout:.0f}s")
            time.sleep(0.2)

    def _delete_pods(self, namespace: str, missing_ok: bool = False) -> None:
        try:
            self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0, _preload_content=False)
        except ApiException as e:
            if e.status == 404 and missing_ok:
                return
            raise
        wait_for(lambda: not self.cluster.list_pods(namespace), self.settings.timeout,
                 f"the pods of {namespace} to be deleted", interval=0.5)


def _object_path(obj: dict[str, Any], namespace: str) -> str:
    """The collection path of a namespaced object (plural = the lower-case kind + "s", right for Job)."""
    version = str(obj["apiVersion"])
    prefix = "/api/v1" if version == "v1" else f"/apis/{version}"
    return f"{prefix}/namespaces/{namespace}/{str(obj['kind']).lower()}s"


def run_scenarios(plane: ControlPlane, scenarios: Sequence[Scenario], settings: Settings,
                  say: Say | None = None) -> dict[str, Any]:
    """The JSON document: {"settings": ..., "scenarios": {name: {"kube-scheduler": ..., "kubeplace": ...}}}."""
    doc: dict[str, Any] = {"settings": asdict(settings), "scenarios": {}}
    with Runner(plane, settings, say) as runner:
        for s in scenarios:
            result = runner.run(s)
            result["summary"] = s.summary
            if s.notes:
                result["notes"] = list(s.notes)
            if s.expected:
                result["expected"] = asdict(s.expected)
            doc["scenarios"][s.name] = result
    return doc


METRIC_COLUMNS = (  # key, heading, format
    ("pods", "pods", "{}"),
    ("placed", "placed", "{}"),
    ("pending", "pending", "{}"),
    ("left", "left", "{}"),
    ("gpus_placed", "GPUs placed", "{}"),
    ("balance", "balance", "{:.4f}"),
    ("gpu_fragmentation", "GPU frag", "{:.2f}"),
    ("free_gpus", "free GPUs", "{}"),
    ("create_seconds", "create s", "{:.2f}"),
    ("place_seconds", "place s", "{:.2f}"),
    ("wall_seconds", "wall s", "{:.2f}"),
)


PREEMPTION_COLUMNS = (  # key, heading, format
    ("victims", "victims", "{}"),
    ("victim_priorities", "victims by priority", "{}"),
    ("highest_victim_priority", "highest", "{}"),
    ("preemptors_bound", "preemptors bound", "{}"),
    ("preemptors", "of", "{}"),
    ("preemptors_running_usefully", "running usefully", "{}"),
    ("wasted_evictions", "wasted evictions", "{}"),
    ("wall_seconds", "wall s", "{:.2f}"),
)


def _rows(doc: dict[str, Any], columns: Sequence[tuple[str, str, str]], preemption: bool) -> list[str]:
    head = ["scenario", "scheduler", *(h for _, h, _ in columns)]
    rows = []
    for name, result in doc["scenarios"].items():
        if ("victims" in result["kubeplace"]) != preemption:
            continue
        for label in COPIES:
            m = result[label]
            rows.append([name, label, *(fmt.format(m[key]) for key, _, fmt in columns)])
    if not rows:
        return []
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
            for r in [head, *rows]]


def table(doc: dict[str, Any]) -> str:
    """Plain-text tables: one row per scenario and scheduler (placement, then preemption)."""
    placing = _rows(doc, METRIC_COLUMNS, preemption=False)
    preempting = _rows(doc, PREEMPTION_COLUMNS, preemption=True)
    notes = []
    for name, result in doc["scenarios"].items():
        notes.append(f"{name}: {result['summary']}")
        notes += [f"  {n}" for n in result.get("notes", [])]
        expected = result.get("expected")
        if expected:
            notes.append(f"  expected placed: kube-scheduler {expected['kube_scheduler']}, kubeplace "
                         f"{expected['kubeplace']}: {expected['why']}")
        solver = result["kubeplace"].get("solver")
        if solver:
            notes.append(f"  kubeplace solver: {solver['backend']} {solver['status']} in {solver['seconds']}s")
    legend = ("left = pods kubeplace left to the default scheduler (rules it does not model; "
              "pods = the workload's, followers never created included); "
              "balance = sum over nodes of (u - mean u)^2, cpu + memory; GPU frag = FGD fragmentation in GPUs "
              "for the scenario's pod shapes; create s = creating the pods in order (the kube-scheduler binds "
              "meanwhile); place s = last pod created to last binding observed (kubeplace: snapshot + solve + "
              "verify + bind); wall s = first pod created to last binding")
    if preempting:
        legend += ("; preemption: victims = running pods gone, wasted evictions = victims evicted for pods "
                   "that are not running usefully at the end (not bound, or in a gang not all bound)")
    return "\n".join([*placing, *([""] if placing and preempting else []), *preempting, "", *notes, legend]) + "\n"
