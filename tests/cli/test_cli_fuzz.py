"""Fuzz: mutated manifests, configurations and plan files never end in a traceback.

Hypothesis takes a valid snapshot, configuration or plan file, replaces or deletes a few of its
values (huge, negative, fractional, NaN, wrong types, escapes, misspellings...), writes it as YAML
or JSON and sometimes damages the bytes (a cut, a non-UTF-8 byte, deep nesting). ``plan``,
``config-check`` and ``bind --plan`` (against a fake API server) must then answer with exit 0, 1
or 2, and an exit 2 must be one ``error:`` line. Any other exception, a traceback or exit 3 (a
plan the verifier refuses) fails. Derandomized and bounded so that it runs in seconds in CI.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeplace.cli.main import main
from tests.builders import namespace, node, pod
from tests.device_builders import (
    claim_template,
    claiming,
    device,
    device_class,
    gpu_slice,
    request,
    resource_claim,
    resource_slice,
    sub_request,
)
from tests.kube.fake_apiserver import FakeApiServer, serving
from tests.kube.test_kube_client import write_kubeconfig
from tests.volume_builders import claim, mounting, storage_class, volume

Path_ = tuple[str | int, ...]

SNAPSHOT: list[dict[str, Any]] = [
    node("n1").cpu("4").memory("8Gi").gpu(2).label("zone", "a").taint("gpu", "yes").manifest(),
    node("n2").cpu("8").memory("16Gi").label("zone", "b").label("tenant", "t").manifest(),
    namespace("team").label("tenant", "t").manifest(),
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g", "namespace": "team"},
     "spec": {"minMember": 2, "minResources": {"cpu": "1"}}},
    pod("web").cpu("500m").memory("1Gi").selector("zone", "a").tolerate("gpu", "yes", "NoSchedule").manifest(),
    pod("trainer", ns="team").gpu(1).cpu("1").label("scheduling.x-k8s.io/pod-group", "g")
    .spec("priorityClassName", "high").manifest(),
    pod("worker", ns="team").cpu("1").label("scheduling.x-k8s.io/pod-group", "g")
    .require("zone", "In", "a", "b").host_port(8080).manifest(),
    pod("side").cpu("250m").spec("initContainers", [{"name": "s", "restartPolicy": "Always",
                                                     "resources": {"requests": {"cpu": "100m"}}}])
    .spec("overhead", {"cpu": "10m"}).label("kubeplace.io/gang", "pair")
    .annotation("kubeplace.io/gang-min-member", "1").manifest(),
    {**(db := pod("db").cpu("2").memory("2Gi").on("n2").priority(10).manifest()),
     "metadata": {**db["metadata"], "resourceVersion": "42"}},  # stored: its priority is not admission's to check
    # read as the API server stores them: RuntimeClass, hostNetwork ports, pod-level resources, a
    # nominated pod's held room, a globalDefault class, volumes, extended requests, topology keys
    {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}, "handler": "kata",
     "overhead": {"podFixed": {"cpu": "100m", "memory": "64Mi"}},
     "scheduling": {"nodeSelector": {"zone": "b"}, "tolerations": [{"key": "kata", "operator": "Exists"}]}},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "normal"}, "value": 5,
     "globalDefault": True},
    pod("vm").cpu("250m").spec("runtimeClassName", "kata").spec("resources", {"limits": {"cpu": "1", "memory": "1Gi"}})
    .spec("volumes", [{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}]).manifest(),
    pod("exporter").spec("hostNetwork", True).spec("containers", [
        {"name": "e", "image": "x", "ports": [{"containerPort": 9100}],
         "resources": {"requests": {"cpu": "100m", "example.com/dev": "1"}, "limits": {"example.com/dev": "1"}}}])
    .spec("affinity", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}).manifest(),
    pod("preemptor").cpu("1").spec("priorityClassName", "high").scheduler("default-scheduler")
    .status("nominatedNodeName", "n2").manifest(),
]

NVLINK = {"matchAttribute": "gpu.example.com/nvlink", "requests": ["gpu"]}
STORAGE_AND_DEVICES: list[dict[str, Any]] = [
    *(node(n).cpu("8").memory("16Gi").label("topology.kubernetes.io/zone", "a").manifest() for n in ("n1", "n2")),
    device_class(), gpu_slice("n1", 4, nvlink=["a", "a", "b", "b"]), gpu_slice("n2", 2),
    resource_slice("shared", [device("part-0", consumes={"mem": {"memory": "20Gi"}}),
                              device("part-1", consumes={"mem": {"memory": "20Gi"}})],
                   pool="shared", all_nodes=True, counters={"mem": {"memory": "30Gi"}}),
    resource_claim("train", requests=[request(count=2)], constraints=[NVLINK]),
    {**resource_claim("old", requests=[{"name": "gpu", "deviceClassName": "gpu", "count": 1}]),
     "apiVersion": "resource.k8s.io/v1beta1"},
    resource_claim("alt", requests=[request("gpu", first_available=[sub_request("big", count=2),
                                                                       sub_request("small")])]),
    resource_claim("done", allocated=("n1", [("gpu", "gpu-3")]), reserved_for=["uid-x"]),
    claim_template("one"), resource_claim("gen", owner_uid="uid-default-gen"),
    *(claiming(pod(name).cpu("1"), claim=claimed).manifest()
      for name, claimed in (("trainer", "train"), ("legacy", "old"), ("either", "alt"), ("joiner", "done"))),
    claiming(pod("gen").cpu("1"), template="one", generated="gen").manifest(),
    storage_class("local", wait=True), storage_class("gp3", provisioner="ebs.csi.aws.com"),
    volume("pv-1", node="n1"), volume("pv-2", zone="a", claim_ref=("default", "bound")),
    claim("data"), claim("scratch", storage_class="gp3"), claim("bound", volume="pv-2"),
    mounting(pod("db").cpu("1"), "data", "scratch").manifest(), mounting(pod("reader").cpu("1"), "bound").manifest(),
]
"""Resource claims, devices and volumes: their fields mutated, the DRA and volume rules are fuzzed."""

CONFIG: dict[str, Any] = {
    "apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementConfiguration",
    "userPlugins": [{"name": "NodeLabelMatch", "import": "examples.plugins.node_label_match:FACTORY"}],
    "profiles": [{"schedulerName": "kubeplace", "objective": "balance", "placementWeight": "pods",
                  "plugins": {"enabled": ["NodeLabelMatch"], "disabled": ["Tenant"]},
                  "pluginConfig": [{"name": "NodeLabelMatch",
                                    "args": {"podLabel": "special", "nodeLabel": "ok", "value": "true"}},
                                   {"name": "Balance", "args": {"resources": [{"name": "cpu", "weight": 1}]}}]}],
    "solver": {"backend": "cpsat", "timeLimitSeconds": 1, "workers": 1, "relativeGap": 0, "seed": 0},
    "gpu": {"deviceResource": "nvidia.com/gpu"},
}

PLAN: dict[str, Any] = {
    "apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementPlan", "schedulerName": "kubeplace",
    "placements": [{"namespace": "default", "name": "web", "node": "n1", "uid": ""},
                   {"namespace": "default", "name": "gpu", "node": "n1", "gpus": [0]}],
    "summary": {"pods_placed": 2},
}

BAD_TEXT = st.one_of(
    st.sampled_from([
        "", "0", "-3", "1e400", "1Ei", "100Ei", "1e23", "9" * 40, "0.1m", "1e-400", "12Zi", "NaN", "Infinity",
        "always", "Exists", "NoScheduled", "DoNotSchedule", "In", "Gt", "gurobi", "\x1b[2J", "[bold]x[/]", "a" * 300,
    ]),
    st.text(alphabet=st.characters(exclude_characters=":"), max_size=12),  # ':' could name a module to import
)
BAD_NUMBER = st.one_of(
    st.sampled_from([0, -1, 2**31, 2**53, 2**63, 10**23, -(2**63), 0.5, 1e300, float("nan"), float("inf")]),
    st.integers(), st.floats(),
)
BAD_SHAPE = st.sampled_from([None, True, [], {}, [None], [[]], {"": None}, {"key": "a"}, "2024-01-01T00:00:00Z"])
ANYTHING = st.one_of(BAD_TEXT, BAD_NUMBER, BAD_SHAPE, st.lists(st.integers(-2, 3), max_size=3))


BAD_QUANTITY = st.sampled_from(["1e400", "1Ei", "100Ei", "8Pi", "1e23", "9" * 40, 2**63, 10**23, "-1", "0.5",
                                "0.1m", "1e-400", "12Zi", "NaN", "0", 0, 1.5])
QUANTITY_BLOCKS = {"requests", "limits", "allocatable", "capacity", "overhead", "minResources"}


def bad_value(where: Path_, current: Any) -> st.SearchStrategy[Any]:
    """Mostly a wrong value of the same kind (a quantity stays quantity-like, a string a string),
    else anything."""
    if QUANTITY_BLOCKS.intersection(map(str, where)):
        return st.one_of(BAD_QUANTITY, BAD_QUANTITY, ANYTHING)
    if isinstance(current, str):
        return st.one_of(BAD_TEXT, BAD_TEXT, ANYTHING)
    if isinstance(current, (int, float)) and not isinstance(current, bool):
        return st.one_of(BAD_NUMBER, BAD_NUMBER, ANYTHING)
    return ANYTHING


def paths(value: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every place in a document a mutation may touch (never a user plugin's import target)."""
    if prefix and prefix[-1] == "import":
        return
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*prefix, index))


