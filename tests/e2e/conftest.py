"""Fixtures that run the e2e tests against a real, local Kubernetes control plane.

The binaries are built (or found in the cache) once per session, right after
collection and only if an `e2e` test was selected: a cold build takes 10-25
minutes and must not count against the first test's pytest-timeout.
Without Go the e2e tests skip, except on CI (CI=true) where they fail.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import controlplane as cp

_BIN_DIR_KEY = pytest.StashKey[Path | cp.ControlPlaneError]()
_E2E_MARKER = "e2e: needs the real control plane that the test suite builds and starts"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _E2E_MARKER)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the control plane before any test runs, so the build is outside every test's timeout."""
    if session.config.option.collectonly or not any(item.get_closest_marker("e2e") for item in session.items):
        return
    _say(session, "locating the control plane binaries (a cold build takes 10-25 min)")
    started = time.monotonic()
    try:
        result: Path | cp.ControlPlaneError = cp.locate_binaries()
    except cp.ControlPlaneError as exc:
        result = exc
    session.config.stash[_BIN_DIR_KEY] = result
    _say(session, f"control plane binaries: {result} ({time.monotonic() - started:.0f}s)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (or fail) e2e tests before their fixtures run.

    Skipping here rather than in the fixture makes `-ra` fold every such skip into one line.
    """
    if item.get_closest_marker("e2e"):
        _bin_dir(item.config)


def _say(session: pytest.Session, message: str) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"kubeplace e2e: {message}")


def _on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def _bin_dir(config: pytest.Config) -> Path:
    """The located bin dir; skips (or fails on CI) when the control plane can't be had here."""
    result = config.stash.get(_BIN_DIR_KEY, None)
    if result is None:
        try:
            result = cp.locate_binaries()
        except cp.ControlPlaneError as exc:
            result = exc
        config.stash[_BIN_DIR_KEY] = result
    if isinstance(result, cp.ControlPlaneUnavailable):
        if _on_ci():
            pytest.fail(f"CI=true and the e2e control plane is unavailable: {result}", pytrace=False)
        pytest.skip(f"e2e control plane unavailable: {result}")
    if isinstance(result, cp.ControlPlaneError):
        pytest.fail(f"e2e control plane build failed: {result}", pytrace=False)
    return result


@pytest.fixture(scope="session")
def control_plane(pytestconfig: pytest.Config) -> Iterator[cp.ControlPlane]:
    """etcd + kube-apiserver + kube-controller-manager + kwok on 127.0.0.1, for the whole session."""
    bin_dir = _bin_dir(pytestconfig)
    with contextlib.ExitStack() as stack:
        try:
            plane = stack.enter_context(cp.running_control_plane(bin_dir))
        except cp.ControlPlaneError as exc:
            error = str(exc)
        else:
            yield plane
            return
    # Outside the except block, so the report shows the message without a chained traceback.
    pytest.fail(f"e2e control plane failed to start: {error}", pytrace=False)


@pytest.fixture(scope="session")
def admin_api(control_plane: cp.ControlPlane) -> Iterator[client.ApiClient]:
    """An API client with cluster-admin rights (group system:masters)."""
    api = cp.api_client(control_plane.admin_kubeconfig)
    yield api
    api.close()  # type: ignore[no-untyped-call]


@pytest.fixture(scope="session")
def kubeplace_api(control_plane: cp.ControlPlane) -> Iterator[client.ApiClient]:
    """An API client authenticated as kubeplace, with no RBAC granted unless a test grants it."""
    api = cp.api_client(control_plane.kubeplace_kubeconfig)
    yield api
    api.close()  # type: ignore[no-untyped-call]


@pytest.fixture
def namespace(admin_api: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards.

    Waits for its `default` ServiceAccount so that pods can be created right away
    (the ServiceAccount admission plugin rejects pods until the controller made it).
    """
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"e2e-{slug}-{secrets.token_hex(3)}"
    core = client.CoreV1Api(admin_api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        cp.wait_for(lambda: _has_service_account(core, name), 30, f"ServiceAccount default in {name}")
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _has_service_account(core: client.CoreV1Api, namespace: str) -> bool:
    try:
        core.read_namespaced_service_account("default", namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
