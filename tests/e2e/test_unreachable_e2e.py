"""An API server that cannot be reached, before the run or half-way through binding.

The half-way case puts a small HTTPS proxy (on 127.0.0.1, terminating TLS with the API server's
own test certificate) between kubeplace and the real API server. It passes requests through
until a given number of bindings went by; the next binding is forwarded (so the server does bind
that pod) but its answer is never delivered: the proxy drops the connection and stops listening,
as a server dying mid-request would. kubeplace must report that pod as unknown and the rest as
not attempted, and a rerun against the reachable server must bind exactly the rest.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from kubernetes import client

from . import controlplane as cp
from .test_bind_e2e import SOLVER_ARGS, assert_exit, bind_report, cli, create_pods, kwok_nodes, pod_manifest, pod_nodes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

_HOP_BY_HOP = {"host", "connection", "keep-alive", "content-length", "transfer-encoding", "proxy-connection"}


class DyingProxy:
    """HTTPS reverse proxy to the API server that 'dies' while forwarding binding number ``allow + 1``."""

    def __init__(self, control_plane: cp.ControlPlane, allow: int) -> None:
        upstream = urlsplit(control_plane.server)
        self.upstream_host, self.upstream_port = upstream.hostname or "127.0.0.1", upstream.port or 443
        self.upstream_tls = ssl.create_default_context(cafile=str(control_plane.ca_cert))
        self.allow = allow
        self.bindings: list[str] = []  # paths of the binding requests forwarded, in order
        self.lock = threading.Lock()
        self.dead = threading.Event()
        serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        serving.load_cert_chain(str(control_plane.pki.serving_cert), str(control_plane.pki.serving_key))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.server.socket = serving.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> DyingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.die()
        self.thread.join(10)

    def die(self) -> None:
        """Stop accepting connections (idempotent)."""
        with self.lock:
            if self.dead.is_set():
                return
            self.dead.set()
        self.server.shutdown()
        self.server.server_close()

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> tuple[int, str, bytes]:
        upstream = http.client.HTTPSConnection(
            self.upstream_host, self.upstream_port, context=self.upstream_tls, timeout=30
        )
        try:
            upstream.request(method, path, body=body, headers=headers)
            response = upstream.getresponse()
            return response.status, response.getheader("Content-Type", "application/json"), response.read()
        finally:
            upstream.close()


def _handler(proxy: DyingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the API client expects
        timeout = 30

        def do_GET(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            binding = self.command == "POST" and self.path.split("?")[0].endswith("/binding")
            with proxy.lock:
                if proxy.dead.is_set():
                    self._drop()
                    return
                if binding:
                    proxy.bindings.append(self.path)
                dying = binding and len(proxy.bindings) > proxy.allow
            status, content_type, data = proxy.forward(self.command, self.path, headers, body)
            if dying:  # the server did the work; its answer is lost with the connection
                self._drop()
                threading.Thread(target=proxy.die, daemon=True).start()
                return
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        def _drop(self) -> None:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    return Handler


def _kubeconfig(control_plane: cp.ControlPlane, server: str, path: Path) -> str:
    return str(cp.write_kubeconfig(path, server=server, ca_cert=control_plane.ca_cert, user=cp.ADMIN_USER,
                                   token=control_plane.admin_token))  # fmt: skip


@contextlib.contextmanager
def _closed_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound (so nobody else takes it) but not listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def test_unreachable_api_server_is_one_line_and_exit_2(control_plane: cp.ControlPlane, tmp_path: Path) -> None:
    with _closed_port() as port:
        kubeconfig = _kubeconfig(control_plane, f"https://127.0.0.1:{port}", tmp_path / "closed.kubeconfig")
        for args in (["plan"], ["bind", "--yes"]):
            result = cli(*args, "--kubeconfig", kubeconfig, *SOLVER_ARGS)
            assert_exit(result, 2)
            assert result.stdout == ""
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1, result.stderr
            assert lines[0].startswith("error: list nodes: API server unreachable:"), lines[0]
            assert "Traceback" not in result.output


def test_server_dying_mid_bind_then_rerun_binds_exactly_the_rest(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(admin_api)
    names = [f"p-{i}" for i in range(6)]
    with kwok_nodes(core, namespace, {"a": {"cpu": "8"}, "b": {"cpu": "8"}}):
        create_pods(core, namespace, [pod_manifest(name, namespace, cpu="1") for name in names])

        with DyingProxy(control_plane, allow=2) as proxy:
            kubeconfig = _kubeconfig(control_plane, proxy.url, tmp_path / "proxy.kubeconfig")
            first = cli("bind", "--kubeconfig", kubeconfig, "--yes", "-n", namespace, "-o", "json", *SOLVER_ARGS)
        assert proxy.dead.is_set() and len(proxy.bindings) == 3

        assert_exit(first, 1)
        report = bind_report(first)
        assert set(report) == set(names)
        in_order = [row["outcome"] for row in bind_report(first).values()]
        assert in_order == ["bound", "bound", "unknown", "not_attempted", "not_attempted", "not_attempted"]
        in_flight = next(name for name, row in report.items() if row["outcome"] == "unknown")
        assert "API server unreachable" in report[in_flight]["message"]
        assert all(in_flight in row["message"] for row in report.values() if row["outcome"] == "not_attempted")

        # The server did bind the pod whose answer was lost, where the plan said; nothing else moved.
        after_first = pod_nodes(core, namespace)
        done = {name for name, row in report.items() if row["outcome"] in ("bound", "unknown")}
        assert {n for n, node in after_first.items() if node} == done
        assert all(after_first[n] == report[n]["node"] for n in done)

        real = str(control_plane.admin_kubeconfig)
        second = cli("bind", "--kubeconfig", real, "--yes", "-n", namespace, "-o", "json", *SOLVER_ARGS)

        assert_exit(second, 0)
        rerun = bind_report(second)
        assert set(rerun) == set(names) - done  # bound pods are no longer pending: never tried twice
        assert {row["outcome"] for row in rerun.values()} == {"bound"}
        final = pod_nodes(core, namespace)
        assert all(final[n] == after_first[n] for n in done)
        assert all(final[n] == rerun[n]["node"] for n in rerun)
        assert all(final.values())
