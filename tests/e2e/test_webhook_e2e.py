"""The canary split on the real API server: `kubeplace webhook` (a subprocess, HTTPS with a
certificate from `kubeplace webhook-certs`) registered by a MutatingWebhookConfiguration with its
caBundle. 1,000 pods annotated 30% are split 30% +/- 3 points, no gang is split; with the webhook
stopped, pods are still admitted (failurePolicy Ignore), unchanged.

The namespace has a fixed name, so the hash of every pod's group, and with it the exact split, is
the same on every run (29.7% for these pods); a random name would make it a draw.
"""

from __future__ import annotations

import contextlib
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubeplace.cli.webhook import make_certs
from kubeplace.kube.canary import ANNOTATION

from . import controlplane as cp

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

NAMESPACE = "e2e-canary-split"
CONFIGURATION = "kubeplace-canary-e2e"
GANGS, GANG_SIZE, SINGLES = 100, 3, 700


def pod(name: str, share: str, gang: str = "") -> dict[str, Any]:
    labels = {"kubeplace.io/gang": gang} if gang else {}
    annotations = {ANNOTATION: share, **({"kubeplace.io/gang-min-member": str(GANG_SIZE)} if gang else {})}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/fake:1"}]}}


@pytest.fixture
def canary_namespace(admin_api: client.ApiClient) -> Iterator[str]:
    core = client.CoreV1Api(admin_api)
    cp.wait_for(lambda: not _exists(core), 120, f"namespace {NAMESPACE} gone from an earlier run")
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
    try:
        cp.wait_for(lambda: _has_default_account(core), 30, "ServiceAccount default")
        yield NAMESPACE
    finally:
        with contextlib.suppress(ApiException):
            core.delete_namespace(NAMESPACE)


def _exists(core: client.CoreV1Api) -> bool:
    try:
        core.read_namespace(NAMESPACE)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _has_default_account(core: client.CoreV1Api) -> bool:
    try:
        core.read_namespaced_service_account("default", NAMESPACE)
    except ApiException:
        return False
    return True


@contextlib.contextmanager
def webhook_process(control_plane: cp.ControlPlane, certs: Path, port: int) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "kubeplace.cli.main", "webhook", "--kubeconfig", str(control_plane.admin_kubeconfig),
         "--tls-cert-file", str(certs / "tls.crt"), "--tls-key-file", str(certs / "tls.key"), "--port", str(port),
         "--address", "127.0.0.1"], stderr=subprocess.PIPE, text=True)
    try:
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        cp.wait_for(lambda: cp.http_ok(f"https://127.0.0.1:{port}/readyz", context=context), 30, "webhook ready")
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


@contextlib.contextmanager
def registered(admin_api: client.ApiClient, port: int, ca_bundle: str) -> Iterator[None]:
    admission = client.AdmissionregistrationV1Api(admin_api)
    admission.create_mutating_webhook_configuration({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION},
        "webhooks": [{
            "name": "canary.kubeplace.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Ignore", "timeoutSeconds": 2,
            "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate", "caBundle": ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
        }]})
    try:
        yield
    finally:
        with contextlib.suppress(ApiException):
            admission.delete_mutating_webhook_configuration(CONFIGURATION)


def scheduler_of(core: client.CoreV1Api, name: str) -> str:
    return str(core.read_namespaced_pod(name, NAMESPACE).spec.scheduler_name)


def test_a_thousand_pods_split_thirty_percent_gangs_whole_and_pods_pass_without_the_webhook(
    control_plane: cp.ControlPlane, admin_api: client.ApiClient, canary_namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(admin_api)
    certs = tmp_path / "certs"
    bundle = make_certs(certs, "kubeplace-webhook", "kubeplace-system", hosts=("127.0.0.1",))
    port = cp.free_port()
    with webhook_process(control_plane, certs, port) as process, registered(admin_api, port, bundle):
        probe = 0

        def routed() -> bool:  # the API server picks the configuration up within a second or so
            nonlocal probe
            probe += 1
            core.create_namespaced_pod(NAMESPACE, pod(f"probe-{probe}", "100%"))
            return scheduler_of(core, f"probe-{probe}") == "kubeplace"

        cp.wait_for(routed, 30, "the webhook routing pods", interval=0.5)
        manifests = [pod(f"g{g:03d}-{m}", "30%", gang=f"g{g:03d}") for g in range(GANGS) for m in range(GANG_SIZE)]
        manifests += [pod(f"solo-{i:03d}", "30%") for i in range(SINGLES)]
        started = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda m: core.create_namespaced_pod(NAMESPACE, m), manifests))
        seconds = time.monotonic() - started
        pods = {p.metadata.name: p.spec.scheduler_name for p in core.list_namespaced_pod(NAMESPACE).items
                if not p.metadata.name.startswith("probe-")}
        assert len(pods) == GANGS * GANG_SIZE + SINGLES == 1000
        share = sum(s == "kubeplace" for s in pods.values()) / len(pods)
        sides = {g: {pods[f"g{g:03d}-{m}"] for m in range(GANG_SIZE)} for g in range(GANGS)}
        split_gangs = [g for g, s in sides.items() if len(s) != 1]
        trusted = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=5, context=trusted) as response:
            metrics = response.read().decode()
        print(f"\n1000 pods created in {seconds:.1f}s through the webhook: {share:.1%} to kubeplace, "
              f"{Counter(len(s) for s in sides.values())} sides per gang; {len(split_gangs)} gangs split")
        assert abs(share - 0.30) <= 0.03, share
        assert split_gangs == []
        assert Counter(pods.values()).keys() <= {"kubeplace", "default-scheduler"}
        assert 'kubeplace_webhook_pods_routed_total{scheduler="kubeplace",source="pod"}' in metrics

        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
        assert process.returncode == 0
        for i in range(20):
            core.create_namespaced_pod(NAMESPACE, pod(f"after-{i:02d}", "100%"))
        after = {scheduler_of(core, f"after-{i:02d}") for i in range(20)}
        assert after == {"default-scheduler"}  # admitted, unchanged: failurePolicy Ignore
