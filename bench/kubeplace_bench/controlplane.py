"""A real Kubernetes control plane on loopback, for the e2e tests and ``kubeplace bench cluster``.

Runs etcd, kube-apiserver, kube-controller-manager and kwok (fake nodes) as
local processes bound to 127.0.0.1, plus kube-scheduler on demand. The binaries
come from `.ci/build-controlplane`, which builds them once into a cache outside
the repository.

Every process runs in its own process group with its log in the work dir, so a
stop kills helpers too and a failed startup can show the component's last lines.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client as kube_client
from kubernetes import config as kube_config

from kubeplace_bench.controlplane_binaries import (  # re-exported: one import path for the e2e tests and the bench
    _PR_SET_PDEATHSIG,
    ADMIN_USER,
    KEEP_WORKDIR_ENV,
    KUBEPLACE_USER,
    KWOK_NODE_ANNOTATION,
    KWOK_NODE_ANNOTATION_VALUE,
    LOG_TAIL_LINES,
    SERVICE_CLUSTER_IP_RANGE,
    ControlPlaneError,
    _tail,
)
from kubeplace_bench.controlplane_pki import FRONT_PROXY_CLIENT, Pki, generate_pki, write_kubeconfig, write_token_file

# --------------------------------------------------------------------------- processes


@dataclass
class Component:
    """One running control-plane process, in its own process group."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            return _tail(self.log_path.read_text(errors="replace"), lines)
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the whole process group, then SIGKILL it if it is still up after `timeout`."""
        if self.alive():
            _signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout)
        # Children that outlived the leader still belong to its group.
        _signal_group(self.process.pid, signal.SIGKILL)

    def __enter__(self) -> Component:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)




def spawn(name: str, argv: Sequence[str], workdir: Path, env: Mapping[str, str] | None = None) -> Component:
    """Start `argv` with its output in ``workdir/logs/<name>.log`` (``env``: added to this process's)."""
    log_path = workdir / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={**os.environ, **env} if env else None,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    return Component(name, process, log_path)


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGKILL it when pytest dies without running its teardown.

    The components run in their own sessions (so a stop can kill each whole group);
    without this, a pytest killed by SIGKILL or SIGTERM would leave them running.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def wait_ready(component: Component, probe: Callable[[], bool], timeout: float) -> None:
    """Poll `probe` until it holds; fail early, with the log tail, if the process dies or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        if not component.alive():
            raise ControlPlaneError(
                f"{component.name} exited with code {component.process.returncode} during startup; "
                f"last lines of {component.log_path}:\n{component.log_tail()}"
            )
        if probe():
            return
        if time.monotonic() > deadline:
            raise ControlPlaneError(
                f"{component.name} was not ready after {timeout:.0f}s; "
                f"last lines of {component.log_path}:\n{component.log_tail()}"
            )
        time.sleep(0.2)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_ok(url: str, *, context: ssl.SSLContext | None = None, token: str | None = None) -> bool:
    """True if GET `url` answers 200 (any connection error or other status is False)."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _unverified_tls() -> ssl.SSLContext:
    """For the health endpoints of components that serve a self-signed cert on loopback."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


# --------------------------------------------------------------------------- PKI, tokens, kubeconfigs
@dataclass
class ControlPlane:
    """A running control plane; what the `control_plane` fixture yields."""

    server: str
    admin_kubeconfig: Path
    kubeplace_kubeconfig: Path
    bin_dir: Path
    workdir: Path
    pki: Pki
    admin_token: str
    kubeplace_user: str = KUBEPLACE_USER
    components: list[Component] = field(default_factory=list)
    kwok_port: int = 0
    """Where kwok serves (its nodes' kubelet port: /metrics/nodes/NODE/metrics/resource)."""

    @property
    def ca_cert(self) -> Path:
        """The CA that signed the apiserver's serving cert."""
        return self.pki.ca_cert

    def start_scheduler(
        self,
        config: Mapping[str, Any] | None = None,
        extra_args: Sequence[str] = (),
        timeout: float = 60.0,
    ) -> Component:
        """Start kube-scheduler (default profile unless `config` is a KubeSchedulerConfiguration).

        The returned handle is stopped with ``.stop()`` or by using it as a context
        manager, and in any case when the control plane stops.
        """
        port = free_port()
        name = f"kube-scheduler-{port}"
        args = [
            str(self.bin_dir / "kube-scheduler"),
            *self.delegated_auth_args(),
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / name}",
        ]
        if config is None:
            args += [f"--kubeconfig={self.admin_kubeconfig}", "--leader-elect=false"]
        else:
            args.append(f"--config={self._write_scheduler_config(name, config)}")
        scheduler = self.launch(name, [*args, *extra_args])
        readyz = f"https://127.0.0.1:{port}/readyz"
        try:
            wait_ready(scheduler, lambda: http_ok(readyz, context=_unverified_tls()), timeout)
        except ControlPlaneError:
            scheduler.stop()
            raise
        return scheduler

    def stop(self) -> None:
        """Stop every component, newest first (scheduler and controllers before the apiserver and etcd)."""
        while self.components:
            self.components.pop().stop()

    def launch(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Component:
        """Start a process that `stop` will stop."""
        component = spawn(name, argv, self.workdir, env)
        self.components.append(component)
        return component

    def delegated_auth_args(self) -> list[str]:
        """Flags that let a component check the callers of its own HTTPS endpoints against the apiserver."""
        return [
            f"--authentication-kubeconfig={self.admin_kubeconfig}",
            f"--authorization-kubeconfig={self.admin_kubeconfig}",
        ]

    def _write_scheduler_config(self, name: str, config: Mapping[str, Any]) -> Path:
        merged: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            **config,
        }
        merged["clientConnection"] = {
            **merged.get("clientConnection", {}),
            "kubeconfig": str(self.admin_kubeconfig),
        }
        merged.setdefault("leaderElection", {"leaderElect": False})
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(merged, sort_keys=False))
        return path


