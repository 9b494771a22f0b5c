"""Opens a local HTML file in a real headless Chromium (Debian's package) through the DevTools
protocol: load time, console errors, requests that left the file, what the page shows, and a
full-page screenshot.

Chromium runs with a fresh profile and every background connection off (the machine's network is
closed); the DevTools endpoint listens on 127.0.0.1 only, on a port Chromium picks.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import websocket

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank")
WIDTH = 1200


def chromium() -> str:
    """The chromium binary; skips in one line where it is not installed (fails on CI, CI=true,
    whose .ci/run installs it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and chromium is not installed (.ci/run installs it with apt-get)", pytrace=False)
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


@dataclass
class Page:
    load_seconds: float
    """Navigation start to the end of the load event, as the page's own timing reports it."""
    wall_seconds: float
    """From sending the navigation to the load event, as seen from here."""
    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions and error log entries."""
    requests: list[str] = field(default_factory=list)
    """Every URL the page requested."""
    facts: dict[str, Any] = field(default_factory=dict)


class DevTools:
    def __init__(self, url: str) -> None:
        self.socket = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self.ids)
        self.socket.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def wait_for(self, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if any(e.get("method") == method for e in self.events):
            return
        while time.monotonic() < deadline:
            message = json.loads(self.socket.recv())
            self.events.append(message)
            if message.get("method") == method:
                return
        raise TimeoutError(method)

    def evaluate(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return answer["result"].get("value")


def _endpoint(profile: Path, process: subprocess.Popen[bytes]) -> int:
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return int(port_file.read_text().split()[0])
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode}")
        time.sleep(0.05)
    raise TimeoutError("chromium did not open its DevTools port")


def open_page(html: Path, screenshot: Path, facts: dict[str, str]) -> Page:
    """Loads ``html``, evaluates each of ``facts`` (name: JavaScript expression) once loaded, and
    saves a full-page PNG screenshot."""
    with tempfile.TemporaryDirectory(prefix="kubeplace-chromium-", ignore_cleanup_errors=True) as profile_dir:
        profile = Path(profile_dir)
        process = subprocess.Popen([chromium(), f"--user-data-dir={profile}", *FLAGS],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = _endpoint(profile, process)
            request = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
            with urllib.request.urlopen(request, timeout=30) as answer:
                target = json.load(answer)
            tools = DevTools(target["webSocketDebuggerUrl"])
            try:
                return _load(tools, html, screenshot, facts)
            finally:
                tools.socket.close()
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _load(tools: DevTools, html: Path, screenshot: Path, facts: dict[str, str]) -> Page:
    for domain in ("Page", "Runtime", "Log", "Network"):
        tools.call(f"{domain}.enable")
    tools.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False)
    tools.events.clear()
    started = time.monotonic()
    tools.call("Page.navigate", url=html.resolve().as_uri())
    tools.wait_for("Page.loadEventFired", timeout=60)
    wall = time.monotonic() - started
    timing = tools.evaluate("JSON.stringify(performance.getEntriesByType('navigation')[0].toJSON())")
    page = Page(json.loads(timing)["loadEventEnd"] / 1000, wall)
    page.facts = {name: tools.evaluate(expression) for name, expression in facts.items()}
    height = int(tools.evaluate("document.documentElement.scrollHeight"))
    tools.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=min(height, 16000), deviceScaleFactor=1,
               mobile=False)
    shot = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    for event in tools.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            page.errors.append(f"console.{params['type']}: {params.get('args')}")
        elif method == "Runtime.exceptionThrown":
            page.errors.append(f"exception: {params.get('exceptionDetails')}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            page.errors.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.requestWillBeSent":
            page.requests.append(params["request"]["url"])
    return page
