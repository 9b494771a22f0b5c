"""Services, ReplicationControllers, ReplicaSets and StatefulSets read from files and the cluster,
and the default spread selector built from them as ``helper/spread.go DefaultSelector`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeplace.kube.errors import InputError
from kubeplace.kube.files import load_snapshot
from kubeplace.kube.kubeconfig import connect
from kubeplace.kube.live import load_live_snapshot
from kubeplace.kube.objects import Requirement
from kubeplace.kube.parse import build_snapshot
from kubeplace.kube.workloads import default_selector
from tests.builders import node, pod
from tests.kube.fake_apiserver import FakeApiServer, serving
from tests.kube.test_kube_client import write_kubeconfig


def obj(kind: str, name: str, selector: Any, ns: str = "default", api: str = "apps/v1") -> dict[str, Any]:
    spec = {} if selector is None else {"selector": selector}
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec}


CONTROLLERS = [
    obj("Service", "web", {"app": "web"}, api="v1"),
    obj("Service", "headless", None, api="v1"),  # no selector: selects nothing
    obj("Service", "elsewhere", {"app": "web"}, ns="shop", api="v1"),
    obj("ReplicaSet", "web-1", {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "tier", "operator": "Exists"}]}),
    obj("StatefulSet", "db", {"matchLabels": {"app": "db"}}),
    obj("ReplicationController", "old", {"app": "old"}, api="v1"),
]


def selector_of(*objects: dict[str, Any], owner: tuple[str, str, str] | None = None) -> tuple[Requirement, ...]:
    built = pod("p").label("app", "web").label("tier", "front")
    manifest = built.manifest()
    if owner:
        kind, name, api = owner
        manifest["metadata"]["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": name, "uid": "u",
                                                    "controller": True}]
    snap = build_snapshot([(o, "f") for o in (*objects, manifest)])
    return default_selector(snap.pending[0], snap.controllers)


def test_services_of_the_pods_namespace_that_select_it_and_its_controller_make_the_selector() -> None:
    web = Requirement("app", "In", ("web",))
    assert selector_of(*CONTROLLERS) == (web,)
    assert selector_of(*CONTROLLERS, owner=("ReplicaSet", "web-1", "apps/v1")) == (web, Requirement("tier", "Exists"))
    assert selector_of(*CONTROLLERS[1:2]) == ()  # a nil selector: no default constraints
    assert selector_of(*CONTROLLERS[3:4], owner=("ReplicaSet", "web-1", "apps/v1beta2")) == ()  # not apps/v1
    assert selector_of(*CONTROLLERS[3:4], owner=("ReplicaSet", "gone", "apps/v1")) == ()


def test_a_controller_with_a_bad_selector_names_file_object_and_field() -> None:
    with pytest.raises(InputError) as caught:
        build_snapshot([(obj("Service", "web", ["app"], api="v1"), "cluster.yaml")])
    text = str(caught.value)
    assert "cluster.yaml" in text and "web" in text and "spec.selector" in text


def test_the_live_snapshot_reads_them_as_files_do(tmp_path: Path) -> None:
    api = FakeApiServer([node("n1").manifest()], [pod("p").label("app", "web").manifest()], [])
    api.lists |= {"/api/v1/services": ("ServiceList", "v1", [CONTROLLERS[0]]),
                  "/apis/apps/v1/replicasets": ("ReplicaSetList", "apps/v1", [CONTROLLERS[3]]),
                  "/apis/apps/v1/statefulsets": ("StatefulSetList", "apps/v1", [CONTROLLERS[4]])}
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all([node("n1").manifest(), pod("p").label("app", "web").manifest(),
                                        *(CONTROLLERS[i] for i in (0, 3, 4))]))
    with serving(api) as url:
        cluster = connect(str(write_kubeconfig(tmp_path / "config", url)), None)
        live = load_live_snapshot(cluster)
    assert [c.name for c in live.controllers] == ["web-1", "web", "db"]
    assert live.controllers == load_snapshot([dump]).controllers
