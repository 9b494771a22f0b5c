"""``kubeplace webhook``: a mutating admission webhook that splits new pods between two schedulers.

The API server sends an ``admission.k8s.io/v1`` AdmissionReview for every pod CREATE; the answer
sets ``spec.schedulerName`` by a JSONPatch as :class:`kube.canary.Split` decides. Only pods
addressed to the old scheduler (the API server defaults an empty name to ``default-scheduler``)
are routed: a pod that names another scheduler, or already has a node, is left as it is.

It must never block the cluster: it is registered with ``failurePolicy: Ignore`` and a short
timeout (``deploy/webhook.yaml``); a namespace whose annotations cannot be read in time counts as
unannotated; any unexpected error admits the pod unchanged (logged, counted). A malformed share is
refused with the reason (or, with ``--on-malformed ignore``, skipped for the next source).

HTTPS only (``ssl`` over ``http.server``), with the certificate and key reloaded when their files
change (a rotated Secret is picked up without a restart). ``/readyz`` and ``/healthz`` answer 200
once serving; ``/metrics`` has the pods routed per scheduler.

One client cannot freeze it (:class:`ConnectionLimits`): the accepting thread only accepts; each
connection gets a thread that does its own TLS handshake within a deadline, then reads with a
timeout (an idle or stalled connection is closed); beyond a cap on open connections a new one is
closed at once. A body over the size limit gets 413, one that is not JSON or nested too deep 400,
one that does not arrive in time 408.
Every log line is one JSON object: a dropped connection is one line saying why, never a traceback.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from kubeplace.kube.canary import ShareError, Split

log = logging.getLogger("kubeplace.webhook")
MUTATE_PATH = "/mutate"
NAMESPACE_TTL = 10.0
"""Seconds a namespace's annotations are cached."""
MAX_BODY = 8 << 20
"""The largest AdmissionReview read (the API server's own limit on an object is 3 MiB)."""
MAX_JSON_DEPTH = 100
"""The deepest nesting of arrays and objects read in a body: a pod is about 15 deep; far deeper
is not a pod and would exhaust the parser's recursion."""

