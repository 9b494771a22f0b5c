"""Replays a kubeplace plan through the real kube-scheduler, pod by pod, in the plan's order.

For each placement, in the order the plan lists them:

1. the pod is created as :func:`tests.e2e.hosting.host` made it: the default scheduler's name and
   the scheduling gate ``kubeplace.io/replay``, so the kube-scheduler holds it (PreEnqueue);
2. ``status.nominatedNodeName`` is set to the planned node (PATCH pods/status; the API server allows
   it on an unbound pod, ``ValidatePodStatusUpdate``);
3. the gate is removed. A spec update keeps the status (``podStrategy.PrepareForUpdate`` copies the
   old one), so the nomination survives, and the queue adds the pod to its nominator as it moves to
   activeQ (``moveToActiveQ``);
4. the kube-scheduler runs PreFilter over all nodes, then its filters on the nominated node first
   (``findNodesThatFitPod`` -> ``evaluateNominatedNode``) and takes that node when it passes,
   without scoring. Only if it fails are the other nodes searched.

So the pod must end bound to exactly its planned node. It is not pinned by required node affinity
on ``metadata.name``: under the default ``nodeAffinityPolicy: Honor`` a pin shrinks topology
spread's eligible domains to the pinned node's, and the spread check then passes or fails for
reasons of its own. A pod that the kube-scheduler refuses (PodScheduled False: the message of its
FailedScheduling event) or binds elsewhere is a disagreement. For the latter, the planned node's
own refusal is asked for: the pod is deleted, the other nodes are cordoned, and it is replayed again.
Cordoning changes nothing the filters count on the planned node, except for spread constraints with
``nodeTaintsPolicy: Honor`` (the cordon's taint leaves those nodes out of the domains).

The replay stops at the first disagreement: every later step would start from another state.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeplace.plan.plan import Placement
from kubeplace_bench.controlplane import ApiHttp, ApiRefused, ControlPlane, node_settled, wait_for

from .hosting import DEFAULT_SCHEDULER, Hosted, Manifest

AUTO_NAMESPACE_LABEL = "kubernetes.io/metadata.name"
KEPT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
POLL_SECONDS = 0.02
INFORMER_MARGIN_SECONDS = 0.3
"""How long the kube-scheduler's node watch is given to catch up with what the API answered."""
STORAGE_PATHS = {
    "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
    "CSIDriver": "/apis/storage.k8s.io/v1/csidrivers",
    "CSINode": "/apis/storage.k8s.io/v1/csinodes",
    "CSIStorageCapacity": "/apis/storage.k8s.io/v1/csistoragecapacities",
    "PersistentVolume": "/api/v1/persistentvolumes",
    "PersistentVolumeClaim": "/api/v1/persistentvolumeclaims",
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    "ResourceClaim": "/apis/resource.k8s.io/v1/resourceclaims",
}
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
"""The annotation by which the kube-scheduler's VolumeBinding asks for a claim to be provisioned there."""
GATED = "SchedulingGated"
"""PodScheduled's reason while a pod has scheduling gates (set by the API server at creation, kept
until the kube-scheduler writes its own)."""


@dataclass(frozen=True)
class Disagreement:
    pod: str
    """namespace/name"""
    planned: str
    bound: str
    """The node the kube-scheduler bound the pod to; "" when it did not bind it."""
    message: str
    """The kube-scheduler's words (its FailedScheduling message), or what the replay saw."""

    def __str__(self) -> str:
        where = f"bound it to {self.bound}" if self.bound else "did not bind it"
        return f"pod {self.pod}: planned on {self.planned}, the kube-scheduler {where}: {self.message}"


@dataclass(frozen=True)
class Outcome:
    agreed: int
    """Pods bound to their planned node, in plan order, before the first disagreement."""
    disagreement: Disagreement | None
    seconds: float
    """Replay only (creating, nominating, ungating, waiting), without setting up and tearing down."""


