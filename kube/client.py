"""The only module that talks to the Kubernetes API.

:class:`Cluster` lists objects as plain camelCase dicts (the shape of ``kubectl get -o yaml``, so
files and the API go through the same parsing) and binds pods; ``kube.kubeconfig.connect`` opens
one with the credentials kubectl would use. API failures become the named :class:`ClusterError`
subclasses of ``kube.errors`` (``kube.api_errors``) carrying the HTTP status and the server's
message; nothing else leaks out.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubeplace.kube.api_errors import translated_errors
from kubeplace.kube.errors import ApiFailure, DisruptionBudget, Gone, NotFound

REQUEST_TIMEOUT = (10.0, 60.0)
"""Seconds to connect and to wait for an answer; a list of 10,000 pods takes a few seconds."""
PAGE_SIZE = 500
"""Objects per list request, as kubectl uses, so a huge list does not time out."""

RawObject = dict[str, Any]


class Cluster:
    """A small wrapper over one API server connection; see the module docstring."""

    def __init__(self, api_client: Any, description: str = "cluster") -> None:
        self.description = description
        self._core = k8s.CoreV1Api(api_client)
        self._custom = k8s.CustomObjectsApi(api_client)
        self._policy = k8s.PolicyV1Api(api_client)
        self._coordination = k8s.CoordinationV1Api(api_client)

    def list_nodes(self) -> list[RawObject]:
        return self._list("list nodes", "Node", self._core.list_node)

    def list_pods(
        self,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[RawObject]:
        """Pods of one namespace, or of all when ``namespace`` is None."""
        selectors = {"label_selector": label_selector, "field_selector": field_selector}
        if namespace is None:
            return self._list("list pods", "Pod", self._core.list_pod_for_all_namespaces, **selectors)
        return self._list(
            f"list pods in {namespace}", "Pod", self._core.list_namespaced_pod, namespace=namespace, **selectors
        )

    def list_namespaces(self) -> list[RawObject]:
        return self._list("list namespaces", "Namespace", self._core.list_namespace)

    def list_persistent_volume_claims(self) -> list[RawObject]:
        """PersistentVolumeClaims of every namespace."""
        return self._list("list persistentvolumeclaims", "PersistentVolumeClaim",
                          self._core.list_persistent_volume_claim_for_all_namespaces)

    def list_persistent_volumes(self) -> list[RawObject]:
        return self._list("list persistentvolumes", "PersistentVolume", self._core.list_persistent_volume)

    def list_objects(self, group: str, version: str, plural: str) -> list[RawObject]:
        """Objects of an API group's resource (a CRD's, or a built-in group's such as
        ``storage.k8s.io``) in every namespace; [] when the server does not serve it."""

        def list_page(**options: Any) -> Any:
            return self._custom.list_cluster_custom_object(group, version, plural, **options)

        try:
            return self._list(f"list {plural}.{group}", "", list_page)
        except NotFound:
            return []

    def create_object(self, group: str, version: str, plural: str, body: Mapping[str, Any]) -> RawObject:
        """Creates a cluster-scoped object of an API group's resource (a NodeClaim); the object
        as the server stored it (its generated name filled in)."""
        with translated_errors(f"create {plural}.{group}"):
            response: Any = self._custom.create_cluster_custom_object(
                group, version, plural, dict(body), _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            created: RawObject = json.loads(response.data)
        return created

    def annotate_node(self, name: str, annotations: Mapping[str, str | None]) -> None:
        """Sets (a value) or removes (None) annotations of a node by a merge patch."""
        with translated_errors(f"annotate node {name}"):
            response: Any = self._core.patch_node(name, {"metadata": {"annotations": dict(annotations)}},
                                                  _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            response.read()

    def list_metrics(self, plural: str) -> list[RawObject]:
        """NodeMetrics (``nodes``) or PodMetrics (``pods``) of ``metrics.k8s.io/v1beta1``, as
        ``kubectl get --raw`` lists them; :class:`NotFound` when the API is not registered,
        :class:`ApiFailure` (503) when it is but its server does not answer."""

        def list_page(**options: Any) -> Any:
            return self._custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", plural, **options)

        return self._list(f"list {plural}.metrics.k8s.io", "", list_page)

    def list_controllers(self) -> list[RawObject]:
        """Services and ReplicationControllers (core v1), ReplicaSets and StatefulSets (apps/v1) of
        every namespace: what the default topology spread constraints select pods by."""
        found = self._list("list services", "Service", self._core.list_service_for_all_namespaces)
        found += self._list("list replicationcontrollers", "ReplicationController",
                            self._core.list_replication_controller_for_all_namespaces)
        return found + self.list_objects("apps", "v1", "replicasets") + self.list_objects("apps", "v1", "statefulsets")

    def list_pod_disruption_budgets(self) -> list[RawObject]:
        """PodDisruptionBudgets (policy/v1) of every namespace, with their status."""
        return self._list("list poddisruptionbudgets", "PodDisruptionBudget",
                          self._policy.list_pod_disruption_budget_for_all_namespaces)

    def read_pod(self, namespace: str, name: str) -> RawObject:
        """One pod as a camelCase dict; :class:`NotFound` when it is gone."""
        with translated_errors(f"read pod {namespace}/{name}"):
            response: Any = self._core.read_namespaced_pod(name, namespace, _preload_content=False,
                                                           _request_timeout=REQUEST_TIMEOUT)
            pod: RawObject = json.loads(response.data)
        return {"apiVersion": "v1", "kind": "Pod", **pod}

    def read_persistent_volume(self, name: str) -> RawObject:
        """A PersistentVolume as a camelCase dict; :class:`NotFound` when it does not exist."""
        with translated_errors(f"read persistentvolume {name}"):
            response: Any = self._core.read_persistent_volume(name, _preload_content=False,
                                                              _request_timeout=REQUEST_TIMEOUT)
            volume: RawObject = json.loads(response.data)
        return {"apiVersion": "v1", "kind": "PersistentVolume", **volume}

    def read_persistent_volume_claim(self, namespace: str, name: str) -> RawObject:
        """A PersistentVolumeClaim as a camelCase dict; :class:`NotFound` when it does not exist."""
        with translated_errors(f"read persistentvolumeclaim {namespace}/{name}"):
            response: Any = self._core.read_namespaced_persistent_volume_claim(
                name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            claim: RawObject = json.loads(response.data)
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim}

    def update_persistent_volume(self, volume: Mapping[str, Any], dry_run: bool = False) -> RawObject:
        """Replaces a PersistentVolume with ``volume`` (its ``metadata.resourceVersion`` is the
        precondition: :class:`Conflict` when it changed meanwhile); returns the stored object."""
        name = volume["metadata"]["name"]
        with translated_errors(f"update persistentvolume {name}"):
            body: Any = dict(volume)  # sent as it is: the typed model would drop fields it does not know
            response: Any = self._core.replace_persistent_volume(
                name, body, dry_run="All" if dry_run else None, _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT)
            stored: RawObject = json.loads(response.data)
        return {"apiVersion": "v1", "kind": "PersistentVolume", **stored}

    def update_persistent_volume_claim(self, claim: Mapping[str, Any], dry_run: bool = False) -> RawObject:
        """Replaces a PersistentVolumeClaim with ``claim`` (resourceVersion precondition, as
        :meth:`update_persistent_volume`); returns the stored object."""
        namespace, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
        with translated_errors(f"update persistentvolumeclaim {namespace}/{name}"):
            body: Any = dict(claim)
            response: Any = self._core.replace_namespaced_persistent_volume_claim(
                name, namespace, body, dry_run="All" if dry_run else None, _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT)
            stored: RawObject = json.loads(response.data)
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **stored}

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        """Deletes the pod with its own grace period (``terminationGracePeriodSeconds``), as the
        kube-scheduler deletes a preemption victim. ``uid`` is a precondition: a pod recreated under
        the same name is not deleted by a stale plan (409 :class:`Conflict`); 404
        :class:`NotFound` when it is gone already."""
        body = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=uid) if uid else None)
        with translated_errors(f"delete pod {namespace}/{name}"):
            response: Any = self._core.delete_namespaced_pod(name, namespace, body=body, _preload_content=False,
                                                             _request_timeout=REQUEST_TIMEOUT)
            response.read()

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any], dry_run: bool = False) -> None:
        """Merge-patches the pod's ``status`` subresource (``nominatedNodeName``, a condition,
        ``extendedResourceClaimStatus``), as the kube-scheduler does; nothing else of the pod can
        change this way."""
        with translated_errors(f"patch pod {namespace}/{name} status"):
            response: Any = self._core.patch_namespaced_pod_status(
                name, namespace, {"status": dict(status)}, _content_type="application/strategic-merge-patch+json",
                dry_run="All" if dry_run else None, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            response.read()

    def evict(self, namespace: str, name: str, uid: str, dry_run: bool = False) -> None:
        """Evicts the pod through the ``policy/v1`` Eviction subresource, which honours
        PodDisruptionBudgets. ``uid`` is a precondition (a pod recreated under the same name is
        not evicted by a stale plan: 409 :class:`Conflict`). Raises :class:`DisruptionBudget`
        on 429 (a PDB forbids it now: do not retry in this run) and :class:`NotFound` on 404
        (the pod is gone). The response is not deserialised (kubernetes-client/python#547)."""
        body = k8s.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=uid)) if uid else None,
        )
        try:
            with translated_errors(f"evict pod {namespace}/{name}"):
                response: Any = self._core.create_namespaced_pod_eviction(
                    name, namespace, body, dry_run="All" if dry_run else None,
                    _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
                )
                response.read()
        except ApiFailure as error:
            if error.status == 429:
                raise DisruptionBudget(error.message, status=429, reason=error.reason) from None
            raise

    def read_lease(self, namespace: str, name: str) -> RawObject:
        """A coordination.k8s.io/v1 Lease; :class:`NotFound` when it does not exist."""
        with translated_errors(f"read lease {namespace}/{name}"):
            response: Any = self._coordination.read_namespaced_lease(
                name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            lease: RawObject = json.loads(response.data)
        return lease

    def write_lease(self, namespace: str, lease: RawObject, create: bool) -> RawObject:
        """Creates the Lease, or replaces it (its ``metadata.resourceVersion`` is the
        precondition: :class:`Conflict` when someone else wrote it meanwhile)."""
        name = lease["metadata"]["name"]
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", **lease}
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        with translated_errors(f"{'create' if create else 'update'} lease {namespace}/{name}"):
            # Sent as the dict it is: the typed client turns MicroTime strings into datetimes and
            # back into text the API server refuses ("...T00:00:00+00:00" lacks the microseconds).
            return self._send("POST" if create else "PUT", path if create else f"{path}/{name}", body)

    def _send(self, method: str, path: str, body: Mapping[str, Any]) -> RawObject:
        """One JSON request with ``body`` as it is; the answer as a dict; ApiException on refusal."""
        api = self._core.api_client
        params = api.param_serialize(method=method, resource_path=path, body=dict(body), auth_settings=["BearerToken"],
                                     header_params={"Content-Type": "application/json", "Accept": "application/json"})
        response: Any = api.call_api(*params, _request_timeout=REQUEST_TIMEOUT)
        response.read()
        if not 200 <= int(response.status) < 300:
            raise ApiException(http_resp=response)
        answer: RawObject = json.loads(response.data)
        return answer

    def namespace_annotations(self, name: str, timeout: float = 1.0) -> dict[str, str]:
        """A namespace's annotations ({} when it does not exist), answered within ``timeout`` s."""
        try:
            with translated_errors(f"read namespace {name}"):
                response: Any = self._core.read_namespace(name, _preload_content=False,
                                                          _request_timeout=(timeout, timeout))
                body: RawObject = json.loads(response.data)
        except NotFound:
            return {}
        return {str(k): str(v) for k, v in ((body.get("metadata") or {}).get("annotations") or {}).items()}

    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """A ConfigMap's data, or None when it does not exist."""
        try:
            with translated_errors(f"read configmap {namespace}/{name}"):
                response: Any = self._core.read_namespaced_config_map(
                    name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
                body: RawObject = json.loads(response.data)
        except NotFound:
            return None
        return {str(k): str(v) for k, v in (body.get("data") or {}).items()}

    def write_config_map(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        """Creates the ConfigMap, or replaces its data when it exists."""
        body: Any = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                     "data": dict(data)}
        with translated_errors(f"write configmap {namespace}/{name}"):
            try:
                response: Any = self._core.replace_namespaced_config_map(
                    name, namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            except ApiException as error:
                if error.status != 404:
                    raise
                response = self._core.create_namespaced_config_map(
                    namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            response.read()

    def bind(self, namespace: str, name: str, uid: str, node: str, dry_run: bool = False,
             annotations: Mapping[str, str] | None = None) -> None:
        """Binds the pod to ``node`` through the ``pods/binding`` subresource.

        ``uid`` is sent as the Binding's ``metadata.uid``, which the API server turns into a
        storage precondition: a pod deleted and recreated under the same name gets 409 instead
        of being bound by a stale plan. Raises :class:`Conflict` when the pod is already bound,
        being deleted, gated or replaced. The response is not deserialised (the Python client
        may fail on it even after a successful bind, kubernetes-client/python#547).
        ``annotations`` are set on the pod by the same call (the API server copies a
        Binding's annotations to the pod), which is how chosen GPU devices are recorded
        without any right to update pods.
        """
        body = k8s.V1Binding(
            api_version="v1",
            kind="Binding",
            metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, uid=uid or None,
                                      annotations=dict(annotations) if annotations else None),
            target=k8s.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        action = f"bind pod {namespace}/{name} to node {node}"
        with translated_errors(action):
            response: Any = self._core.create_namespaced_pod_binding(
                name,
                namespace,
                body,
                dry_run="All" if dry_run else None,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
            response.read()

    # ----------------------------------------------------------------- informers (kubeplace serve)

    def list_resource(self, resource: str, field_selector: str | None = None) -> tuple[list[RawObject], str]:
        """Every object of ``resource`` (``pods``, ``nodes``, ``namespaces``, ``persistentvolumeclaims``,
        ``persistentvolumes``, ``services``, ``replicationcontrollers`` or ``group/version/plural``) in every
        namespace, and the list's resourceVersion, from which :meth:`watch_resource` goes on. Raises
        :class:`NotFound` when a CRD is not installed. Read from the API server's watch cache (resourceVersion
        0, one answer), as client-go's informers list: the watch that follows makes up for any staleness, and
        etcd is not read for every object again."""
        kind, list_page = self._lister(resource)
        return self._list_versioned(f"list {resource}", kind, list_page, field_selector=field_selector,
                                    resource_version="0", limit=0)

    def watch_resource(self, resource: str, resource_version: str, timeout_seconds: int,
                       field_selector: str | None = None) -> Iterator[tuple[str, RawObject]]:
        """Changes after ``resource_version``, as (``ADDED``|``MODIFIED``|``DELETED``|``BOOKMARK``,
        object) until the server ends the watch (after ``timeout_seconds``). Raises :class:`Gone`
        when that version is too old (list again), other :class:`ClusterError` on failures."""
        kind, list_page = self._lister(resource)
        action = f"watch {resource}"
        with translated_errors(action):
            response: Any = list_page(
                watch=True, resource_version=resource_version or None, timeout_seconds=timeout_seconds,
                allow_watch_bookmarks=True, _preload_content=False,
                _request_timeout=(REQUEST_TIMEOUT[0], timeout_seconds + REQUEST_TIMEOUT[0]),
                **({"field_selector": field_selector} if field_selector else {}),
            )
        try:
            lines = _stream_lines(response)
            while True:
                with translated_errors(action):
                    line = next(lines, None)
                if line is None:
                    return
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    code = int(obj.get("code") or 0)
                    error = Gone if code == 410 else ApiFailure
                    raise error(f"{action}: HTTP {code}: {obj.get('message', '')}", status=code,
                                reason=str(obj.get("reason", "")))
                if kind and "kind" not in obj:
                    obj = {"kind": kind, **obj}
                yield str(event.get("type", "")), obj
        finally:
            with contextlib.suppress(Exception):
                response.release_conn()

    def _lister(self, resource: str) -> tuple[str, Callable[..., Any]]:
        core: dict[str, tuple[str, Callable[..., Any]]] = {
            "pods": ("Pod", self._core.list_pod_for_all_namespaces), "nodes": ("Node", self._core.list_node),
            "namespaces": ("Namespace", self._core.list_namespace),
            "persistentvolumeclaims": ("PersistentVolumeClaim",
                                       self._core.list_persistent_volume_claim_for_all_namespaces),
            "persistentvolumes": ("PersistentVolume", self._core.list_persistent_volume),
            "services": ("Service", self._core.list_service_for_all_namespaces),
            "replicationcontrollers": ("ReplicationController",
                                       self._core.list_replication_controller_for_all_namespaces)}
        if resource in core:
            return core[resource]
        group, version, plural = resource.split("/")

        def list_page(**options: Any) -> Any:
            return self._custom.list_cluster_custom_object(group, version, plural, **options)

        return "", list_page

    def read_resource_claim(self, namespace: str, name: str) -> RawObject:
        """A ResourceClaim (resource.k8s.io/v1) as a camelCase dict; :class:`NotFound` when gone."""
        with translated_errors(f"read resourceclaim {namespace}/{name}"):
            response: Any = self._custom.get_namespaced_custom_object(
                "resource.k8s.io", "v1", namespace, "resourceclaims", name, _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT)
            claim: RawObject = json.loads(response.data)
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **claim}

    def update_resource_claim(self, claim: Mapping[str, Any], dry_run: bool = False, status: bool = False) -> RawObject:
        """Replaces a ResourceClaim (``status``: its status subresource) with ``claim``, its
        resourceVersion as precondition (:class:`Conflict` when it changed); returns the stored object."""
        namespace, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
        replace = (self._custom.replace_namespaced_custom_object_status if status
                   else self._custom.replace_namespaced_custom_object)
        with translated_errors(f"update resourceclaim {namespace}/{name}{' status' if status else ''}"):
            response: Any = replace("resource.k8s.io", "v1", namespace, "resourceclaims", name, dict(claim),
                                    dry_run="All" if dry_run else None, _preload_content=False,
                                    _request_timeout=REQUEST_TIMEOUT)
            stored: RawObject = json.loads(response.data)
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **stored}

    def create_resource_claim(self, claim: Mapping[str, Any], dry_run: bool = False) -> RawObject:
        """Creates a ResourceClaim (its ``metadata.generateName`` names it); returns the stored object."""
        namespace = claim["metadata"]["namespace"]
        with translated_errors(f"create resourceclaim in {namespace}"):
            response: Any = self._custom.create_namespaced_custom_object(
                "resource.k8s.io", "v1", namespace, "resourceclaims", dict(claim),
                dry_run="All" if dry_run else None, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            stored: RawObject = json.loads(response.data)
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **stored}

    def cordon_node(self, name: str, unschedulable: bool = True) -> None:
        """Sets the node's ``spec.unschedulable`` (``kubectl cordon``; False: ``uncordon``)."""
        with translated_errors(f"{'cordon' if unschedulable else 'uncordon'} node {name}"):
            response: Any = self._core.patch_node(name, {"spec": {"unschedulable": unschedulable}},
                                                  _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            response.read()

    def delete_node_claim(self, name: str) -> None:
        """Deletes a Karpenter NodeClaim: Karpenter drains and terminates its node."""
        with translated_errors(f"delete nodeclaim {name}"):
            response: Any = self._custom.delete_cluster_custom_object(
                "karpenter.sh", "v1", "nodeclaims", name, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            response.read()

    def annotate_machine(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        """Sets annotations of a Cluster API Machine (``cluster.x-k8s.io/v1beta1``) by a merge patch."""
        with translated_errors(f"annotate machine {namespace}/{name}"):
            response: Any = self._custom.patch_namespaced_custom_object(
                "cluster.x-k8s.io", "v1beta1", namespace, "machines", name,
                {"metadata": {"annotations": dict(annotations)}}, _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT)
            response.read()

    def scale_machine_deployment(self, namespace: str, name: str, by: int) -> int:
        """Changes a Cluster API MachineDeployment's ``spec.replicas`` by ``by`` (not below 0), its
        resourceVersion the precondition (:class:`Conflict` when it changed meanwhile); the new count."""
        args = ("cluster.x-k8s.io", "v1beta1", namespace, "machinedeployments", name)
        with translated_errors(f"scale machinedeployment {namespace}/{name}"):
            response: Any = self._custom.get_namespaced_custom_object(
                *args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            current: RawObject = json.loads(response.data)
            replicas = max(0, int((current.get("spec") or {}).get("replicas") or 0) + by)
            patch = {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                     "spec": {"replicas": replicas}}
            response = self._custom.patch_namespaced_custom_object(
                *args, patch, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            response.read()
        return replicas

    def delete_resource_claim(self, namespace: str, name: str) -> None:
        with translated_errors(f"delete resourceclaim {namespace}/{name}"):
            response: Any = self._custom.delete_namespaced_custom_object(
                "resource.k8s.io", "v1", namespace, "resourceclaims", name, _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT)
            response.read()

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        """Creates a core/v1 Event (``generateName`` in its metadata gives it a unique name)."""
        with translated_errors(f"create event in {namespace}"):
            self._send("POST", f"/api/v1/namespaces/{namespace}/events", event)

    def patch_object_status(self, group: str, version: str, plural: str, namespace: str, name: str,
                            status: Mapping[str, Any]) -> None:
        """Merge-patches the status subresource of a custom object (a PodGroup)."""
        with translated_errors(f"patch {plural}.{group} {namespace}/{name} status"):
            response: Any = self._custom.patch_namespaced_custom_object_status(
                group, version, namespace, plural, name, {"status": dict(status)},
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
            response.read()

    def _list(self, action: str, kind: str, list_page: Callable[..., Any], **options: Any) -> list[RawObject]:
        return self._list_versioned(action, kind, list_page, **options)[0]

    def _list_versioned(self, action: str, kind: str, list_page: Callable[..., Any],
                        **options: Any) -> tuple[list[RawObject], str]:
        """Every item, following ``continue`` tokens, and the first page's resourceVersion; each
        item gets the ``kind`` and ``apiVersion`` that list responses leave out, as kubectl
        prints them."""
        items: list[RawObject] = []
        version = ""
        for page in self._pages(action, list_page, options):
            version = version or str((page.get("metadata") or {}).get("resourceVersion", ""))
            item_kind = kind or page.get("kind", "").removesuffix("List")
            for item in page.get("items") or []:
                items.append({"apiVersion": page.get("apiVersion", "v1"), "kind": item_kind, **item})
        return items, version

    def _pages(self, action: str, list_page: Callable[..., Any], options: dict[str, Any]) -> Iterator[RawObject]:
        token: str | None = None
        limit = options.pop("limit", PAGE_SIZE) or None  # 0: all in one answer
        while True:
            with translated_errors(action):
                response = list_page(
                    **{key: value for key, value in options.items() if value is not None},
                    limit=limit,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
                page: RawObject = json.loads(response.data)
            yield page
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                return


def _stream_lines(response: Any) -> Iterator[bytes]:
    """The lines of a streamed (watch) response, one JSON event each."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending
