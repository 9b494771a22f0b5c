from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubeplace.kube.binder import Binding, Outcome, bind_all
from kubeplace.kube.client import Cluster
from kubeplace.kube.errors import ClusterError, ConfigMissing, Conflict, Forbidden, NotFound, Unauthorized, Unreachable
from kubeplace.kube.files import load_snapshot
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from tests.builders import namespace, node, pod
from tests.kube.fake_apiserver import FakeApiServer, serving, status

NODES = [node("n1").cpu("4").memory("8Gi"), node("n2").cpu("8").label("zone", "b"), node("n3").cpu("2")]
PODS = [
    pod("web-1").cpu("500m").label("app", "web"),
    pod("web-2", ns="shop").cpu("500m").label("app", "web"),
    pod("db-0").cpu("2").on("n1").scheduler("default-scheduler"),
    pod("job").cpu("1").on("n2"),
    pod("other").scheduler("default-scheduler"),
]
NAMESPACES = [namespace("default"), namespace("shop").label("tenant", "shop")]


def write_kubeconfig(path: Path, server: str, context: str = "test", token: str = "t0ken") -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server}}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def api() -> FakeApiServer:
    return FakeApiServer(
        [item.manifest() for item in NODES], [item.manifest() for item in PODS], [n.manifest() for n in NAMESPACES]
    )


@pytest.fixture
def cluster(api: FakeApiServer, tmp_path: Path) -> Iterator[Cluster]:
    with serving(api) as url:
        yield connect(str(write_kubeconfig(tmp_path / "config", url)), None)


def test_lists_follow_continue_tokens_and_restore_kind(cluster: Cluster, api: FakeApiServer) -> None:
    nodes = cluster.list_nodes()
    assert [n["metadata"]["name"] for n in nodes] == ["n1", "n2", "n3"]
    assert {(n["kind"], n["apiVersion"]) for n in nodes} == {("Node", "v1")}
    node_requests = [query for method, path, query, _ in api.requests if path == "/api/v1/nodes"]
    assert [query.get("continue") for query in node_requests] == [None, ["2"]]
    assert node_requests[0]["limit"] == ["500"]


def test_an_informer_lists_from_the_watch_cache_in_one_answer(cluster: Cluster, api: FakeApiServer) -> None:
    items, version = cluster.list_resource("nodes")
    first = next(query for _, path, query, _ in api.requests if path == "/api/v1/nodes")
    assert first["resourceVersion"] == ["0"] and "limit" not in first  # as client-go's reflectors list
    assert [n["metadata"]["name"] for n in items] == ["n1", "n2", "n3"] and version == "7"


def test_live_snapshot_equals_file_snapshot(cluster: Cluster, api: FakeApiServer, tmp_path: Path) -> None:
    dump = {"apiVersion": "v1", "kind": "List", "items": [*api.nodes, *api.pods, *api.namespaces]}
    file = tmp_path / "dump.yaml"
    file.write_text(yaml.safe_dump(dump))
    live = load_live_snapshot(cluster, "kubeplace", {"default", "shop"}, "app=web")
    assert live == load_snapshot([file], namespaces={"default", "shop"}, selector="app=web")
    assert [p.key for p in live.pending] == ["default/web-1", "shop/web-2"]
    assert [p.key for p in live.bound] == ["default/db-0", "default/job"]
    assert live.source == "context test"
    pod_query = next(query for _, path, query, _ in api.requests if path == "/api/v1/pods")
    assert pod_query["fieldSelector"] == ["status.phase!=Succeeded,status.phase!=Failed"]


def test_bind_sends_uid_target_and_dry_run(cluster: Cluster, api: FakeApiServer) -> None:
    cluster.bind("default", "web-1", "uid-default-web-1", "n2", dry_run=True)
    method, path, query, body = api.requests[-1]
    assert (method, path) == ("POST", "/api/v1/namespaces/default/pods/web-1/binding")
    assert query["dryRun"] == ["All"]
    assert body["metadata"] == {"name": "web-1", "namespace": "default", "uid": "uid-default-web-1"}
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n2"}
    cluster.bind("default", "web-1", "uid-default-web-1", "n2")
    assert "dryRun" not in api.requests[-1][2]