class Replayer:
    """Replays plans on one control plane whose kube-scheduler (default profile) is running."""

    def __init__(self, plane: ControlPlane, timeout: float = 30.0) -> None:
        self.api = ApiHttp(plane)
        self.timeout = timeout
        self._created_namespaces: set[str] = set()
        self._priority_classes: set[str] = set()
        self._provisioned: set[str] = set()

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Deletes the namespaces and PriorityClasses the replays created."""
        try:
            for name in sorted(self._created_namespaces):
                self._delete(f"/api/v1/namespaces/{name}")
            for name in sorted(self._priority_classes):
                self._delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
        finally:
            self.api.close()

    def wait_idle(self, timeout: float = 120.0) -> None:
        """Until the cluster has no node and no pending pod of the default scheduler (left by other
        tests): nodes would be extra topology domains, such pods would be placed on ours."""

        def idle() -> bool:
            return not self._items("/api/v1/nodes") and not self._foreign_pending()

        wait_for(idle, timeout, "a cluster without nodes and without pending pods of the default scheduler",
                 interval=0.5)

    def run(self, hosted: Hosted, placements: Sequence[Placement]) -> Outcome:
        """Hosts the scenario, replays ``placements`` in order, and removes what it created."""
        try:
            self._set_up(hosted)
            started = time.monotonic()
            agreed, disagreement = 0, None
            for placement in placements:
                disagreement = self._replay_one(hosted, placement)
                if disagreement is not None:
                    break
                agreed += 1
            return Outcome(agreed, disagreement, time.monotonic() - started)
        finally:
            self._tear_down(hosted, placements)

    # ----- one pod

    def _replay_one(self, hosted: Hosted, placement: Placement) -> Disagreement | None:
        label = f"{placement.namespace}/{placement.name}"
        bound, message = self._schedule(hosted, placement)
        if bound == placement.node:
            wrong = self._volumes_not_as_planned(placement)
            return Disagreement(label, placement.node, bound, wrong) if wrong else None
        if bound:
            refusal = self._planned_node_refusal(hosted, placement)
            message = f"with the other nodes cordoned, {refusal}"
        return Disagreement(label, placement.node, bound, message)

    def _schedule(self, hosted: Hosted, placement: Placement) -> tuple[str, str]:
        """Creates the gated pod, nominates its planned node, ungates it; (node bound to, message)."""
        template = hosted.pending.get((placement.namespace, placement.name))
        if template is None:
            raise AssertionError(f"the plan places {placement.namespace}/{placement.name}, which is not a pending "
                                 "pod of the scenario")
        pods = f"/api/v1/namespaces/{placement.namespace}/pods"
        self.api.request("POST", pods, template)
        self._prebind(placement)
        self.api.request("PATCH", f"{pods}/{placement.name}/status", {"status": {"nominatedNodeName": placement.node}})
        self.api.request("PATCH", f"{pods}/{placement.name}", {"spec": {"schedulingGates": None}})
        return self._wait_decided(f"{pods}/{placement.name}")

    def _wait_decided(self, path: str) -> tuple[str, str]:
        """(node, "") once the pod is bound; ("", message) once the kube-scheduler refused it.
        Meanwhile provisions the volumes the kube-scheduler asks for."""
        deadline = time.monotonic() + self.timeout
        while True:
            pod = self.api.request("GET", path)
            self._provision(pod)
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if node:
                return node, ""
            for condition in (pod.get("status") or {}).get("conditions") or []:
                if (condition.get("type") == "PodScheduled" and condition.get("status") == "False"
                        and condition.get("reason") != GATED):
                    return "", str(condition.get("message") or condition.get("reason"))
            if time.monotonic() > deadline:
                return "", f"neither bound nor refused after {self.timeout:.0f}s"
            time.sleep(POLL_SECONDS)

    def _claim(self, namespace: str, name: str) -> dict[str, Any]:
        return self.api.request("GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}")

    def _prebind(self, placement: Placement) -> None:
        """Gives each static volume the plan chose the claim in its claimRef, as kubeplace's binder
        does (``GetBindVolumeToClaim``, as the kube-scheduler's PreBind), and waits, as it does, for
        the PV controller to bind the two: the kube-scheduler then checks that very volume on the
        nominated node. (Ungated at once, its own PreBind would race the PV controller's update.)"""
        static = [c for c in placement.volumes if c.volume]
        for choice in static:
            claim = self._claim(placement.namespace, choice.claim)
            claim_ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": placement.namespace,
                         "name": choice.claim, "uid": claim["metadata"]["uid"]}
            patch = {"metadata": {"annotations": {BOUND_BY_CONTROLLER: "yes"}}, "spec": {"claimRef": claim_ref}}
            self.api.request("PATCH", f"{STORAGE_PATHS['PersistentVolume']}/{choice.volume}", patch)

        def bound() -> bool:
            claims = [self._claim(placement.namespace, c.claim) for c in static]
            return all((c.get("status") or {}).get("phase") == "Bound" for c in claims)

        wait_for(bound, self.timeout, f"the PV controller to bind the claims of {placement.name} as planned")

    def _volumes_not_as_planned(self, placement: Placement) -> str:
        """Where a claim the plan chose a volume for got another one: "" when none."""
        wrong = []
        for choice in placement.volumes:
            claim = self._claim(placement.namespace, choice.claim)
            got = str(claim["spec"].get("volumeName") or "")
            planned = choice.volume or f"pvc-{claim['metadata']['uid']}"  # what _provision names it
            if got != planned:
                wrong.append(f"claim {choice.claim} got volume {got or 'none'}, planned "
                             f"{choice.volume or 'a provisioned one'}")
        return "; ".join(wrong)

    def _provision(self, pod: Mapping[str, Any]) -> None:
        """Acts as the external provisioner for the pod's claims: once the kube-scheduler has chosen
        a node for a claim to provision (annotation ``volume.kubernetes.io/selected-node``), creates
        a volume bound to it, of the claim's size and class, usable where the class's
        allowedTopologies allow at that node's values (no node affinity when the class has none).
        The PV controller then completes the binding, and the kube-scheduler binds the pod."""
        namespace = pod["metadata"]["namespace"]
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim_name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim_name:
                continue
            claim = self._claim(namespace, claim_name)
            node = (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE)
            uid = claim["metadata"]["uid"]
            if not node or claim["spec"].get("volumeName") or f"pvc-{uid}" in self._provisioned:
                continue
            klass = self.api.request("GET", f"{STORAGE_PATHS['StorageClass']}/{claim['spec']['storageClassName']}")
            labels = self.api.request("GET", f"/api/v1/nodes/{node}")["metadata"].get("labels") or {}
            self.api.request("POST", "/api/v1/persistentvolumes", provisioned_volume(claim, klass, labels))
            self._provisioned.add(f"pvc-{uid}")

    def _planned_node_refusal(self, hosted: Hosted, placement: Placement) -> str:
        """Why the kube-scheduler refuses the planned node: the pod replayed again, alone there."""
        self._delete_pods([(placement.namespace, placement.name)])
        for node in hosted.nodes:
            if _name(node) != placement.node:
                self.api.request("PATCH", f"/api/v1/nodes/{_name(node)}", {"spec": {"unschedulable": True}})
        bound, message = self._schedule(hosted, placement)
        if bound:
            return f"it was bound to {bound}"
        return f"the kube-scheduler refused it: {message}"

    # ----- setting up and tearing down

    def _set_up(self, hosted: Hosted) -> None:
        for namespace, labels in hosted.namespaces.items():
            self._namespace(namespace, labels)
        for name, value in hosted.priority_classes.items():
            if name not in self._priority_classes:
                self._create("/apis/scheduling.k8s.io/v1/priorityclasses",
                             {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                              "metadata": {"name": name}, "value": value})
                self._priority_classes.add(name)
        for node in hosted.nodes:
            self.api.request("POST", "/api/v1/nodes", node)
        wait_for(lambda: all(self._settled(hosted, node) for node in hosted.nodes), self.timeout,
                 "the scenario's nodes Ready, with their own taints only")
        for obj in hosted.storage:
            self.api.request("POST", _collection(obj), obj)
        claims = [c for c in hosted.storage if c["kind"] == "PersistentVolumeClaim" and c["spec"].get("volumeName")]
        wait_for(lambda: all(self._phase(c) == "Bound" for c in claims), self.timeout,
                 "the PV controller to bind the claims bound in the scenario")
        # The kube-scheduler sees nodes through its own watch, a little after the API answers: had
        # it not yet seen a not-ready taint lifted, it would refuse the node and clear the nomination.
        time.sleep(INFORMER_MARGIN_SECONDS)
        for pod in hosted.bound:
            self.api.request("POST", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)

    def _namespace(self, name: str, labels: Mapping[str, str]) -> None:
        """The namespace with exactly ``labels`` (plus the API server's own name label)."""
        try:
            current = self.api.request("GET", f"/api/v1/namespaces/{name}")
        except ApiRefused as e:
            if e.status != 404:
                raise
            self.api.request("POST", "/api/v1/namespaces",
                             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
            if name not in KEPT_NAMESPACES:
                self._created_namespaces.add(name)
            wait_for(lambda: self._exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"), self.timeout,
                     f"ServiceAccount default in {name}")
            return
        old = (current.get("metadata") or {}).get("labels") or {}
        patch: dict[str, str | None] = {k: None for k in old if k not in labels and k != AUTO_NAMESPACE_LABEL}
        patch.update(labels)
        if patch:
            self.api.request("PATCH", f"/api/v1/namespaces/{name}", {"metadata": {"labels": patch}})

    def _settled(self, hosted: Hosted, node: Mapping[str, Any]) -> bool:
        live = self.api.request("GET", f"/api/v1/nodes/{_name(node)}")
        taints = {(str(t["key"]), str(t["effect"])) for t in (live.get("spec") or {}).get("taints") or []}
        return node_settled(live) and taints == hosted.expected_taints(node)

    def _tear_down(self, hosted: Hosted, placements: Iterable[Placement]) -> None:
        pods = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in hosted.bound]
        pods += [(p.namespace, p.name) for p in placements]
        self._delete_pods(pods)
        # Claims and volumes carry protection finalizers; the test objects are dropped at once. So are
        # the resource claims the kube-scheduler created (extended resources served by DRA).
        paths = [f"{_collection(o)}/{_name(o)}" for o in reversed(hosted.storage)]
        if any(o["kind"] == "DeviceClass" for o in hosted.storage):
            for namespace in hosted.namespaces:
                claims = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
                paths += [f"{claims}/{_name(c)}" for c in self._items(claims) if f"{claims}/{_name(c)}" not in paths]
        paths += [f"/api/v1/persistentvolumes/{name}" for name in sorted(self._provisioned)]
        self._provisioned.clear()
        for path in paths:
            try:
                self.api.request("PATCH", path, {"metadata": {"finalizers": None}})
            except ApiRefused as e:
                if e.status != 404:
                    raise
            self._delete(path)
        wait_for(lambda: not any(self._exists(path) for path in paths), self.timeout,
                 "the scenario's storage objects to be deleted")
        names = [_name(n) for n in hosted.nodes]
        for name in names:
            self._delete(f"/api/v1/nodes/{name}")
        wait_for(lambda: not {_name(n) for n in self._items("/api/v1/nodes")} & set(names), self.timeout,
                 "the scenario's nodes to be deleted")

    def _delete_pods(self, pods: Sequence[tuple[str, str]]) -> None:
        for namespace, name in pods:
            self._delete(f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": "0"})
        wait_for(lambda: not any(self._exists(f"/api/v1/namespaces/{ns}/pods/{n}") for ns, n in pods), self.timeout,
                 f"{len(pods)} pod(s) to be deleted")

    def _phase(self, obj: Mapping[str, Any]) -> str:
        live = self.api.request("GET", f"{_collection(obj)}/{_name(obj)}")
        return str((live.get("status") or {}).get("phase") or "")

    # ----- plain requests

    def _create(self, path: str, body: Mapping[str, Any]) -> None:
        try:
            self.api.request("POST", path, body)
        except ApiRefused as e:
            if e.status != 409:
                raise

    def _delete(self, path: str, query: Mapping[str, str] | None = None) -> None:
        try:
            self.api.request("DELETE", path, query=query)
        except ApiRefused as e:
            if e.status != 404:
                raise

    def _exists(self, path: str) -> bool:
        try:
            self.api.request("GET", path)
        except ApiRefused as e:
            if e.status == 404:
                return False
            raise
        return True

    def _items(self, path: str, query: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.api.request("GET", path, query=query).get("items") or []
        return items

    def _foreign_pending(self) -> list[str]:
        pods = self._items("/api/v1/pods", {"fieldSelector": "spec.nodeName=,status.phase=Pending"})
        return [f"{p['metadata']['namespace']}/{_name(p)}" for p in pods
                if (p.get("spec") or {}).get("schedulerName") == DEFAULT_SCHEDULER
                and not (p.get("spec") or {}).get("schedulingGates") and not p["metadata"].get("deletionTimestamp")]


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _collection(obj: Mapping[str, Any]) -> str:
    """The API path of the collection a storage object is created in."""
    path = STORAGE_PATHS[str(obj["kind"])]
    namespace = (obj.get("metadata") or {}).get("namespace")
    if not namespace:
        return path
    prefix, plural = path.rsplit("/", 1)
    return f"{prefix}/namespaces/{namespace}/{plural}"


def provisioned_volume(claim: Mapping[str, Any], klass: Mapping[str, Any], node_labels: Mapping[str, str]) -> Manifest:
    """The volume an external provisioner creates for ``claim`` on the node with ``node_labels``."""
    spec = claim["spec"]
    pv_spec: Manifest = {
        "capacity": {"storage": spec["resources"]["requests"]["storage"]},
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "storageClassName": spec["storageClassName"],
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "persistentVolumeReclaimPolicy": klass.get("reclaimPolicy") or "Delete",
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": claim["metadata"]["namespace"],
                     "name": claim["metadata"]["name"], "uid": claim["metadata"]["uid"]},
        "csi": {"driver": klass["provisioner"], "volumeHandle": f"replay-{claim['metadata']['uid']}"},
    }
    expressions = [{"key": e["key"], "operator": "In", "values": [node_labels.get(e["key"], "")]}
                   for term in klass.get("allowedTopologies") or [] for e in term.get("matchLabelExpressions") or []]
    if expressions:
        pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": f"pvc-{claim['metadata']['uid']}",
                         "annotations": {"pv.kubernetes.io/provisioned-by": klass["provisioner"]}},
            "spec": pv_spec}
