"""A tiny stand-in for the Kubernetes API server, enough to exercise ``kube.client``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class FakeApiServer:
    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], namespaces: list[dict[str, Any]],
                 budgets: list[dict[str, Any]] | None = None):
        self.nodes = nodes
        self.pods = pods
        self.namespaces = namespaces
        self.requests: list[tuple[str, str, dict[str, list[str]], Any]] = []
        self.bind_answers: dict[str, tuple[int, dict[str, Any]]] = {}
        self.page_size = 2
        self.lists: dict[str, tuple[str, str, list[dict[str, Any]]]] = {
            "/api/v1/persistentvolumeclaims": ("PersistentVolumeClaimList", "v1", []),
            "/api/v1/persistentvolumes": ("PersistentVolumeList", "v1", []),
            "/apis/policy/v1/poddisruptionbudgets": ("PodDisruptionBudgetList", "policy/v1", budgets or []),
            "/api/v1/services": ("ServiceList", "v1", []),
            "/api/v1/replicationcontrollers": ("ReplicationControllerList", "v1", []),
        }
        """Other list paths the server answers: path -> (list kind, apiVersion, items)."""
        self.objects: dict[str, dict[str, Any]] = {}
        """Objects the server reads (GET) and updates (PUT, resourceVersion precondition) by path."""

    def answer(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        self.requests.append((method, path, query, body))
        if method == "POST" and path.endswith("/binding"):
            name = path.split("/")[-2]
            return self.bind_answers.get(name, (201, {"kind": "Status", "status": "Success", "code": 201}))
        if path in self.objects and method in ("GET", "PUT"):
            return self._object(method, path, query, body)
        listed = {
            "/api/v1/nodes": ("NodeList", self.nodes),
            "/api/v1/pods": ("PodList", self.pods),
            "/api/v1/namespaces": ("NamespaceList", self.namespaces),
        }
        if path in listed:
            kind, items = listed[path]
            return 200, self._page(kind, items, query)
        if path in self.lists:
            kind, version, items = self.lists[path]
            return 200, self._page(kind, items, query, version)
        return 404, status(404, "NotFound", f"the server could not find the requested resource ({path})")

    def _object(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        stored = self.objects[path]
        if method == "GET":
            return 200, stored
        if body["metadata"].get("resourceVersion") != stored["metadata"].get("resourceVersion"):
            name = stored["metadata"]["name"]
            message = f'Operation cannot be fulfilled on "{name}": the object has been modified'
            return 409, status(409, "Conflict", message)
        if "dryRun" in query:  # the API server answers a dry run with the stored resourceVersion
            return 200, body
        updated = {**body, "metadata": {**body["metadata"],
                                        "resourceVersion": str(int(stored["metadata"]["resourceVersion"]) + 1)}}
        self.objects[path] = updated
        return 200, updated

    def _page(self, kind: str, items: list[dict[str, Any]], query: dict[str, list[str]],
              api_version: str = "v1") -> dict[str, Any]:
        """Pages of ``page_size`` items, items without kind/apiVersion, as the API sends them."""
        start = int(query.get("continue", ["0"])[0])
        end = start + self.page_size
        page_items = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")} for item in items[start:end]]
        metadata = {"resourceVersion": "7"}
        if end < len(items):
            metadata["continue"] = str(end)
        return {"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": page_items}


@contextmanager
def serving(api: FakeApiServer) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            code, answer = api.answer(self.command, url.path, parse_qs(url.query), body)
            data = json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = _handle
        do_POST = _handle
        do_PUT = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
