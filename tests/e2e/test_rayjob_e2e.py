"""deploy/simulate-rayjob.yaml against KubeRay's own schema: with the RayJob and RayCluster CRDs of
the KubeRay operator (from its Go module, fetched through the Go module proxy) installed on the
real kube-apiserver, the manifest is stored as it is written, with strict field validation, so a
misspelt or misplaced field in it fails here rather than on a user's cluster."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import controlplane as cp
from .crds import install_crds

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

# The KubeRay release whose CRDs the manifest is checked against (ray.io/v1).
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator@v1.5.0"
MANIFEST = cp.REPO_ROOT / "deploy" / "simulate-rayjob.yaml"
CRD_FILES = ("ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml")


@pytest.fixture(scope="module")
def kuberay_crds(admin_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """KubeRay's RayCluster and RayJob CRDs, installed and established (removed afterwards)."""
    go = shutil.which(os.environ.get("GO", "go"))
    if go is None:
        pytest.skip("Go is not on PATH: KubeRay's CRDs come from its Go module")
    download = subprocess.run([go, "mod", "download", "-json", KUBERAY_MODULE], capture_output=True, text=True,
                              timeout=300, check=False, cwd=tmp_path_factory.mktemp("kuberay"))
    if download.returncode != 0:
        pytest.fail(f"go mod download {KUBERAY_MODULE} failed: {download.stderr.strip()[-1000:]}", pytrace=False)
    bases = Path(json.loads(download.stdout)["Dir"]) / "config" / "crd" / "bases"
    names = install_crds(admin_api, [yaml.safe_load((bases / file).read_text()) for file in CRD_FILES])
    yield
    for name in names:
        client.ApiextensionsV1Api(admin_api).delete_custom_resource_definition(name)


def _manifest(namespace: str) -> dict[str, dict[str, Any]]:
    documents = {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text())}
    for document in documents.values():
        document["metadata"]["namespace"] = namespace
    return documents


def _create_rayjob(api: client.ApiClient, namespace: str, job: dict[str, Any]) -> dict[str, Any]:
    stored: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "ray.io", "v1", namespace, "rayjobs", job, field_validation="Strict")
    return stored


def test_the_rayjob_manifest_is_stored_as_written_by_kuberays_schema(
        admin_api: client.ApiClient, kuberay_crds: None, namespace: str) -> None:
    documents = _manifest(namespace)
    client.CoreV1Api(admin_api).create_namespaced_config_map(namespace, documents["ConfigMap"])
    job = documents["RayJob"]
    stored = _create_rayjob(admin_api, namespace, job)
    # Nothing pruned: every field the manifest sets is one KubeRay's schema knows.
    assert stored["spec"]["entrypoint"] == job["spec"]["entrypoint"]
    assert _without_defaults(stored["spec"], job["spec"]) == job["spec"]


def test_a_misspelt_field_is_refused_so_the_check_above_means_something(
        admin_api: client.ApiClient, kuberay_crds: None, namespace: str) -> None:
    job = copy.deepcopy(_manifest(namespace)["RayJob"])
    job["spec"]["shutdownAfterJobFinish"] = job["spec"].pop("shutdownAfterJobFinishes")
    with pytest.raises(ApiException) as refused:
        _create_rayjob(admin_api, namespace, job)
    assert refused.value.status == 400
    assert "shutdownAfterJobFinish" in str(refused.value.body)


def _without_defaults(stored: Any, written: Any) -> Any:
    """The stored object cut down to the keys the written one has (the API server may add defaults)."""
    if isinstance(stored, dict) and isinstance(written, dict):
        return {key: _without_defaults(stored[key], value) for key, value in written.items() if key in stored}
    if isinstance(stored, list) and isinstance(written, list) and len(stored) == len(written):
        return [_without_defaults(s, w) for s, w in zip(stored, written, strict=True)]
    return stored
