"""CustomResourceDefinitions of real peers (Karpenter, KubeRay) installed on the test control plane."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import controlplane as cp


def install_crds(admin_api: client.ApiClient, crds: list[dict[str, Any]]) -> list[str]:
    """Create the CRDs (an existing one is kept), wait until each is established, return their names."""
    extensions = client.ApiextensionsV1Api(admin_api)
    names = [crd["metadata"]["name"] for crd in crds]
    for crd in crds:
        try:
            extensions.create_custom_resource_definition(crd)
        except ApiException as exc:
            if exc.status != 409:
                raise
    cp.wait_for(lambda: all(_established(extensions, name) for name in names), 60, f"CRDs {names} established")
    return names


def _established(extensions: client.ApiextensionsV1Api, name: str) -> bool:
    status = extensions.read_custom_resource_definition(name).status
    conditions = status.conditions if status is not None else None
    return any(c.type == "Established" and c.status == "True" for c in (conditions or []))
