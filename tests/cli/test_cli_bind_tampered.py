"""`kubeplace bind --plan` writes nothing a plan's pod does not own: a tampered plan (another
user's resource claim or volume claim, a stale uid, a claim twice) is refused in full, before the
first write, with one `error:` line and exit 2; an untampered one writes only the pod's own objects."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.cli.main import main
from tests.builders import namespace, node, pod
from tests.device_builders import claiming, device_class, gpu_slice, request, resource_claim
from tests.kube.fake_apiserver import FakeApiServer, serving
from tests.kube.test_kube_client import write_kubeconfig
from tests.volume_builders import claim, mounting, storage_class, volume

Doc = dict[str, Any]
RESOURCE = "/apis/resource.k8s.io/v1"
CLAIMS = f"{RESOURCE}/namespaces/default/resourceclaims"
PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"
OWN_WRITES = {f"{CLAIMS}/mine", f"{CLAIMS}/mine/status", "/api/v1/persistentvolumes/pv-1",
              "/api/v1/persistentvolumes/pv-2", "/api/v1/namespaces/default/pods/web/binding"}
"""Every path bind may write for pod web: its claim, a free volume for its claim data, itself."""


def fake_cluster() -> FakeApiServer:
    """Pod web (resource claim `mine`, volume claim `data`), and another user's resource claim
    `theirs` and volume claim `their-data`, in the same namespace; two free local volumes on n1."""
    resource_claims = [resource_claim("mine", requests=[request()]), resource_claim("theirs", requests=[request()])]
    pvcs = [claim("data"), claim("their-data")]
    volumes = [volume("pv-1", node="n1"), volume("pv-2", node="n1")]
    web = mounting(claiming(pod("web").cpu("1"), claim="mine"), "data")
    api = FakeApiServer([node("n1").cpu("4").memory("8Gi").label("kubernetes.io/hostname", "n1").manifest()],
                        [web.manifest()], [namespace("default").manifest()])
    api.lists |= {
        "/api/v1/persistentvolumeclaims": ("PersistentVolumeClaimList", "v1", pvcs),
        "/api/v1/persistentvolumes": ("PersistentVolumeList", "v1", volumes),
        "/apis/storage.k8s.io/v1/storageclasses": ("StorageClassList", "storage.k8s.io/v1", [storage_class("local")]),
        f"{RESOURCE}/deviceclasses": ("DeviceClassList", "resource.k8s.io/v1", [device_class("gpu")]),
        f"{RESOURCE}/resourceslices": ("ResourceSliceList", "resource.k8s.io/v1", [gpu_slice("n1", gpus=2)]),
        f"{RESOURCE}/resourceclaims": ("ResourceClaimList", "resource.k8s.io/v1", resource_claims),
        **{f"/apis/metrics.k8s.io/v1beta1/{plural}": (kind, "metrics.k8s.io/v1beta1", [])
           for plural, kind in (("nodes", "NodeMetricsList"), ("pods", "PodMetricsList"))},
    }
    for c in resource_claims:
        api.objects[f"{CLAIMS}/{c['metadata']['name']}"] = c
        api.objects[f"{CLAIMS}/{c['metadata']['name']}/status"] = c
    api.objects |= {f"{PVCS}/{c['metadata']['name']}": c for c in pvcs}
    api.objects |= {f"/api/v1/persistentvolumes/{v['metadata']['name']}": v for v in volumes}
    return api


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeApiServer, Path, Doc]]:
    """The fake cluster, a kubeconfig for it, and the plan kubeplace makes for it."""
    api = fake_cluster()
    with serving(api) as url:
        kubeconfig = write_kubeconfig(tmp_path_factory.mktemp("kube") / "config", url)
        made = CliRunner().invoke(main, ["plan", "--kubeconfig", str(kubeconfig), "-o", "json", "--time-limit", "5"])
        assert made.exit_code == 0, made.stderr
        yield api, kubeconfig, json.loads(made.stdout)


def bind(served: tuple[FakeApiServer, Path, Doc], tmp_path: Path, plan: Doc) -> tuple[int, str, str, list[Any]]:
    """Binds ``plan`` (a server dry run: nothing is stored, every request is recorded); the exit
    code, stdout, stderr and the writes sent (method, path, body)."""
    api, kubeconfig, _ = served
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    api.requests.clear()
    result = CliRunner().invoke(main, ["bind", "--kubeconfig", str(kubeconfig), "--plan", str(path), "-y",
                                       "--dry-run", "server", "-o", "json", "--time-limit", "5"],
                                catch_exceptions=False)
    writes = [(method, path, body) for method, path, _, body in api.requests if method != "GET"]
    return result.exit_code, result.stdout, result.stderr, writes


def placement(plan: Doc) -> Doc:
    (only,) = plan["placements"]
    assert isinstance(only, dict)
    return only


def test_the_plan_made_allocates_the_pods_claim_and_binds_its_volume(served: tuple[FakeApiServer, Path, Doc],
                                                                     tmp_path: Path) -> None:
    """The starting point of every tampering below: an honest plan writes the pod's own objects."""
    plan = served[2]
    assert [c["claim"] for c in placement(plan)["claims"]] == ["mine"]
    assert [v["claim"] for v in placement(plan)["volumes"]] == ["data"]
    code, out, err, writes = bind(served, tmp_path, plan)
    assert code == 0, (out, err)
    assert [r["outcome"] for r in json.loads(out)["results"]] == ["bound"]
    assert {path for _, path, _ in writes} <= OWN_WRITES and writes[-1][1].endswith("/pods/web/binding")