def mutate(document: Any, where: Path_, operation: str, value: Any) -> Any:
    """``document`` with the value at ``where`` replaced, deleted or doubled."""
    if not where:
        return value
    parent = document
    for step in where[:-1]:
        parent = parent[step]
    last = where[-1]
    if operation == "delete":
        del parent[last]
    elif operation == "double" and isinstance(parent, list):
        parent.insert(int(last), copy.deepcopy(parent[last]))
    else:
        parent[last] = value
    return document


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> bytes:
    document = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        # the deepest places first: hypothesis leans to the first choices, and a leaf changed is a
        # snapshot still worth planning, where a whole object replaced is only a parse error
        where = draw(st.sampled_from(sorted(paths(document), key=len, reverse=True)[:-1]))
        operation = draw(st.sampled_from(["replace", "replace", "replace", "delete", "double"]))
        current = document
        for step in where:
            current = current[step]
        value = copy.deepcopy(draw(bad_value(where, current)))  # the strategies hold shared lists
        document = mutate(document, where, operation, value)
    if draw(st.booleans()):  # JSON: several objects as kubectl writes them, in a List
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": document} if isinstance(base, list)
                          else document)
    elif isinstance(base, list):  # YAML: one document per object
        text = yaml.safe_dump_all(document if isinstance(document, list) else [document], allow_unicode=True)
    else:
        text = yaml.safe_dump(document, allow_unicode=True)
    data = text.encode()
    damage = draw(st.sampled_from(["none"] * 7 + ["cut", "byte", "nest"]))
    at = draw(st.integers(0, len(data)))
    if damage == "cut":
        data = data[:at]
    elif damage == "byte":
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xe9", b"\x00", b"\x1b", b"\t", b"&a *a"])) + data[at:]
    elif damage == "nest":
        data = data[:at] + b"[" * 3000 + b"]" * 3000 + data[at:]
    return data


