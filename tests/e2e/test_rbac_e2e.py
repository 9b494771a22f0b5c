"""deploy/rbac.yaml is enough for `kubeplace plan` and `kubeplace bind`, and no more than that.

The control plane's kubeplace identity is the user ``system:serviceaccount:kubeplace-system:kubeplace``
(a static token), which is exactly who the ClusterRoleBinding of deploy/rbac.yaml names. The file
is applied once for this module (server-side apply, as ``kubectl apply --server-side`` does) and
removed afterwards. "Before RBAC" uses a ServiceAccount of the test's own namespace with a
TokenRequest token, so it does not depend on the order the tests run in.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from kubeplace.models.gpu import DEVICE_ALLOCATED

from . import controlplane as cp
from .test_bind_e2e import SOLVER_ARGS, assert_exit, bind_report, cli, create_pods, kwok_nodes, pod_manifest, pod_nodes
from .test_preempt_e2e import priority_classes, reasons, running_pods, serving, victim

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

RBAC_FILE = cp.REPO_ROOT / "deploy" / "rbac.yaml"
SYSTEM_NAMESPACE = "kubeplace-system"
AUTHENTICATED = ["system:authenticated"]  # what the authenticator adds to every identity


def _allowed(admin_api: client.ApiClient, user: str, groups: list[str], **attributes: str) -> bool:
    """A SubjectAccessReview, as the admin, for one request of `user`."""
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=user, groups=groups, resource_attributes=client.V1ResourceAttributes(**attributes)
        )
    )
    answer = client.AuthorizationV1Api(admin_api).create_subject_access_review(review)
    return bool(answer.status.allowed)


def _apply(api: client.ApiClient, documents: list[dict[str, Any]]) -> None:
    """Server-side apply, document by document (``kubernetes.utils.create_from_yaml(apply=True)``
    sends every object to the ``default`` namespace, which the server refuses)."""
    dynamic = DynamicClient(api)
    for document in documents:
        resource = dynamic.resources.get(api_version=document["apiVersion"], kind=document["kind"])
        metadata = document["metadata"]
        resource.server_side_apply(body=document, name=metadata["name"], namespace=metadata.get("namespace"),
                                   field_manager="kubeplace-e2e", force_conflicts=True)  # fmt: skip


@pytest.fixture(scope="module")
def rbac(admin_api: client.ApiClient) -> Iterator[list[dict[str, Any]]]:
    """deploy/rbac.yaml applied; yields its documents."""
    documents = [d for d in yaml.safe_load_all(RBAC_FILE.read_text()) if d]
    _apply(admin_api, documents)
    user = cp.KUBEPLACE_USER
    cp.wait_for(lambda: _allowed(admin_api, user, AUTHENTICATED, verb="list", resource="nodes"), 30, "RBAC active")
    try:
        yield documents
    finally:
        rbac_api = client.RbacAuthorizationV1Api(admin_api)
        for kind, name in [(d["kind"], d["metadata"]["name"]) for d in documents]:
            with contextlib.suppress(ApiException):
                if kind == "ClusterRoleBinding":
                    rbac_api.delete_cluster_role_binding(name)
                elif kind == "ClusterRole":
                    rbac_api.delete_cluster_role(name)
        with contextlib.suppress(ApiException):  # takes the ServiceAccount, Role and RoleBinding along
            client.CoreV1Api(admin_api).delete_namespace(SYSTEM_NAMESPACE)


def test_rbac_file_is_what_the_spec_asks(rbac: list[dict[str, Any]]) -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in rbac}
    assert kinds == {
        ("Namespace", SYSTEM_NAMESPACE),
        ("ServiceAccount", "kubeplace"),
        ("ClusterRole", "kubeplace"),
        ("ClusterRoleBinding", "kubeplace"),
        ("Role", "kubeplace-leader-election"),
        ("RoleBinding", "kubeplace-leader-election"),
        ("ClusterRole", "kubeplace-rebalancer"),
        ("ClusterRole", "kubeplace-preemption"),
        ("ClusterRoleBinding", "kubeplace-preemption"),
    }
    bound_roles = {d["roleRef"]["name"] for d in rbac if d["kind"].endswith("Binding")}
    assert "kubeplace-rebalancer" not in bound_roles  # the rebalancer's role is granted separately
    for d in rbac:
        for rule in d.get("rules", []):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule


def test_plan_and_bind_work_with_only_this_rbac(
    rbac: object, control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """As the kubeplace identity: plan, then bind (a GPU pod too: its device annotation travels in
    the Binding, so no right to update pods is needed)."""
    core = client.CoreV1Api(admin_api)
    kubeconfig = str(control_plane.kubeplace_kubeconfig)
    with kwok_nodes(core, namespace, {"a": {"cpu": "8", "extra": {"nvidia.com/gpu": "2"}}}) as (node,):
        create_pods(core, namespace, [
            pod_manifest("web", namespace),
            pod_manifest("train", namespace, extended={"nvidia.com/gpu": "1"}),
        ])  # fmt: skip

        planned = cli("plan", "--kubeconfig", kubeconfig, "-n", namespace, "-o", "yaml", *SOLVER_ARGS)
        assert_exit(planned, 0)
        assert {p["name"]: p["node"] for p in yaml.safe_load(planned.stdout)["placements"]} == {
            "web": node, "train": node
        }  # fmt: skip

        bound = cli("bind", "--kubeconfig", kubeconfig, "--yes", "-n", namespace, "-o", "json", *SOLVER_ARGS)
        assert_exit(bound, 0)
        assert {name: row["outcome"] for name, row in bind_report(bound).items()} == {"web": "bound", "train": "bound"}
        assert pod_nodes(core, namespace) == {"web": node, "train": node}
        assert DEVICE_ALLOCATED in core.read_namespaced_pod("train", namespace).metadata.annotations


def test_plan_holds_room_for_a_jobset_leaders_followers_with_only_this_rbac(
    rbac: object, control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """As the kubeplace identity: plan reads the leader's (suspended) Job and holds room for its
    follower beside it; only the leader is a placement."""
    core = client.CoreV1Api(admin_api)
    exclusive = {"alpha.jobset.sigs.k8s.io/exclusive-topology": "kubernetes.io/hostname",
                 "batch.kubernetes.io/job-completion-index": "0"}
    labels = {"batch.kubernetes.io/job-name": "train", "jobset.sigs.k8s.io/job-key": "k1"}
    leader = pod_manifest("train-0", namespace, cpu="3")
    leader["metadata"].update(labels=labels, annotations=exclusive)
    template = {"metadata": {"labels": {"jobset.sigs.k8s.io/job-key": "k1"}},
                "spec": {"restartPolicy": "Never", "containers": leader["spec"]["containers"]}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": namespace},
           "spec": {"suspend": True, "parallelism": 2, "completions": 2, "completionMode": "Indexed",
                    "template": template}}
    with kwok_nodes(core, namespace, {"a": {"cpu": "8"}}) as (node,):
        client.BatchV1Api(admin_api).create_namespaced_job(namespace, job)
        create_pods(core, namespace, [leader])
        planned = cli("plan", "--kubeconfig", str(control_plane.kubeplace_kubeconfig), "-n", namespace, "-o", "yaml",
                      *SOLVER_ARGS)
        assert_exit(planned, 0)
        doc = yaml.safe_load(planned.stdout)
        assert [(p["name"], p["node"]) for p in doc["placements"]] == [("train-0", node)]
        assert [(r["name"], r["node"], r["count"]) for r in doc["reservations"]] == [("train-0.followers", node, 1)]


#: (allowed?, SubjectAccessReview resource attributes); "NS" is replaced by the test's namespace.
ACCESS = [
    *((True, {"verb": verb, "resource": r})
      for r in ("pods", "nodes", "namespaces") for verb in ("get", "list", "watch")),
    *((True, {"verb": "list", "resource": r, "group": g}) for r, g in [
        ("persistentvolumeclaims", ""), ("persistentvolumes", ""), ("poddisruptionbudgets", "policy"),
        ("storageclasses", "storage.k8s.io"), ("csinodes", "storage.k8s.io"), ("csidrivers", "storage.k8s.io"),
        ("csistoragecapacities", "storage.k8s.io"), ("volumeattachments", "storage.k8s.io"),
        ("priorityclasses", "scheduling.k8s.io"), ("deviceclasses", "resource.k8s.io"),
        ("resourceslices", "resource.k8s.io"), ("resourceclaims", "resource.k8s.io"),
        ("resourceclaimtemplates", "resource.k8s.io"),
        ("podgroups", "scheduling.x-k8s.io"), ("podgroups", "scheduling.sigs.k8s.io"),
        ("podgroups", "scheduling.volcano.sh"), ("nodes", "metrics.k8s.io"), ("pods", "metrics.k8s.io"),
        ("podgroups", "scheduling.k8s.io"), ("podgroups", "scheduling.run.ai"), ("jobs", "batch"),
        ("leaderworkersets", "leaderworkerset.x-k8s.io"), ("workloads", "kueue.x-k8s.io"),
    ]),
    (False, {"verb": "create", "resource": "jobs", "group": "batch", "namespace": "NS"}),
    *((True, {"verb": "get", "resource": r, "group": "metrics.k8s.io", "name": "x"}) for r in ("nodes", "pods")),
    (False, {"verb": "watch", "resource": "nodes", "group": "metrics.k8s.io"}),
    (True, {"verb": "create", "resource": "pods", "subresource": "binding", "namespace": "NS"}),
    (True, {"verb": "update", "resource": "persistentvolumes", "name": "pv"}),
    (True, {"verb": "update", "resource": "persistentvolumeclaims", "namespace": "NS", "name": "pvc"}),
    # DynamicResources' PreBind: a claim's finalizer, then its allocation and reservation
    (True, {"verb": "update", "resource": "resourceclaims", "group": "resource.k8s.io", "namespace": "NS",
            "name": "c"}),
    *((True, {"verb": "update", "resource": "resourceclaims", "subresource": sub, "group": "resource.k8s.io",
              "namespace": "NS", "name": "c"}) for sub in ("status", "binding")),
    # extended resources served by DRA: the pod's extended resource claim created, deleted on failure
    *((True, {"verb": verb, "resource": "resourceclaims", "group": "resource.k8s.io", "namespace": "NS",
              "name": "c"}) for verb in ("create", "delete")),
    *((True, {"verb": "patch", "resource": "podgroups", "subresource": "status", "group": g, "namespace": "NS",
              "name": "pg"}) for g in ("scheduling.x-k8s.io", "scheduling.sigs.k8s.io", "scheduling.volcano.sh")),
    (False, {"verb": "patch", "resource": "podgroups", "group": "scheduling.x-k8s.io", "namespace": "NS",
             "name": "pg"}),
    (True, {"verb": "create", "resource": "events", "namespace": "NS"}),
    (True, {"verb": "create", "resource": "events", "group": "events.k8s.io", "namespace": "NS"}),
    (True, {"verb": "create", "resource": "leases", "group": "coordination.k8s.io", "namespace": SYSTEM_NAMESPACE}),
    *((True, {"verb": verb, "resource": "leases", "group": "coordination.k8s.io", "namespace": SYSTEM_NAMESPACE,
              "name": "kubeplace"}) for verb in ("get", "update")),
    # preemption (serve): delete a victim, patch pods/status (DisruptionTarget, nominatedNodeName)
    (True, {"verb": "delete", "resource": "pods", "namespace": "NS", "name": "p"}),
    (True, {"verb": "patch", "resource": "pods", "subresource": "status", "namespace": "NS", "name": "p"}),
    # what it must never do
    *((False, {"verb": verb, "resource": "pods", "namespace": "NS", "name": "p"}) for verb in ("update", "patch")),
    (False, {"verb": "create", "resource": "pods", "namespace": "NS"}),
    *((False, {"verb": verb, "resource": "persistentvolumes", "name": "pv"}) for verb in ("delete", "create")),
    *((False, {"verb": verb, "resource": "persistentvolumeclaims", "namespace": "NS", "name": "pvc"})
      for verb in ("delete", "create", "patch")),
    (False, {"verb": "deletecollection", "resource": "pods", "namespace": "NS"}),
    (False, {"verb": "patch", "resource": "resourceclaims", "group": "resource.k8s.io", "namespace": "NS",
             "name": "c"}),
    (False, {"verb": "deletecollection", "resource": "resourceclaims", "group": "resource.k8s.io",
             "namespace": "NS"}),
    (False, {"verb": "update", "resource": "resourceslices", "group": "resource.k8s.io", "name": "s"}),
    (False, {"verb": "update", "resource": "pods", "subresource": "status", "namespace": "NS", "name": "p"}),
    (False, {"verb": "create", "resource": "pods", "subresource": "eviction", "namespace": "NS"}),
    (False, {"verb": "get", "resource": "secrets", "namespace": "NS", "name": "s"}),
    (False, {"verb": "list", "resource": "secrets"}),
    (False, {"verb": "update", "resource": "nodes", "name": "n"}),
    (False, {"verb": "patch", "resource": "nodes", "name": "n"}),
    (False, {"verb": "get", "resource": "leases", "group": "coordination.k8s.io", "namespace": SYSTEM_NAMESPACE,
             "name": "somebody-else"}),
    (False, {"verb": "update", "resource": "leases", "group": "coordination.k8s.io", "namespace": "NS",
             "name": "kubeplace"}),
    (False, {"verb": "create", "resource": "leases", "group": "coordination.k8s.io", "namespace": "NS"}),
]  # fmt: skip


def test_subject_access_reviews_allow_exactly_what_is_needed(
    rbac: object, admin_api: client.ApiClient, namespace: str
) -> None:
    wrong = []
    for expected, attributes in ACCESS:
        attributes = {k: namespace if v == "NS" else v for k, v in attributes.items()}
        if _allowed(admin_api, cp.KUBEPLACE_USER, AUTHENTICATED, **attributes) != expected:
            wrong.append(f"{'should' if expected else 'must not'} be allowed: {attributes}")
    assert not wrong, "\n".join(wrong)


def test_kubeplace_is_refused_when_it_tries_what_it_must_not(
    rbac: object, admin_api: client.ApiClient, kubeplace_api: client.ApiClient, namespace: str
) -> None:
    admin, mine = client.CoreV1Api(admin_api), client.CoreV1Api(kubeplace_api)
    admin.create_namespaced_pod(namespace, pod_manifest("victim", namespace))
    admin.create_namespaced_secret(namespace, client.V1Secret(metadata=client.V1ObjectMeta(name="s"),
                                                              string_data={"k": "v"}))  # fmt: skip
    pod = mine.read_namespaced_pod("victim", namespace)  # reading is allowed
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="victim", namespace=namespace))
    attempts = {
        "patch pod": lambda: mine.patch_namespaced_pod("victim", namespace, {"metadata": {"labels": {"x": "y"}}}),
        "update pod": lambda: mine.replace_namespaced_pod("victim", namespace, pod),
        "create pod": lambda: mine.create_namespaced_pod(namespace, pod_manifest("new", namespace)),
        "evict pod": lambda: mine.create_namespaced_pod_eviction("victim", namespace, eviction),
        "read secret": lambda: mine.read_namespaced_secret("s", namespace),
        "list secrets": lambda: mine.list_secret_for_all_namespaces(),
        "update pod status": lambda: mine.replace_namespaced_pod_status("victim", namespace, pod),
        "delete pods at once": lambda: mine.delete_collection_namespaced_pod(namespace),
    }
    statuses = {}
    for what, attempt in attempts.items():
        try:
            attempt()
        except ApiException as exc:
            statuses[what] = exc.status
        else:
            statuses[what] = "allowed"
    assert statuses == dict.fromkeys(attempts, 403)
    victim = admin.read_namespaced_pod("victim", namespace)
    assert victim.metadata.deletion_timestamp is None and not (victim.metadata.labels or {})

    try:  # a serve run earlier on this control plane may have left its lease
        client.CoordinationV1Api(admin_api).delete_namespaced_lease("kubeplace", SYSTEM_NAMESPACE)
    except ApiException as exc:
        assert exc.status == 404
    leases = client.CoordinationV1Api(kubeplace_api)
    lease = client.V1Lease(metadata=client.V1ObjectMeta(name="kubeplace"), spec=client.V1LeaseSpec(holder_identity="a"))
    leases.create_namespaced_lease(SYSTEM_NAMESPACE, lease)  # create is allowed (for any name: RBAC can't tell)
    own = leases.read_namespaced_lease("kubeplace", SYSTEM_NAMESPACE)
    own.spec.holder_identity = "b"
    assert leases.replace_namespaced_lease("kubeplace", SYSTEM_NAMESPACE, own).spec.holder_identity == "b"
    with pytest.raises(ApiException) as refused:
        leases.read_namespaced_lease("kube-scheduler", "kube-system")
    assert refused.value.status == 403


@contextlib.contextmanager
def _service_account_kubeconfig(
    control_plane: cp.ControlPlane, core: client.CoreV1Api, namespace: str, name: str, path: Path
) -> Iterator[Path]:
    """A ServiceAccount with no rights, and a kubeconfig holding a short-lived token for it."""
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name)))
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))
    token = core.create_namespaced_service_account_token(name, namespace, request).status.token
    user = f"system:serviceaccount:{namespace}:{name}"
    yield cp.write_kubeconfig(path, server=control_plane.server, ca_cert=control_plane.ca_cert, user=user, token=token)


def test_without_rbac_plan_and_bind_exit_2_with_one_line(
    rbac: object, control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """An identity without the ClusterRole gets 403: one line on stderr, exit 2, nothing bound.
    Granting it the ClusterRole of deploy/rbac.yaml, and nothing else, is what makes plan work."""
    core = client.CoreV1Api(admin_api)
    rbac_api = client.RbacAuthorizationV1Api(admin_api)
    with (
        kwok_nodes(core, namespace, {"a": {"cpu": "8"}}) as (node,),
        _service_account_kubeconfig(control_plane, core, namespace, "bare", tmp_path / "bare.kubeconfig") as bare,
    ):
        create_pods(core, namespace, [pod_manifest("p-0", namespace)])
        user = f"system:serviceaccount:{namespace}:bare"
        for command in ("plan", "bind"):
            extra = ["--yes"] if command == "bind" else []
            result = cli(command, "--kubeconfig", str(bare), "-n", namespace, *extra, *SOLVER_ARGS)
            assert_exit(result, 2)
            assert result.stdout == ""
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1, result.stderr
            assert lines[0].startswith("error: list nodes: HTTP 403 Forbidden"), lines[0]
            assert user in lines[0] and "Traceback" not in result.output
        assert pod_nodes(core, namespace) == {"p-0": ""}

        binding_name = f"kubeplace-e2e-{namespace}"
        rbac_api.create_cluster_role_binding(client.V1ClusterRoleBinding(
            metadata=client.V1ObjectMeta(name=binding_name),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="kubeplace"),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="bare", namespace=namespace)],
        ))  # fmt: skip
        try:
            groups = [*AUTHENTICATED, "system:serviceaccounts"]
            cp.wait_for(lambda: _allowed(admin_api, user, groups, verb="list", resource="nodes"), 30, "RBAC active")
            result = cli("plan", "--kubeconfig", str(bare), "-n", namespace, "-o", "yaml", *SOLVER_ARGS)
            assert_exit(result, 0)
            assert [p["node"] for p in yaml.safe_load(result.stdout)["placements"]] == [node]
        finally:
            rbac_api.delete_cluster_role_binding(binding_name)


def test_a_preemption_end_to_end_with_only_the_rbac_of_deploy(
    rbac: object, control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    core, scheduling = client.CoreV1Api(admin_api), client.SchedulingV1Api(admin_api)
    with priority_classes(scheduling, namespace) as klass, kwok_nodes(core, namespace, {"a": {"cpu": "4"}}) as (node,):
        create_pods(core, namespace, [victim("low", namespace, node, klass["low"])])
        cp.wait_for(lambda: running_pods(core, namespace) == {"low"}, 30, "the victim running")
        seen: dict[str, str] = {}
        stop = threading.Event()

        def watch_nomination() -> None:  # the nomination is visible before the binding
            while not stop.is_set():
                with contextlib.suppress(ApiException):
                    high = core.read_namespaced_pod("high", namespace)
                    if high.status.nominated_node_name and not high.spec.node_name:
                        seen["nominated"] = high.status.nominated_node_name
                stop.wait(0.05)

        with serving(str(control_plane.kubeplace_kubeconfig), namespace) as service:
            watcher = threading.Thread(target=watch_nomination, daemon=True)
            watcher.start()
            create_pods(core, namespace, [pod_manifest("high", namespace, cpu="4",
                                                       spec={"priorityClassName": klass["high"]})])
            cp.wait_for(lambda: pod_nodes(core, namespace).get("high") == node, 60, "the preemptor bound")
            stop.set()
            watcher.join(5)
            metrics = {k: service.metrics.value(f"kubeplace_preemption_{k}_total")
                       for k in ("attempts", "victims", "wasted_evictions")}
        assert seen.get("nominated") == node
        assert "low" not in running_pods(core, namespace)
        assert reasons(core, namespace, "low").get("Preempted") == f"Preempted by {namespace}/high on node {node}"
        assert reasons(core, namespace, "high").get("Preempting") == f"Preempting {namespace}/low on node {node}"
        assert reasons(core, namespace, "high").get("Scheduled") == f"Successfully assigned {namespace}/high to {node}"
        assert metrics == {"attempts": 1, "victims": 1, "wasted_evictions": 0}


def test_claims_are_allocated_with_only_this_rbac(
    rbac: object, control_plane: cp.ControlPlane, admin_api: client.ApiClient, namespace: str
) -> None:
    """`bind` as the kubeplace identity allocates a pod's claim (finalizer, status) and binds it."""
    from .test_dra_e2e import GROUP, VERSION, claim_template, claims_of, driver_of, generated, gpu_pod, published

    core, custom = client.CoreV1Api(admin_api), client.CustomObjectsApi(admin_api)
    with kwok_nodes(core, namespace, {"a": {"cpu": "4", "memory": "8Gi"}}) as nodes, \
            published(custom, driver_of(namespace, "r"), nodes, 1) as device_class:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates",
                                               claim_template(namespace, "one-gpu", device_class))
        create_pods(core, namespace, [gpu_pod("train", namespace)])
        cp.wait_for(lambda: all(generated(core, namespace, ["train"]).values()), 30, "claim generated")
        result = cli("bind", "--kubeconfig", str(control_plane.kubeplace_kubeconfig), "--yes", "-n", namespace,
                     "-o", "json", *SOLVER_ARGS)
        assert_exit(result, 0)
        assert bind_report(result)["train"]["outcome"] == "bound"
        (claim,) = claims_of(custom, namespace).values()
        assert claim["status"]["reservedFor"][0]["name"] == "train"
        assert pod_nodes(core, namespace)["train"] == nodes[0]
