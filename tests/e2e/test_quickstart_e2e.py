"""docs/cluster.md's "Running in a cluster", on the e2e suite's real API server: ``helm install`` of the chart
from the repository, then ``kubectl kubeplace plan --report plan.html`` as the plugin executable
(and through kubectl itself where kubectl is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from tests.install.helm import CHART, locate_helm

from . import controlplane as cp
from .test_bind_e2e import create_pods, kwok_nodes, pod_manifest

pytestmark = [pytest.mark.e2e, pytest.mark.helm, pytest.mark.timeout(180)]

RELEASE = "quickstart"  # not "kubeplace": test_rbac_e2e applies deploy/rbac.yaml's cluster-wide names


def _plugin() -> list[str]:
    """The installed kubectl-kubeplace beside this interpreter, else the same entry point run by it."""
    installed = Path(sys.executable).parent / "kubectl-kubeplace"
    if installed.exists():
        return [str(installed)]
    return [sys.executable, "-c", "from kubeplace.cli.kubectl import kubectl_main; kubectl_main()"]


@pytest.fixture
def installed(control_plane: cp.ControlPlane, namespace: str) -> Iterator[Path]:
    """``helm install`` as docs/cluster.md says it (into the test's namespace), uninstalled afterwards."""
    helm = locate_helm()
    kubeconfig = control_plane.admin_kubeconfig
    run = [str(helm), "--kubeconfig", str(kubeconfig)]
    out = subprocess.run([*run, "install", RELEASE, str(CHART), "-n", namespace, "--create-namespace"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    try:
        yield kubeconfig
    finally:
        subprocess.run([*run, "uninstall", RELEASE, "-n", namespace], capture_output=True, timeout=120)


def test_helm_install_then_kubectl_kubeplace_plan(installed: Path, admin_api: client.ApiClient, namespace: str,
                                                  tmp_path: Path) -> None:
    core, apps = client.CoreV1Api(admin_api), client.AppsV1Api(admin_api)
    name = f"{RELEASE}-kubeplace"
    deployment = apps.read_namespaced_deployment(name, namespace)
    assert deployment.spec.replicas == 2
    assert client.RbacAuthorizationV1Api(admin_api).read_cluster_role_binding(name).subjects[0].name == name
    # The ReplicaSet controller creates both replicas: the pods pass admission as the chart writes them.
    cp.wait_for(lambda: len(core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/component="
                                                     "scheduler").items) == 2, 60, "the scheduler's two pods")
    with kwok_nodes(core, namespace, {"a": {"cpu": "4", "memory": "8Gi"}}) as nodes:
        create_pods(core, namespace, [pod_manifest("web-0", namespace, cpu="1")])
        env = {**os.environ, "KUBECONFIG": str(installed)}
        report = tmp_path / "plan.html"
        out = subprocess.run([*_plugin(), "plan", "-n", namespace, "--report", str(report), "--time-limit", "5"],
                             capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "web-0" in out.stdout and nodes[0] in out.stdout
        assert report.stat().st_size > 10_000 and "kubeplace plan" in report.read_text()
        kubectl, plugin = shutil.which("kubectl"), Path(sys.executable).parent / "kubectl-kubeplace"
        if kubectl is not None and plugin.exists():  # kubectl itself finds the installed plugin on PATH
            env["PATH"] = f"{plugin.parent}:{env['PATH']}"
            out = subprocess.run([kubectl, "kubeplace", "plan", "-n", namespace], capture_output=True, text=True,
                                 env=env, timeout=120)
            assert out.returncode == 0, out.stderr
            assert "web-0" in out.stdout