def tamper_claim_name(p: Doc) -> None:
    p["claims"][0]["claim"] = "theirs"


def add_their_claim(p: Doc) -> None:
    p["claims"].append({**copy.deepcopy(p["claims"][0]), "claim": "theirs"})


def claim_twice(p: Doc) -> None:
    p["claims"].append(copy.deepcopy(p["claims"][0]))


def tamper_volume_claim(p: Doc) -> None:
    p["volumes"][0]["claim"] = "their-data"


def add_their_volume_claim(p: Doc) -> None:
    p["volumes"].append({"claim": "their-data", "volume": "pv-2"})


def stale_uid(p: Doc) -> None:
    p["uid"] = "uid-of-a-pod-deleted-since"


@pytest.mark.parametrize(("tamper", "says"), [
    (tamper_claim_name, "claims[0].claim: theirs is not a resource claim of the pod"),
    (add_their_claim, "claims[1].claim: theirs is not a resource claim of the pod"),
    (claim_twice, "claims: claim mine is allocated 2 times"),
    (tamper_volume_claim, "volumes[0].claim: their-data is not a claim of the pod's volumes in namespace default"),
    (add_their_volume_claim, "volumes[1].claim: their-data is not a claim of the pod's volumes"),
    (stale_uid, "uid: the plan was made for uid uid-of-a-pod-deleted-since, the pod is now uid uid-default-web"),
])
def test_a_tampered_plan_is_refused_in_one_line_and_nothing_is_written(
        served: tuple[FakeApiServer, Path, Doc], tmp_path: Path, tamper: Callable[[Doc], None], says: str) -> None:
    plan = copy.deepcopy(served[2])
    tamper(placement(plan))
    code, out, err, writes = bind(served, tmp_path, plan)
    assert code == 2 and out == "", (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert f"plan.json: default/web: placements[0] (node n1): {says}" in err, err
    assert "the plan is refused, nothing was bound" in err
    assert writes == []


EDITS = st.one_of(
    st.tuples(st.just("claims"), st.sampled_from(["theirs", "mine", "their-data", "<extended-resources>", "x/mine"])),
    st.tuples(st.just("volumes"), st.sampled_from(["their-data", "data", "mine"]),
              st.sampled_from(["pv-2", "pv-1", "pv-3", ""])),
    st.tuples(st.just("uid"), st.sampled_from(["uid-someone-else", "", "uid-default-web"])),
    st.tuples(st.just("drop"), st.sampled_from(["volumes", "claims"])),
    st.tuples(st.just("node"), st.sampled_from(["n1", "n2"])),
    st.tuples(st.just("namespace"), st.sampled_from(["default", "other"])),
)
"""One edit of the plan's one placement: a claim allocation or a volume choice added (a copy of
the honest allocation, under another claim name), the uid, node or namespace replaced, the
claims or volumes dropped."""


def edited(plan: Doc, edits: list[tuple[str, ...]]) -> Doc:
    out = copy.deepcopy(plan)
    p = placement(out)
    for edit in edits:
        kind, *args = edit
        if kind == "claims":
            p.setdefault("claims", []).append({**copy.deepcopy(plan["placements"][0]["claims"][0]), "claim": args[0]})
        elif kind == "volumes":
            p.setdefault("volumes", []).append({"claim": args[0], **({"volume": args[1]} if args[1] else
                                                                     {"provision": True})})
        elif kind == "drop":
            p.pop(args[0], None)
        else:
            p[kind] = args[0]
    return out


@settings(max_examples=60, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(edits=st.lists(EDITS, min_size=1, max_size=2))
def test_a_randomly_edited_plan_is_written_correctly_or_refused_with_nothing_written(
        served: tuple[FakeApiServer, Path, Doc], tmp_path: Path, edits: list[tuple[str, ...]]) -> None:
    code, out, err, writes = bind(served, tmp_path, edited(served[2], edits))
    if code == 2:
        assert out == "" and err.startswith("error: ") and err.count("\n") == 1, err
        assert writes == [], (edits, err)
        return
    assert code in (0, 1), (edits, err)
    assert {path for _, path, _ in writes} <= OWN_WRITES, (edits, writes)
    for method, path, body in writes:
        if path.startswith("/api/v1/persistentvolumes/"):
            assert method == "PUT" and body["spec"]["claimRef"]["name"] == "data", (edits, body)
        if path.startswith(CLAIMS):
            reserved = (body.get("status") or {}).get("reservedFor") or []
            assert all(r["uid"] == "uid-default-web" for r in reserved), (edits, body)