NamespaceReader = Callable[[str], Mapping[str, str]]


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.routed = Counter("kubeplace_webhook_pods_routed", "Pods given a scheduler, by scheduler and by where "
                              "the share came from.", ["scheduler", "source"], registry=r)
        self.refused = Counter("kubeplace_webhook_pods_refused", "Pods refused for a malformed share.", registry=r)
        self.skipped = Counter("kubeplace_webhook_pods_skipped", "Pods left as they are, by why.", ["why"],
                               registry=r)
        self.errors = Counter("kubeplace_webhook_errors", "Reviews that failed and admitted the pod unchanged.",
                              registry=r)
        self.seconds = Histogram("kubeplace_webhook_review_seconds", "Time to answer one review.",
                                 buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2), registry=r)

    def text(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        found = self.registry.get_sample_value(name, labels or {})
        return 0.0 if found is None else float(found)


@dataclass
class NamespaceCache:
    """Namespace annotations read through ``reader``, each kept ``ttl`` seconds; a failed read
    counts as no annotations (and is retried at the next request). Entries older than ``ttl`` are
    dropped at each read, so the cache holds the namespaces of the last ``ttl`` seconds, not
    every namespace ever created (and deleted) in the cluster's life."""

    reader: NamespaceReader
    ttl: float = NAMESPACE_TTL
    clock: Callable[[], float] = time.monotonic
    _cache: dict[str, tuple[float, Mapping[str, str]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def annotations(self, name: str) -> Mapping[str, str]:
        now = self.clock()
        with self._lock:
            hit = self._cache.get(name)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        try:
            found = dict(self.reader(name))
        except Exception as error:  # the API server may be slow or down: the pod must still pass
            log.warning("namespace annotations unreadable", extra={"fields": {"namespace": name, "why": str(error)}})
            return {}
        with self._lock:
            self._cache.pop(name, None)
            self._cache[name] = (now, found)  # (at the end: the dict stays in time order)
            while self._cache:
                oldest = next(iter(self._cache))
                if now - self._cache[oldest][0] < self.ttl:
                    break
                del self._cache[oldest]
        return found

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)


def _answer(uid: str, allowed: bool, patch: list[dict[str, Any]] | None = None, message: str = "") -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if message:
        response["status"] = {"code": 400 if not allowed else 200, "message": message}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


@dataclass
class Webhook:
    split: Split
    namespaces: NamespaceCache
    metrics: WebhookMetrics = field(default_factory=WebhookMetrics)

    def review(self, body: Any) -> dict[str, Any]:
        """The AdmissionReview answer to ``body`` (parsed JSON); never raises."""
        request = body.get("request") if isinstance(body, dict) else None
        uid = str(request.get("uid", "")) if isinstance(request, dict) else ""
        try:
            assert isinstance(request, dict)
            return self._review(uid, request)
        except Exception as error:  # never crash and never block: admit unchanged
            self.metrics.errors.inc()
            log.error("review failed; pod admitted unchanged", extra={"fields": {"uid": uid, "why": _why(error)}})
            return _answer(uid, True)

    def _review(self, uid: str, request: dict[str, Any]) -> dict[str, Any]:
        pod = request.get("object")
        resource = request.get("resource") or {}
        if (request.get("operation") != "CREATE" or resource.get("resource") != "pods" or request.get("subResource")
                or not isinstance(pod, dict)):
            return self._skip(uid, "not a pod creation")
        meta: dict[str, Any] = pod["metadata"] if isinstance(pod.get("metadata"), dict) else {}
        spec: dict[str, Any] = pod["spec"] if isinstance(pod.get("spec"), dict) else {}
        namespace = str(request.get("namespace") or meta.get("namespace") or "default")
        current = spec.get("schedulerName") or self.split.old_scheduler
        if spec.get("nodeName"):
            return self._skip(uid, "already bound")
        if current != self.split.old_scheduler:
            return self._skip(uid, "names another scheduler")
        try:
            decision = self.split.decide(pod, namespace, self.namespaces.annotations(namespace))
        except ShareError as error:
            self.metrics.refused.inc()
            name = meta.get("name") or meta.get("generateName") or "?"
            log.info("refused", extra={"fields": {"pod": f"{namespace}/{name}", "why": str(error)}})
            return _answer(uid, False, message=str(error))
        self.metrics.routed.labels(decision.scheduler, decision.source).inc()
        if decision.scheduler == current and "schedulerName" in spec:
            return _answer(uid, True)
        op = "replace" if "schedulerName" in spec else "add"
        return _answer(uid, True, [{"op": op, "path": "/spec/schedulerName", "value": decision.scheduler}])

    def _skip(self, uid: str, why: str) -> dict[str, Any]:
        self.metrics.skipped.labels(why).inc()
        return _answer(uid, True)


class CertReloader:
    """Keeps ``context`` serving the current certificate: reloads it when the files change."""

    def __init__(self, context: ssl.SSLContext, cert: Path, key: Path) -> None:
        self.context, self.cert, self.key = context, cert, key
        self.loaded: tuple[float, float] = (-1.0, -1.0)
        self.reload()

    def stamp(self) -> tuple[float, float]:
        return os.stat(self.cert).st_mtime, os.stat(self.key).st_mtime

    def reload(self) -> bool:
        """Loads the pair if it changed; False (keeping the old one) if the new pair is unusable."""
        try:
            stamp = self.stamp()
            if stamp == self.loaded:
                return False
            self.context.load_cert_chain(str(self.cert), str(self.key))
        except (OSError, ssl.SSLError) as error:
            if self.loaded == (-1.0, -1.0):
                raise
            log.warning("certificate not reloaded", extra={"fields": {"why": str(error)}})
            return False
        self.loaded = stamp
        log.info("certificate loaded", extra={"fields": {"cert": str(self.cert)}})
        return True


@dataclass(frozen=True)
class ConnectionLimits:
    """What one client may hold of the server. The API server calls a webhook with a timeout of
    at most 30 s (10 s by default) and reuses its connections; these bound the rest."""

    handshake_seconds: float = 5.0
    """A TLS handshake not finished by then drops the connection."""
    read_seconds: float = 10.0
    """A connection silent this long (idle between requests, or stalled in one) is closed; a
    request body must arrive within this time in all."""
    max_connections: int = 64
    """Connections open at once (handshaking or served); one more is closed at once."""
    max_body: int = MAX_BODY
    max_depth: int = MAX_JSON_DEPTH


def _why(error: BaseException | None) -> str:
    return f"{type(error).__name__}: {error}" if error is not None else "unknown"


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""An opening bracket steps one level in (+1), a closing one out (-1 as a signed byte)."""
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[{]}")


def json_depth(data: bytes) -> int:
    """How deeply arrays and objects nest in the JSON text ``data`` (brackets inside strings do
    not count), without recursion, in a few passes in C over the text."""
    steps = _JSON_STRING.sub(b"", data).translate(_BRACKET_STEPS, _NOT_BRACKETS)
    if not steps:
        return 0
    return int(np.frombuffer(steps, dtype=np.int8).astype(np.int32).cumsum().max())


class _TLSServer(ThreadingHTTPServer):
    """Accepts on plain TCP and hands each connection to a thread of its own, which does the TLS
    handshake itself (``do_handshake_on_connect=False``) within the limits."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], context: ssl.SSLContext,
                 limits: ConnectionLimits) -> None:
        super().__init__(address, handler)
        self.context, self.limits = context, limits
        self.open: set[socket.socket] = set()
        self.open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.open_lock:
            full = len(self.open) >= self.limits.max_connections
            if not full:
                self.open.add(request)
        if full:
            log.warning("connection refused: too many open", extra={"fields": {
                "client": _client(client_address), "maxConnections": self.limits.max_connections}})
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started (socketserver closes the request): free its place
            with self.open_lock:
                self.open.discard(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.open_lock:
                self.open.discard(request)

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(self.limits.handshake_seconds)
        with self.context.wrap_socket(request, server_side=True, do_handshake_on_connect=False) as tls:
            with self.open_lock:  # the TLS socket now owns the connection: close that one on shutdown
                self.open.discard(request)
                self.open.add(tls)
            try:
                tls.do_handshake()
                tls.settimeout(self.limits.read_seconds)
                super().finish_request(tls, client_address)
                _linger(tls)
            finally:
                with self.open_lock:
                    self.open.discard(tls)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line for a connection that failed (handshake, timeout, reset), not the
        traceback socketserver would print on stderr."""
        error = sys.exc_info()[1]
        log.info("connection dropped", extra={"fields": {"client": _client(client_address), "why": _why(error)}})

    def close_open(self) -> None:
        """Ends every open connection (their threads then finish)."""
        with self.open_lock:
            connections = list(self.open)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by its thread
                connection.shutdown(socket.SHUT_RDWR)


LINGER_SECONDS = 0.5
"""How long a closing connection's unread input is drained (as Go's net/http does)."""


def _linger(connection: socket.socket) -> None:
    """Closes the sending side, then reads what the client still sends for a moment: closing a
    socket with unread input (the rest of a refused body) resets the connection, and the client
    may lose the answer already sent."""
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + LINGER_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            connection.settimeout(left)
            if not connection.recv(1 << 16):
                break


def _client(address: Any) -> str:
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) and len(address) >= 2 else str(address)


class WebhookServer:
    """The HTTPS server around a :class:`Webhook`."""

    def __init__(self, webhook: Webhook, cert: Path, key: Path, port: int, address: str = "0.0.0.0",
                 reload_seconds: float = 30.0, limits: ConnectionLimits | None = None) -> None:
        self.webhook = webhook
        self.limits = limits or ConnectionLimits()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.certs = CertReloader(context, cert, key)
        self.httpd = _TLSServer((address, port), _handler(webhook, self.limits), context, self.limits)
        self.stop_event = threading.Event()
        self.reload_seconds = reload_seconds

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def open_connections(self) -> int:
        with self.httpd.open_lock:
            return len(self.httpd.open)

    def start(self) -> None:
        """Serves from daemon threads until :meth:`shutdown`; reloads the certificate every
        ``reload_seconds``."""
        threading.Thread(target=self._reload_loop, daemon=True).start()
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()

    def _reload_loop(self) -> None:
        while not self.stop_event.wait(self.reload_seconds):
            self.certs.reload()

    def shutdown(self) -> None:
        self.stop_event.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.httpd.close_open()


class BadBody(ValueError):
    """A request body that is not an AdmissionReview to read: ``code`` is the HTTP answer."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


def _handler(webhook: Webhook, limits: ConnectionLimits) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path in ("/readyz", "/healthz"):
                self._send(200, b"ok", "text/plain")
            elif self.path == "/metrics":
                self._send(200, webhook.metrics.text(), "text/plain; version=0.0.4")
            else:
                self._send(404, b"not found", "text/plain")

        def do_POST(self) -> None:
            started = time.monotonic()
            if self.path.split("?")[0] != MUTATE_PATH:
                self.close_connection = True  # its body was not read
                self._send(404, b"not found", "text/plain")
                return
            try:
                body = json.loads(self._body())
            except BadBody as error:
                self._refuse(error.code, str(error))
                return
            except TimeoutError as error:
                self.close_connection = True
                self._refuse(408, f"request body not received in time ({_why(error)})")
                return
            except (ValueError, RecursionError) as error:
                self._refuse(400, f"not JSON: {_why(error)}")
                return
            answer = webhook.review(body)
            self._send(200, json.dumps(answer).encode())
            webhook.metrics.seconds.observe(time.monotonic() - started)

        def _body(self) -> bytes:
            """The request's body, read within ``limits.read_seconds`` in all; BadBody when it
            cannot be an AdmissionReview (the connection is then closed: its rest is unread)."""
            raw = self.headers.get("Content-Length")
            if self.headers.get("Transfer-Encoding") or raw is None or not raw.isascii() or not raw.isdigit():
                self.close_connection = True
                raise BadBody(400, "expected an AdmissionReview with a Content-Length")
            length = int(raw)
            if length > limits.max_body:
                self.close_connection = True
                raise BadBody(413, f"a body of {length} bytes is over the limit of {limits.max_body}")
            data = self._read(length)
            if json_depth(data) > limits.max_depth:
                raise BadBody(400, f"JSON nested deeper than {limits.max_depth} levels")
            return data

        def _read(self, length: int) -> bytes:
            deadline = time.monotonic() + limits.read_seconds
            chunks: list[bytes] = []
            while length > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"request body not received within {limits.read_seconds:g}s")
                self.connection.settimeout(left)
                chunk = self.rfile.read1(min(length, 1 << 16))
                if not chunk:
                    raise ConnectionError("connection closed in the request body")
                chunks.append(chunk)
                length -= len(chunk)
            self.connection.settimeout(limits.read_seconds)
            return b"".join(chunks)

        def _refuse(self, code: int, why: str) -> None:
            log.info("request refused", extra={"fields": {"client": _client(self.client_address), "code": code,
                                                          "why": why}})
            self._send(code, json.dumps({"error": why}).encode())

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format % args, extra={"fields": {"client": _client(self.client_address)}})

    return Handler