@dataclass(frozen=True)
class Timeouts:
    """Bounds on each startup step, in seconds."""

    etcd: float = 30.0
    apiserver: float = 120.0
    controller_manager: float = 60.0
    kwok: float = 30.0


def start_etcd(cp: ControlPlane, timeout: float) -> str:
    """Start etcd on loopback; returns its client URL."""
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    etcd = cp.launch(
        "etcd",
        [
            str(cp.bin_dir / "etcd"),
            "--name=e2e",
            f"--data-dir={cp.workdir / 'etcd-data'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=e2e={peer}",
            "--unsafe-no-fsync",  # throwaway data: fsync only slows the tests down
            "--log-level=warn",
        ],
    )
    wait_ready(etcd, lambda: _etcd_healthy(client), timeout)
    return client


def _etcd_healthy(client_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{client_url}/health", timeout=2) as response:
            return bool(json.load(response).get("health") == "true")
    except (urllib.error.URLError, OSError, ValueError):
        return False


def start_apiserver(cp: ControlPlane, etcd_url: str, token_file: Path, port: int, timeout: float) -> None:
    pki = cp.pki
    apiserver = cp.launch(
        "kube-apiserver",
        [
            str(cp.bin_dir / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--token-auth-file={token_file}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # The 'kubernetes' Service endpoint may not be a loopback address.
            "--endpoint-reconciler-type=none",
            f"--cert-dir={cp.workdir / 'apiserver-certs'}",
            "--profiling=false",
            # The aggregator: it proxies aggregated APIs (metrics.k8s.io) with this client
            # certificate and the caller's identity in these headers.
            f"--requestheader-client-ca-file={pki.ca_cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.proxy_cert}",
            f"--proxy-client-key-file={pki.proxy_key}",
        ],
    )
    tls = ssl.create_default_context(cafile=str(pki.ca_cert))
    wait_ready(apiserver, lambda: http_ok(f"{cp.server}/readyz", context=tls, token=cp.admin_token), timeout)


def start_controller_manager(cp: ControlPlane, timeout: float) -> None:
    port, pki = free_port(), cp.pki
    kcm = cp.launch(
        "kube-controller-manager",
        [
            str(cp.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={cp.admin_kubeconfig}",
            *cp.delegated_auth_args(),
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={cp.workdir / 'kcm-certs'}",
            "--leader-elect=false",
            # All default controllers; the cloud ones turn themselves off without a cloud provider.
            "--controllers=*",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}",
            f"--cluster-signing-key-file={pki.ca_key}",
        ],
    )
    wait_ready(kcm, lambda: http_ok(f"https://127.0.0.1:{port}/healthz", context=_unverified_tls()), timeout)


def start_kwok(cp: ControlPlane, timeout: float) -> None:
    port = free_port()
    kwok = cp.launch(
        "kwok",
        [
            str(cp.bin_dir / "kwok"),
            f"--config={cp.bin_dir / 'kwok-stages.yaml'}",
            f"--kubeconfig={cp.admin_kubeconfig}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
            "--node-ip=127.0.0.1",
            # Leases keep its nodes Ready: its heartbeat stage updates a node's status only every
            # 10 minutes, so without them the node lifecycle controller finds every node not
            # Ready after 50 s, taints it node.kubernetes.io/unreachable (NoSchedule) and no pod
            # is scheduled there until kwok marks it Ready again, about once a minute.
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{port}",
            # Nodes report kwok's server as their kubelet port: metrics-server scrapes it there.
            f"--node-port={port}",
            # kwok's emulated /metrics/resource, with usage from pod annotations (when built).
            *([f"--config={metrics}"] if (metrics := cp.bin_dir / "kwok-metrics.yaml").is_file() else []),
        ],
    )
    cp.kwok_port = port
    wait_ready(kwok, lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), timeout)


@contextlib.contextmanager
def running_control_plane(bin_dir: Path, timeouts: Timeouts = Timeouts()) -> Iterator[ControlPlane]:
    """Start the control plane in a fresh temp dir; stop it and remove the dir on exit, whatever happens.

    The dir (with the components' logs) is kept if the startup failed or ``KUBEPLACE_E2E_KEEP=1``.
    """
    workdir = Path(tempfile.mkdtemp(prefix="kubeplace-e2e-"))
    started = False
    try:
        cp = _prepare(bin_dir, workdir)
        try:
            _start_all(cp, timeouts)
            started = True
            yield cp
        finally:
            cp.stop()
    finally:
        if started and os.environ.get(KEEP_WORKDIR_ENV) != "1":
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kubeplace e2e: kept the control plane work dir {workdir}", file=sys.stderr)


def _prepare(bin_dir: Path, workdir: Path) -> ControlPlane:
    """Write the PKI, token file and kubeconfigs; pick the apiserver port."""
    pki = generate_pki(workdir / "pki")
    admin_token, kubeplace_token = secrets.token_hex(16), secrets.token_hex(16)
    write_token_file(workdir / "tokens.csv", admin_token, kubeplace_token)
    server = f"https://127.0.0.1:{free_port()}"
    return ControlPlane(
        server=server,
        admin_kubeconfig=write_kubeconfig(
            workdir / "admin.kubeconfig",
            server=server,
            ca_cert=pki.ca_cert,
            user=ADMIN_USER,
            token=admin_token,
        ),
        kubeplace_kubeconfig=write_kubeconfig(
            workdir / "kubeplace.kubeconfig",
            server=server,
            ca_cert=pki.ca_cert,
            user=KUBEPLACE_USER,
            token=kubeplace_token,
        ),
        bin_dir=bin_dir,
        workdir=workdir,
        pki=pki,
        admin_token=admin_token,
    )


def _start_all(cp: ControlPlane, timeouts: Timeouts) -> None:
    etcd_url = start_etcd(cp, timeouts.etcd)
    port = int(cp.server.rsplit(":", 1)[1])
    start_apiserver(cp, etcd_url, cp.workdir / "tokens.csv", port, timeouts.apiserver)
    start_controller_manager(cp, timeouts.controller_manager)
    start_kwok(cp, timeouts.kwok)


# --------------------------------------------------------------------------- helpers for tests


def fake_node_manifest(
    name: str,
    *,
    cpu: str = "32",
    memory: str = "256Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    extended: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node that kwok manages (annotation) and that real workloads avoid (taint).

    ``extended`` adds resources to its capacity, e.g. ``{"nvidia.com/gpu": "4"}``.
    """
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, **(extended or {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": {
            "taints": [{"key": KWOK_NODE_ANNOTATION, "value": KWOK_NODE_ANNOTATION_VALUE, "effect": "NoSchedule"}]
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


STARTUP_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
"""Taints the API server (TaintNodesByCondition admission) and the node lifecycle controller set
on a new node until it reports Ready, and that the controller removes shortly after."""


def node_settled(node: Mapping[str, Any]) -> bool:
    """A node (as the API returns it) that is Ready and no longer carries a startup taint: only then
    can pods that do not tolerate those taints go there. A kwok node turns Ready at once, but the
    controller lifts its not-ready taint a moment later."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("key") in STARTUP_TAINTS for t in taints)


#: Lets a pod onto the nodes `fake_node_manifest` makes.
KWOK_TOLERATION: dict[str, str] = {
    "key": KWOK_NODE_ANNOTATION,
    "operator": "Equal",
    "value": KWOK_NODE_ANNOTATION_VALUE,
    "effect": "NoSchedule",
}


def api_client(kubeconfig: Path) -> kube_client.ApiClient:
    """A `kubernetes` API client for one of the control plane's kubeconfigs; close it when done."""
    api: kube_client.ApiClient = kube_config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig)
    )
    return api


