"""`kubeplace serve` against the real API server: gangs bound whole, unplaceable gangs reported,
leader election between two replicas, and a leader stopped in the middle of a batch.

Each test runs its schedulers as threads of this process (:class:`serve.app.Service`), limited
to the test's namespace (pending pods elsewhere are never touched) and holding a Lease in it.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes import client

from kubeplace.kube.binder import Outcome
from kubeplace.kube.client import Cluster
from kubeplace.kube.kubeconfig import connect
from kubeplace.models.config import Configuration, Profile, SolverSettings
from kubeplace.serve.app import LeaseSettings, Service
from kubeplace.serve.settings import ServeSettings

from . import controlplane as cp
from .test_bind_e2e import create_pods, kwok_nodes, pod_manifest, pod_nodes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

GANG_LABEL, MIN_MEMBER = "kubeplace.io/gang", "kubeplace.io/gang-min-member"
OPTIONS = SolverSettings(time_limit=5, workers=1, seed=0)


def member(name: str, namespace: str, gang: str, min_member: int, cpu: str, memory: str = "1Gi") -> dict[str, Any]:
    manifest = pod_manifest(name, namespace, cpu=cpu, memory=memory)
    manifest["metadata"].update(labels={GANG_LABEL: gang}, annotations={MIN_MEMBER: str(min_member)})
    return manifest


def service(kubeconfig: str, namespace: str, identity: str, cluster: Any = None) -> Service:
    settings = ServeSettings(batch_window=0.3, namespaces=frozenset({namespace}), initial_backoff=0.5,
                             max_backoff=1.0)
    lease = LeaseSettings(name="kubeplace", namespace=namespace, duration=5.0, renew_deadline=3.5, retry_period=0.4)
    return Service(cast(Cluster, cluster or connect(kubeconfig)), Configuration(), Profile(), OPTIONS, settings,
                   lease, identity, watch_seconds=10)


@contextlib.contextmanager
def running(*services: Service) -> Iterator[None]:
    try:
        for s in services:
            s.start(sync_timeout=20)
        yield
    finally:
        for s in services:
            s.stop(release=True, timeout=20)


def bound_by(s: Service) -> list[str]:
    return [r.binding.name for r in s.scheduler.results if r.outcome == Outcome.BOUND]


def events(core: client.CoreV1Api, namespace: str, reason: str) -> dict[str, str]:
    """Pod name -> message of its latest event with ``reason``."""
    return {e.involved_object.name: e.message for e in core.list_namespaced_event(namespace).items
            if e.reason == reason}


def test_gang_bound_whole_and_gang_that_cannot_fit_binds_nothing(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(admin_api)
    specs = {"a": {"cpu": "4", "memory": "8Gi"}, "b": {"cpu": "4", "memory": "8Gi"}}
    train = ["launcher", "worker-0", "worker-1", "worker-2"]
    huge = [f"huge-{i}" for i in range(3)]
    with kwok_nodes(core, namespace, specs):
        s = service(str(control_plane.admin_kubeconfig), namespace, "solo")
        with running(s):
            create_pods(core, namespace, [
                member("launcher", namespace, "train", 4, cpu="500m", memory="512Mi"),
                *(member(f"worker-{i}", namespace, "train", 4, cpu="2", memory="2Gi") for i in range(3)),
                *(member(name, namespace, "huge", 3, cpu="3") for name in huge),  # 9 cpu > 8 in all
            ])  # fmt: skip
            cp.wait_for(lambda: all(pod_nodes(core, namespace)[n] for n in train), 30, "gang train bound")
            cp.wait_for(lambda: set(huge) <= set(events(core, namespace, "FailedScheduling")), 30,
                        "FailedScheduling events for gang huge")
        nodes = pod_nodes(core, namespace)
        assert all(nodes[n] == "" for n in huge)
        assert sorted(bound_by(s)) == sorted(train)
        failed = events(core, namespace, "FailedScheduling")
        assert "gang not placed" in failed["huge-0"] and "Insufficient cpu" in failed["huge-0"], failed
        assert set(train) <= set(events(core, namespace, "Scheduled"))
        assert s.metrics.value("kubeplace_pods_bound_total") == 4


def test_two_replicas_sharing_a_lease_only_the_leader_binds(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(admin_api)
    names = [f"web-{i}" for i in range(6)]
    with kwok_nodes(core, namespace, {"a": {"cpu": "8", "memory": "16Gi"}}):
        first = service(str(control_plane.admin_kubeconfig), namespace, "replica-a")
        second = service(str(control_plane.admin_kubeconfig), namespace, "replica-b")
        with running(first, second):
            create_pods(core, namespace, [pod_manifest(n, namespace, cpu="500m") for n in names])
            cp.wait_for(lambda: all(pod_nodes(core, namespace).values()), 30, "every pod bound")
            leaders = [s for s in (first, second) if s.scheduler.leader.is_leader()]
        assert len(leaders) == 1
        follower = second if leaders[0] is first else first
        assert sorted(bound_by(leaders[0])) == names
        assert follower.scheduler.results == []


class StopsAfter:
    """A cluster that stops its scheduler (as a kill would, between two requests) after
    ``count`` bindings; everything else is the real client."""

    def __init__(self, cluster: Cluster, count: int) -> None:
        self.cluster, self.count = cluster, count
        self.service: Service | None = None

    def bind(self, *args: Any, **kwargs: Any) -> None:
        self.cluster.bind(*args, **kwargs)
        self.count -= 1
        if self.count == 0 and self.service is not None:
            self.service.stop_event.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)


def test_leader_stopped_mid_batch_loses_and_duplicates_nothing(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(admin_api)
    kubeconfig = str(control_plane.admin_kubeconfig)
    names = [f"rank-{i}" for i in range(8)]
    with kwok_nodes(core, namespace, {"a": {"cpu": "8", "memory": "16Gi"}, "b": {"cpu": "8", "memory": "16Gi"}}):
        wrapper = StopsAfter(connect(kubeconfig), 3)
        first = service(kubeconfig, namespace, "replica-a", wrapper)
        wrapper.service = first
        second = service(kubeconfig, namespace, "replica-b")
        first.start(sync_timeout=20)
        cp.wait_for(first.scheduler.leader.is_leader, 10, "replica-a leads")
        try:
            with running(second):
                create_pods(core, namespace, [member(n, namespace, "job", 8, cpu="1") for n in names])
                cp.wait_for(first.stop_event.is_set, 30, "replica-a stopped after 3 bindings")
                first.stop(release=False)  # as if killed: the lease is left to expire
                cp.wait_for(lambda: all(pod_nodes(core, namespace).values()), 30, "every pod bound")
        finally:
            first.stop(release=False)
    by_a, by_b = bound_by(first), bound_by(second)
    # Bindings run concurrently (kube.binder.bind_concurrently): the ones replica-a had already
    # sent when it was stopped complete, none is started after; the rest are replica-b's.
    assert len(by_a) >= 3 and by_b and not set(by_a) & set(by_b)
    assert sorted(by_a + by_b) == names
    attempts = [r.binding.name for s in (first, second) for r in s.scheduler.results]
    assert len(attempts) == len(set(attempts)) + sum(r.outcome == Outcome.CONFLICT for r in second.scheduler.results)


def test_serve_command_logs_json_serves_metrics_and_stops_on_sigterm(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(admin_api)
    port = cp.free_port()
    with kwok_nodes(core, namespace, {"a": {"cpu": "4", "memory": "8Gi"}}):
        process = subprocess.Popen(
            [sys.executable, "-m", "kubeplace.cli.main", "serve", "--kubeconfig", str(control_plane.admin_kubeconfig),
             "-n", namespace, "--lease-namespace", namespace, "--batch-window", "0.2", "--metrics-port", str(port),
             "--metrics-address", "127.0.0.1", "--identity", "cli"],
            stderr=subprocess.PIPE, text=True)
        try:
            create_pods(core, namespace, [pod_manifest("web", namespace)])
            cp.wait_for(lambda: pod_nodes(core, namespace)["web"] != "", 30, "pod web bound by kubeplace serve")
            node = pod_nodes(core, namespace)["web"]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                metrics = response.read().decode()
            assert "kubeplace_pods_bound_total 1.0" in metrics and "kubeplace_leader 1.0" in metrics
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 0 and time.monotonic() - started < 15, stderr
    lines = [json.loads(line) for line in stderr.splitlines()]
    decisions = [entry for entry in lines if entry["msg"] == "decision"]
    assert decisions == [{**decisions[0], "pod": f"{namespace}/web", "node": node, "outcome": "bound"}]
    assert lines[-1]["msg"] == "stopped"