def check(args: list[str], allowed: tuple[int, ...] = (0, 1, 2)) -> None:
    """No exception escapes (catch_exceptions=False), the exit code is allowed, exit 2 is one
    ``error:`` line, the last (a ``warning:`` or ``note:`` about the cluster read may come before it)."""
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code in allowed, (result.exit_code, result.stdout[-2000:], result.stderr[-2000:])
    if result.exit_code == 2:
        *before, last = result.stderr.rstrip("\n").split("\n")
        assert last.startswith("error: ") and result.stderr.endswith("\n"), result.stderr
        assert all(line.startswith(("warning: ", "note: ")) for line in before), result.stderr


FUZZ = settings(max_examples=150, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(data=mutated(SNAPSHOT))
def test_plan_never_ends_in_a_traceback(workdir: Path, data: bytes) -> None:
    snapshot = workdir / "cluster.yaml"
    snapshot.write_bytes(data)
    check(["plan", str(snapshot), "-o", "json", "--time-limit", "1", "--workers", "1"])


@FUZZ
@given(data=mutated(STORAGE_AND_DEVICES))
def test_plan_with_claims_and_volumes_never_ends_in_a_traceback(workdir: Path, data: bytes) -> None:
    """No plan the verifier refuses (exit 3) either: what the API server refuses is refused."""
    snapshot = workdir / "storage.yaml"
    snapshot.write_bytes(data)
    check(["plan", str(snapshot), "-o", "json", "--time-limit", "1", "--workers", "1"])


@FUZZ
@given(data=mutated(CONFIG))
def test_config_check_never_ends_in_a_traceback(workdir: Path, data: bytes) -> None:
    config = workdir / "config.yaml"
    config.write_bytes(data)
    check(["config-check", str(config)])


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fake API server holding the snapshot's nodes and pods (plus a GPU pod for the plan)."""
    objects = [*SNAPSHOT, pod("gpu").gpu(1).tolerate("gpu", "yes", "NoSchedule").manifest()]
    api = FakeApiServer([o for o in objects if o["kind"] == "Node"], [o for o in objects if o["kind"] == "Pod"],
                        [o for o in objects if o["kind"] == "Namespace"])
    with serving(api) as url:
        yield write_kubeconfig(tmp_path_factory.mktemp("kube") / "config", url)


@settings(FUZZ, max_examples=40)
@given(data=mutated(PLAN))
def test_bind_plan_never_ends_in_a_traceback(workdir: Path, kubeconfig: Path, data: bytes) -> None:
    plan = workdir / "plan.yaml"
    plan.write_bytes(data)
    check(["bind", "--kubeconfig", str(kubeconfig), "--plan", str(plan), "--dry-run", "server", "-y"])


def test_the_unmutated_inputs_are_valid(workdir: Path, kubeconfig: Path) -> None:
    """The fuzz starts from inputs that pass, so each mutation is what it tests."""
    for name, base in (("cluster.yaml", yaml.safe_dump_all(SNAPSHOT)), ("config.yaml", yaml.safe_dump(CONFIG)),
                       ("plan.yaml", yaml.safe_dump(PLAN)), ("storage.yaml", yaml.safe_dump_all(STORAGE_AND_DEVICES))):
        (workdir / name).write_text(base)
    result = CliRunner().invoke(main, ["plan", str(workdir / "storage.yaml"), "-o", "json", "--time-limit", "5"])
    assert result.exit_code == 0, result.stderr
    assert not json.loads(result.stdout)["unplaced"], result.stdout
    check(["plan", str(workdir / "cluster.yaml"), "--config", str(workdir / "config.yaml"), "--time-limit", "1"],
          (0,))
    check(["config-check", str(workdir / "config.yaml")], (0,))
    check(["bind", "--kubeconfig", str(kubeconfig), "--plan", str(workdir / "plan.yaml"), "-y"], (0,))


NAMES = st.sampled_from(["gpu", "gpu", "a", "b", "GPU", "", "x_y", "a" * 64])
SLICE_FIELDS = {"nodeName": "n1", "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
    {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}, "allNodes": True, "perDeviceNodeSelection": True}


def dns_label(name: str) -> bool:
    return 0 < len(name) <= 63 and name.replace("-", "").isalnum() and name == name.lower() and name[0] != "-"


@st.composite
def claim_shapes(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool]:
    """A claim, a slice and a pod with names, request shapes and slice node fields drawn around the
    API server's limits, and whether the API server accepts them (its rules, written plainly)."""
    names = draw(st.lists(NAMES, min_size=1, max_size=3))
    requests, valid = [], len(set(names)) == len(names) and all(map(dns_label, names))
    for name in names:
        exactly, alternatives = draw(st.booleans()), draw(st.integers(0, 10))
        entry: dict[str, Any] = {"name": name}
        if exactly:
            entry["exactly"] = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}
        if alternatives:
            entry["firstAvailable"] = [sub_request(f"s{i}") for i in range(alternatives)]
        valid &= exactly != bool(alternatives) and alternatives <= 8
        requests.append(entry)
    fields = draw(st.lists(st.sampled_from(sorted(SLICE_FIELDS)), unique=True, max_size=2))
    devices = [device(n) for n in draw(st.lists(st.sampled_from(["gpu-0", "gpu-1"]), min_size=1, max_size=2))]
    valid &= len(fields) == 1 and len({d["name"] for d in devices}) == len(devices)
    gpus = resource_slice("s", devices, pool="p")
    gpus["spec"].update({f: SLICE_FIELDS[f] for f in fields})
    entries = draw(st.lists(st.sampled_from(["gpu", "gpu", "other"]), min_size=1, max_size=2))
    valid &= len(set(entries)) == len(entries)
    user = pod("p").cpu("1").spec("resourceClaims", [{"name": e, "resourceClaimName": "c"} for e in entries])
    objects = [node("n1").cpu("4").memory("4Gi").manifest(), device_class(), gpus,
               resource_claim("c", requests=requests), user.manifest()]
    return objects, valid


