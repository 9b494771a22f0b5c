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
"""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from kubeplace.kube.canary import ShareError, Split

log = logging.getLogger("kubeplace.webhook")
MUTATE_PATH = "/mutate"
NAMESPACE_TTL = 10.0
"""Seconds a namespace's annotations are cached."""
MAX_BODY = 8 << 20
"""The largest AdmissionReview read (the API server's own limit on an object is 3 MiB)."""

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
    counts as no annotations (and is retried at the next request)."""

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
            self._cache[name] = (now, found)
        return found


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
        except Exception:  # never crash and never block: admit unchanged
            self.metrics.errors.inc()
            log.exception("review failed; pod admitted unchanged", extra={"fields": {"uid": uid}})
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


class WebhookServer:
    """The HTTPS server around a :class:`Webhook`."""

    def __init__(self, webhook: Webhook, cert: Path, key: Path, port: int, address: str = "0.0.0.0",
                 reload_seconds: float = 30.0) -> None:
        self.webhook = webhook
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.certs = CertReloader(context, cert, key)
        self.httpd = ThreadingHTTPServer((address, port), _handler(webhook))
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.stop_event = threading.Event()
        self.reload_seconds = reload_seconds

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

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


def _handler(webhook: Webhook) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
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
                self._send(404, b"not found", "text/plain")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(min(length, MAX_BODY))) if 0 < length <= MAX_BODY else None
            except (ValueError, OSError):
                body = None
            if body is None:
                self._send(400, b'{"error": "expected an AdmissionReview"}')
                return
            answer = webhook.review(body)
            self._send(200, json.dumps(answer).encode())
            webhook.metrics.seconds.observe(time.monotonic() - started)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format % args)

    return Handler