class ApiRefused(RuntimeError):
    """The API server answered a request of :class:`ApiHttp` with an error status."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status
        self.message = message


class ApiHttp:
    """Plain JSON requests to the control plane's API server as its admin, on one kept-alive connection.

    For the bench and the e2e replay, which create and patch pods by the hundred: the typed client
    validates every object it reads back (~25 ms a pod). PATCH bodies are JSON merge patches.
    """

    def __init__(self, plane: ControlPlane) -> None:
        self.server = plane.server
        self._token = plane.admin_token
        self._pool = urllib3.PoolManager(maxsize=1, ca_certs=str(plane.ca_cert), cert_reqs="CERT_REQUIRED")

    def close(self) -> None:
        self._pool.clear()

    def __enter__(self) -> ApiHttp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None, *,
                query: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The answer's JSON; :class:`ApiRefused` for a status outside 2xx."""
        content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json", "Content-Type": content_type}
        url = f"{self.server}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        response = self._pool.request(method, url, body=None if body is None else json.dumps(body).encode(),
                                      headers=headers, timeout=urllib3.Timeout(connect=10, read=60), retries=False)
        text = response.data.decode(errors="replace")
        if not 200 <= response.status < 300:
            try:
                message = str(json.loads(text).get("message", text))
            except ValueError:
                message = text
            raise ApiRefused(method, path, response.status, message[:500])
        answer: dict[str, Any] = json.loads(text) if text else {}
        return answer


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.25) -> None:
    """Poll `predicate` until it holds, or raise TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