def refused_exactly_when_invalid(snapshot: Path, objects: list[Any], valid: bool) -> None:
    """``plan`` of ``objects`` exits 0 when the API server accepts them, else 2 with one line."""
    snapshot.write_text(yaml.safe_dump_all(objects))
    result = CliRunner().invoke(main, ["plan", str(snapshot), "-o", "json", "--time-limit", "1", "--workers", "1"],
                                catch_exceptions=False)
    assert result.exit_code == (0 if valid else 2), (result.stdout[-1000:], result.stderr)
    if not valid:
        assert result.stderr.startswith(f"error: {snapshot}: ") and result.stderr.count("\n") == 1


@settings(FUZZ, max_examples=120)
@given(shape=claim_shapes())
def test_dra_objects_are_refused_exactly_when_the_api_server_refuses_them(workdir: Path,
                                                                          shape: tuple[list[Any], bool]) -> None:
    refused_exactly_when_invalid(workdir / "claims.yaml", *shape)


SOURCES = {"nfs": {"server": "nfs.example", "path": "/v"}, "csi": {"driver": "d", "volumeHandle": "h"},
           "hostPath": {"path": "/v"}}


@st.composite
def volume_shapes(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool]:
    """A claim with or without its storage request and access modes, and a volume with zero to
    three sources, and whether the API server accepts them."""
    data, pv = claim("data", storage_class="slow"), volume("pv-1", storage_class="slow")
    del pv["spec"]["nfs"]
    if not draw(st.booleans()):
        del data["spec"]["resources"]["requests"]["storage"]
    data["spec"]["accessModes"] = draw(st.sampled_from([[], ["ReadWriteOnce"], ["ReadWriteMany", "ReadOnlyMany"]]))
    sources = draw(st.lists(st.sampled_from(sorted(SOURCES)), unique=True, max_size=3))
    pv["spec"].update({s: SOURCES[s] for s in sources})
    valid = "storage" in data["spec"]["resources"]["requests"] and bool(data["spec"]["accessModes"]) \
        and len(sources) == 1
    objects = [node("n1").cpu("4").memory("4Gi").manifest(), storage_class("slow"), pv, data,
               mounting(pod("db").cpu("1"), "data").manifest()]
    return objects, valid


@settings(FUZZ, max_examples=40)
@given(shape=volume_shapes())
def test_volumes_are_refused_exactly_when_the_api_server_refuses_them(workdir: Path,
                                                                      shape: tuple[list[Any], bool]) -> None:
    refused_exactly_when_invalid(workdir / "volumes.yaml", *shape)