@pytest.mark.parametrize(
    ("code", "reason", "error"),
    [
        (409, "Conflict", Conflict),
        (404, "NotFound", NotFound),
        (403, "Forbidden", Forbidden),
        (401, "Unauthorized", Unauthorized),
    ],
)
def test_bind_errors_are_named(
    cluster: Cluster, api: FakeApiServer, code: int, reason: str, error: type[ClusterError]
) -> None:
    message = 'Operation cannot be fulfilled on pods/binding "web-1": pod web-1 is already assigned to node "n1"'
    api.bind_answers["web-1"] = (code, status(code, reason, message))
    with pytest.raises(error) as caught:
        cluster.bind("default", "web-1", "uid", "n2")
    assert str(caught.value).startswith(f"bind pod default/web-1 to node n2: HTTP {code} ")
    assert message in str(caught.value)
    assert caught.value.status == code


def test_missing_crd_lists_nothing(cluster: Cluster) -> None:
    assert cluster.list_objects("scheduling.x-k8s.io", "v1alpha1", "podgroups") == []


def test_bind_all_against_the_api(cluster: Cluster, api: FakeApiServer) -> None:
    api.bind_answers["b"] = (409, status(409, "Conflict", "pod b is being deleted"))
    results = bind_all(cluster, [Binding("default", name, "", "n1") for name in ("a", "b", "c")], dry_run=False)
    assert [r.outcome for r in results] == [Outcome.BOUND, Outcome.CONFLICT, Outcome.BOUND]


def test_unreachable_server(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cluster = connect(str(write_kubeconfig(tmp_path / "config", f"http://127.0.0.1:{port}")), None)
    with pytest.raises(Unreachable, match="list nodes: API server unreachable"):
        cluster.list_nodes()


def test_kubeconfig_env_with_several_paths_is_merged(
    api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(api) as url:
        first = write_kubeconfig(tmp_path / "a", "http://127.0.0.1:1", context="unused")
        second = write_kubeconfig(tmp_path / "b", url, context="other")
        monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}:{second}")
        cluster = connect(None, "other")
        assert cluster.description == "context other"
        assert len(cluster.list_nodes()) == 3


def test_no_configuration_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigMissing, match="no kubeconfig"):
        connect(None, None)
    with pytest.raises(ConfigMissing, match="does not exist"):
        connect(str(tmp_path / "nope"), None)
    (tmp_path / "bad").write_text("not: [a kubeconfig")
    with pytest.raises(ConfigMissing, match="cannot use kubeconfig"):
        connect(str(tmp_path / "bad"), None)


def test_unknown_context(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "config", "http://127.0.0.1:1")
    with pytest.raises(ConfigMissing, match="cannot use kubeconfig"):
        connect(str(config), "nope")


def test_volumes_and_claims_are_read_and_updated_with_their_resource_version(cluster: Cluster,
                                                                             api: FakeApiServer) -> None:
    from tests.volume_builders import claim, volume

    api.objects = {"/api/v1/persistentvolumes/pv-1": volume("pv-1", node="n1"),
                   "/api/v1/namespaces/default/persistentvolumeclaims/data": claim("data")}
    pv = cluster.read_persistent_volume("pv-1")
    assert (pv["kind"], pv["metadata"]["name"], pv["metadata"]["resourceVersion"]) == ("PersistentVolume", "pv-1", "1")
    pv["spec"]["claimRef"] = {"namespace": "default", "name": "data"}
    dry = cluster.update_persistent_volume(pv, dry_run=True)
    assert api.requests[-1][:3] == ("PUT", "/api/v1/persistentvolumes/pv-1", {"dryRun": ["All"]})
    assert dry["spec"]["claimRef"]["name"] == "data" and "claimRef" not in api.objects[
        "/api/v1/persistentvolumes/pv-1"]["spec"]
    stored = cluster.update_persistent_volume(pv)
    assert stored["metadata"]["resourceVersion"] == "2" and api.requests[-1][2] == {}
    with pytest.raises(Conflict, match=r"update persistentvolume pv-1: HTTP 409 .*the object has been modified"):
        cluster.update_persistent_volume(pv)  # resourceVersion 1 is stale now
    pvc = cluster.read_persistent_volume_claim("default", "data")
    pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] = "n1"
    cluster.update_persistent_volume_claim(pvc)
    assert api.requests[-1][:2] == ("PUT", "/api/v1/namespaces/default/persistentvolumeclaims/data")
    assert api.objects["/api/v1/namespaces/default/persistentvolumeclaims/data"]["metadata"]["annotations"][
        "volume.kubernetes.io/selected-node"] == "n1"
    with pytest.raises(NotFound):
        cluster.read_persistent_volume("pv-gone")
