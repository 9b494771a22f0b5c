"""The chart's objects, rendered with default and non-default values, are accepted by the real API
server: server-side apply with dryRun=All (validation, defaulting and admission, nothing persisted)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from tests.install.helm import CUSTOM_VALUES, locate_helm, render

from . import controlplane as cp

pytestmark = [pytest.mark.e2e, pytest.mark.helm, pytest.mark.timeout(120)]

SERVICE_MONITOR_CRD = {  # the prometheus-operator's CRD, reduced to what the API server needs to accept objects
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                  "singular": "servicemonitor"},
        "scope": "Namespaced",
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


@pytest.fixture(scope="module")
def service_monitor_crd(admin_api: client.ApiClient) -> Iterator[None]:
    extensions = client.ApiextensionsV1Api(admin_api)
    extensions.create_custom_resource_definition(SERVICE_MONITOR_CRD)
    try:
        cp.wait_for(lambda: _discovered(admin_api, "monitoring.coreos.com/v1", "ServiceMonitor"), 30,
                    "the ServiceMonitor CRD served")
        yield
    finally:
        with contextlib.suppress(ApiException):
            extensions.delete_custom_resource_definition(SERVICE_MONITOR_CRD["metadata"]["name"])


def _discovered(api: client.ApiClient, api_version: str, kind: str) -> bool:
    try:
        DynamicClient(api).resources.get(api_version=api_version, kind=kind)
    except ResourceNotFoundError:
        return False
    return True


def _dry_run_apply(api: client.ApiClient, objects: list[dict[str, Any]]) -> list[str]:
    dynamic = DynamicClient(api)
    accepted = []
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        meta = obj["metadata"]
        answer = resource.server_side_apply(body=obj, name=meta["name"], namespace=meta.get("namespace"),
                                            field_manager="kubeplace-chart-e2e", dry_run="All")
        assert answer.metadata.name == meta["name"]
        accepted.append(f"{obj['kind']}/{meta['name']}")
    return accepted


@pytest.mark.parametrize("values", ["default", "custom"])
def test_the_rendered_chart_is_accepted_by_the_api_server(
    values: str, admin_api: client.ApiClient, namespace: str, service_monitor_crd: None
) -> None:
    helm = locate_helm()
    args = ["--values", str(CUSTOM_VALUES)] if values == "custom" else ["--set", "rebalance.enabled=true"]
    objects = render(helm, f"e2e-{values}", namespace, *args)
    accepted = _dry_run_apply(admin_api, objects)
    kinds = {a.split("/")[0] for a in accepted}
    assert {"Deployment", "CronJob", "ClusterRole", "Role", "ConfigMap", "Service"} <= kinds
    if values == "custom":
        assert {"ServiceMonitor", "Namespace", "MutatingWebhookConfiguration"} <= kinds
    # Nothing was persisted.
    with pytest.raises(ApiException) as missing:
        client.RbacAuthorizationV1Api(admin_api).read_cluster_role(f"e2e-{values}-kubeplace")
    assert missing.value.status == 404


def test_the_dry_run_refuses_what_the_server_would(admin_api: client.ApiClient, namespace: str) -> None:
    """The control: the same dry run refuses an unknown field and an invalid value."""
    objects = render(locate_helm(), "e2e-control", namespace)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    typo = {**deployment, "spec": {**deployment["spec"], "replicass": 2}}
    negative = {**deployment, "spec": {**deployment["spec"], "replicas": -1}}
    for broken, why in ((typo, ".spec.replicass: field not declared in schema"),
                        (negative, "spec.replicas: Invalid value: -1")):
        with pytest.raises(ApiException) as refused:
            _dry_run_apply(admin_api, [broken])
        assert why in refused.value.body
