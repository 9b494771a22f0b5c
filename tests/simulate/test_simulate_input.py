"""Traces, the generator, node edits and bad input: one line naming file, object and field, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import InputError, dns1123_problems
from kubeplace.simulate import trace as trace_module
from kubeplace.simulate.cluster import NodeEdits, edit_nodes
from kubeplace.simulate.generate import generate
from kubeplace.simulate.trace import parse_trace
from kubeplace.simulate.world import recreated_name
from tests.simulate.sim_builders import cluster, node, template, trace_doc, write


def test_a_trace_item_becomes_its_pods_with_priority_gang_and_creation_time() -> None:
    t = parse_trace(trace_doc({"arrivalSeconds": 90, "durationSeconds": 5, "template": "one", "name": "g",
                               "count": 2, "priority": 7, "gang": {"name": "g", "minMember": 2}}), "t")
    assert [a.key for a in t.arrivals] == ["default/g-0", "default/g-1"]
    pod = t.arrivals[1].pod
    assert pod["spec"]["priority"] == 7 and pod["metadata"]["creationTimestamp"] == "2023-01-01T00:01:30Z"
    assert pod["metadata"]["labels"]["kubeplace.io/gang"] == "g"
    assert pod["metadata"]["annotations"]["kubeplace.io/gang-min-member"] == "2"


@pytest.mark.parametrize(("item", "message"), [
    ({"arrivalSeconds": -1, "template": "one"}, "test: items[1]: arrivalSeconds: -1 is negative"),
    ({"arrivalSeconds": 5, "template": "one"}, "test: items[1]: arrivalSeconds: 5 is before the item before (10)"),
    ({"arrivalSeconds": 20, "template": "nope"}, "test: items[1]: template: unknown template 'nope'"),
    ({"arrivalSeconds": 20, "durationSeconds": 0, "template": "one"}, "test: items[1]: durationSeconds: 0"),
    ({"arrivalSeconds": 20, "template": "one", "name": "first"}, "test: items[1]: name: pod default/first twice"),
    ({"arrivalSeconds": 20, "template": "one", "colour": "red"}, "test: items[1]: colour: unknown field"),
])
def test_bad_trace_items_are_refused_naming_the_item(item: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as error:
        parse_trace(trace_doc({"arrivalSeconds": 10, "template": "one", "name": "first"}, item), "test")
    assert str(error.value).startswith(message)


def test_the_generator_is_seeded_and_its_traces_parse() -> None:
    one = generate(50, 0.5, 60, gang_fraction=0.3, gang_sizes=(2, 3), seed=4)
    assert one == generate(50, 0.5, 60, gang_fraction=0.3, gang_sizes=(2, 3), seed=4)
    assert one != generate(50, 0.5, 60, gang_fraction=0.3, gang_sizes=(2, 3), seed=5)
    t = parse_trace(one, "generated")
    times = [a.at for a in t.arrivals]
    assert times == sorted(times) and len({a.pod["metadata"]["name"] for a in t.arrivals}) == len(t.arrivals)
    assert any(a.pod["metadata"].get("labels", {}).get("kubeplace.io/gang") for a in t.arrivals)


def test_node_edits_add_remove_and_scale_pools() -> None:
    c = cluster(node("a0", pool="a"), node("a1", pool="a"), node("b0", pool="b"), node("c0", pool="c"))
    edited = edit_nodes(c, NodeEdits(add=(("b", 2),), remove=("c",), scale=(("a", 0.5),)))
    assert [n["metadata"]["name"] for n in edited.nodes] == ["a0", "b0", "b-added-0", "b-added-1"]
    with pytest.raises(InputError, match="unknown pool 'z'"):
        edit_nodes(c, NodeEdits(add=(("z", 1),)))


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["simulate", *args])


def _one_error_line(result: Any) -> str:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    return str(lines[0])


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    nodes = write(tmp_path / "cluster.yaml", {"apiVersion": "v1", "kind": "List", "items": [node("n0")]})
    workload = write(tmp_path / "trace.yaml", trace_doc({"arrivalSeconds": 0, "durationSeconds": 10,
                                                          "template": "one"}))
    return nodes, workload


def test_bad_input_on_the_command_line_is_one_line_and_exit_2(files: tuple[Path, Path], tmp_path: Path) -> None:
    nodes, workload = files
    unordered = write(tmp_path / "unordered.yaml", trace_doc({"arrivalSeconds": 10, "template": "one"},
                                                             {"arrivalSeconds": 1, "template": "one"}))
    assert "is before the item before" in _one_error_line(_cli("--cluster", str(nodes), "--workload", str(unordered)))
    assert "unknown pool 'gpu'" in _one_error_line(_cli("--cluster", str(nodes), "--workload", str(workload),
                                                        "--add", "gpu=2"))
    assert "--add" in _one_error_line(_cli("--cluster", str(nodes), "--workload", str(workload), "--add", "cpu"))
    empty = write(tmp_path / "sweep.yaml", {"apiVersion": "kubeplace.io/v1alpha1", "kind": "Sweep",
                                             "clusters": [str(nodes)], "traces": [], "schedulers": ["fgd"]})
    assert "traces: empty or missing axis" in _one_error_line(_cli("sweep", str(empty)))
    slow = write(tmp_path / "slow.yaml", {"apiVersion": "kubeplace.io/v1alpha1", "kind": "Sweep",
                                           "clusters": [str(nodes)], "traces": [str(workload)], "schedulers": ["fgd"],
                                           "apiLatency": -1})
    assert "apiLatency" in _one_error_line(_cli("sweep", str(slow)))
    assert "--api-latency" in _one_error_line(_cli("--cluster", str(nodes), "--workload", str(workload),
                                                   "--api-latency", "-0.1"))
    report = tmp_path / "r.html"
    _one_error_line(_cli("--cluster", str(nodes), "--workload", str(unordered), "--report", str(report)))
    assert not report.exists()


def test_the_command_prints_one_row_per_scheduler_and_writes_the_report(files: tuple[Path, Path],
                                                                       tmp_path: Path) -> None:
    nodes, workload = files
    report = tmp_path / "r.html"
    result = _cli("--cluster", str(nodes), "--workload", str(workload), "--scheduler", "kubeplace",
                  "--scheduler", "fgd", "--report", str(report))
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()[1:]]
    assert [r[1] for r in rows] == ["kubeplace", "fgd"] and all(r[2:4] == ["1", "1"] for r in rows)
    assert "<svg" in report.read_text()


HUGE = 10**400
"""A YAML integer no float holds."""


@pytest.mark.parametrize(("item", "message"), [
    ({"count": 1_000_000_000}, "items[1]: count: 1000000000 more pods make the trace more than 200000 pods"),
    ({"count": 0}, "items[1]: count: 0 is out of range"),
    ({"count": 2.5}, "items[1]: count: 2.5 is not an integer"),
    ({"count": "3"}, "items[1]: count: '3' is not an integer"),
    ({"count": HUGE}, "items[1]: count: 1000"),
    ({"arrivalSeconds": float("nan")}, "items[1]: arrivalSeconds: nan is not a number"),
    ({"arrivalSeconds": float("inf")}, "items[1]: arrivalSeconds: inf is not a number"),
    ({"arrivalSeconds": 1e300}, "items[1]: arrivalSeconds: 1e+300 is too large"),
    ({"arrivalSeconds": HUGE}, "items[1]: arrivalSeconds: 10000000000000000000... (401 characters) is too large"),
    ({"durationSeconds": 1e300}, "items[1]: durationSeconds: 1e+300 is too large"),
    ({"durationSeconds": -HUGE}, "items[1]: durationSeconds: -1000000000000000000... (402 characters) is negative"),
    ({"durationSeconds": True}, "items[1]: durationSeconds: True is not a number"),
    ({"priority": HUGE}, "items[1]: priority: 1000"),
    ({"priority": 2**31}, "items[1]: priority: 2147483648 is out of range"),
    ({"priority": 1.5}, "items[1]: priority: 1.5 is not an integer"),
    ({"gang": {"name": "g", "minMember": 2**31}}, "items[1]: gang.minMember: 2147483648 is out of range"),
    ({"gang": {"name": "g", "minMember": float("inf")}}, "items[1]: gang.minMember: inf is not an integer"),
    ({"gang": {"name": "g", "size": 2}}, "items[1]: gang.size: unknown field"),
])
def test_every_number_of_an_item_is_bounded(item: dict[str, Any], message: str) -> None:
    """NaN, infinite, negative, huge and wrongly typed numbers: one line naming the item and
    field, before any pod is built (a count of 10^9 answers at once)."""
    with pytest.raises(InputError) as error:
        parse_trace(trace_doc({"arrivalSeconds": 10, "template": "one", "name": "first"},
                              {"arrivalSeconds": 20, "template": "one", **item}), "test")
    assert str(error.value).startswith(f"test: {message}"), str(error.value)
    assert "\n" not in str(error.value)


def test_the_pods_of_a_trace_are_bounded_in_total(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_module, "MAX_TRACE_PODS", 10)
    items = [{"arrivalSeconds": 0, "template": "one", "name": f"a{k}", "count": 4} for k in range(3)]
    with pytest.raises(InputError, match=r"items\[2\]: count: 4 more pods make the trace more than 10 pods"):
        parse_trace(trace_doc(*items), "test")


@pytest.mark.parametrize(("item", "message"), [
    ({"name": "Web_1"}, 'items[0]: name: Invalid value: "Web_1": a lowercase RFC 1123 subdomain'),
    ({"name": "a" * 254}, "items[0]: name: Invalid value: \"" + "a" * 254 + '": must be no more than 253 characters'),
    ({"name": "a" * 252, "count": 2}, 'items[0]: name: Invalid value: "' + "a" * 252 + '-0": must be no more'),
    ({"name": "a" * 251, "count": 11},
     'items[0]: name: the name of its pod 10 (count 11): Invalid value: "' + "a" * 251 + '-10": must be no more'),
    ({"namespace": "Team"}, 'items[0]: namespace: Invalid value: "Team": a lowercase RFC 1123 label'),
    ({"namespace": "a.b"}, 'items[0]: namespace: Invalid value: "a.b": must not contain dots'),
    ({"namespace": "n" * 64}, "items[0]: namespace: Invalid value: \"" + "n" * 64 + '": must be no more than 63'),
    ({"namespace": 5}, "items[0]: namespace: 5 is not a string"),
    ({"template": "Big"}, 'items[0]: name: Invalid value: "Big-0": a lowercase RFC 1123 subdomain'),
    ({"gang": {"name": "Bad Name!"}}, "items[0]: gang.name: Invalid value: 'Bad Name!': a valid label"),
    ({"pod": {"metadata": {"name": "p", "namespace": "x"}, "spec": {}}, "namespace": "y"},
     "items[0]: namespace: 'y' but pod.metadata.namespace is 'x'"),
    ({"pod": {"metadata": {"name": "p"}, "spec": {"nodeName": "n0"}}}, "items[0]: pod.spec.nodeName: a trace pod"),
    ({"pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "m", "resources": {
        "requests": {"cpu": "abc"}}}]}}}, "items[0]: pod.spec.containers[0].resources.requests.cpu: invalid quantity"),
    ({"pod": {"metadata": ["p"], "spec": {}}}, "items[0]: pod: not a Pod manifest with metadata.name"),
    ({"template": "bad"}, "items[0]: templates.bad.spec.priority: 'high' is not an integer"),
])
def test_names_and_manifests_are_checked_as_the_api_server_does(item: dict[str, Any], message: str) -> None:
    """A pod the simulated API server would refuse used to be dropped silently: it never started
    and was never counted pending. Pod names are DNS-1123 subdomains (253), with the suffixes
    the trace adds; namespaces DNS-1123 labels (63); the gang's name a label value."""
    item = {"arrivalSeconds": 0, **({} if "pod" in item else {"template": "one"}), **item}
    templates = {"one": template("1"), "Big": template("1"),
                 "bad": {"spec": {**template("1")["spec"], "priority": "high"}}}
    with pytest.raises(InputError) as error:
        parse_trace(trace_doc(item, templates=templates), "test")
    assert str(error.value).startswith(f"test: {message}"), str(error.value)


def test_a_recreated_victim_gets_a_name_the_api_server_takes() -> None:
    """``<name>-r<N>`` cut to 253 characters (no '-' or '.' left before the suffix), and another
    suffix when a trace pod already has the name."""
    assert recreated_name("web", 1, lambda name: False) == "web-r1"
    long = "a" * 248 + "." + "b" * 4  # (cut to 249 characters, it ends with the dot)
    assert recreated_name(long, 12, lambda name: False) == "a" * 248 + "-r12"
    assert recreated_name("web", 1, lambda name: name == "web-r1") == "web-r1-1"
    for incarnation in (1, 99, 12345):
        assert dns1123_problems(recreated_name("x" * 253, incarnation, lambda name: False)) == []


@pytest.mark.parametrize(("extra", "message"), [
    ({"until": float("nan")}, "until: nan"),
    ({"until": float("inf")}, "until: inf"),
    ({"until": 0}, "until: 0"),
    ({"until": 1e12}, "until: 1000000000000.0"),
    ({"until": "soon"}, "until: 'soon'"),
    ({"apiLatency": float("nan")}, "apiLatency: nan"),
    ({"seeds": [-1]}, "seeds[0]: -1 is out of range"),
    ({"seeds": [0, 2**31]}, "seeds[1]: 2147483648 is out of range"),
    ({"seeds": [1.5]}, "seeds[0]: 1.5 is not an integer"),
    ({"seeds": list(range(101)), "schedulers": ["fgd"] * 100},
     "its axes (clusters x traces x schedulers x configs x seeds) make 1 x 1 x 100 x 1 x 101 = 10100 cases"),
])
def test_every_number_of_a_sweep_is_bounded(files: tuple[Path, Path], tmp_path: Path, extra: dict[str, Any],
                                            message: str) -> None:
    nodes, workload = files
    sweep = write(tmp_path / "sweep.yaml", {"apiVersion": "kubeplace.io/v1alpha1", "kind": "Sweep",
                                             "clusters": [str(nodes)], "traces": [str(workload)],
                                             "schedulers": ["fgd"], **extra})
    report = tmp_path / "r.html"
    line = _one_error_line(_cli("sweep", str(sweep), "--report", str(report)))
    assert line.startswith(f"error: {sweep}: {message}"), line
    assert not report.exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--add", "cpu=1000000000"), "error: {nodes}: --add: cpu=1000000000 would make the cluster 1000000001 nodes"),
    (("--scale-pool", "cpu=1e300"), "error: {nodes}: --scale-pool: cpu=1e+300 would make the cluster 1e+300 nodes"),
    (("--scale-pool", "cpu=nan"), "error: --scale-pool: bad value 'cpu=nan'"),
    (("--scale-pool", "cpu=inf"), "error: --scale-pool: bad value 'cpu=inf'"),
    (("--seed", "-1"), "error: --seed: -1 is out of range"),
    (("--seed", "0,4294967296"), "error: --seed: 4294967296 is out of range"),
    (("--until", "nan"), "error: Invalid value for '--until'"),
    (("--until", "1e12"), "error: Invalid value for '--until'"),
])
def test_the_command_line_numbers_are_bounded(files: tuple[Path, Path], tmp_path: Path, args: tuple[str, ...],
                                              message: str) -> None:
    nodes, workload = files  # (one node, of the pool cpu)
    report = tmp_path / "r.html"
    line = _one_error_line(_cli("--cluster", str(nodes), "--workload", str(workload), "--report", str(report),
                                "--scheduler", "fgd", *args))
    assert line.startswith(message.format(nodes=nodes)), line
    assert not report.exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--jobs", "300000"), "error: --jobs: 300000 jobs of up to 1 pods make up to 300000 pods"),
    (("--jobs", "10", "--gang-fraction", "0.5", "--gang-sizes", "200000"), "error: --gang-sizes: 10 jobs of up"),
    (("--seed", "-1"), "error: Invalid value for '--seed'"),
    (("--shape", "x=1/1Gi:nan"), "error: --shape: bad shape 'x=1/1Gi:nan'"),
    (("--shape", "x=1/1Gi:inf"), "error: --shape: bad shape 'x=1/1Gi:inf'"),
    (("--shape", "x=lots/1Gi:1"), "error: --shape: bad shape 'x=lots/1Gi:1'"),
    (("--shape", "Big Job=1/1Gi:1"), "error: --shape: bad shape 'Big Job=1/1Gi:1'"),
])
def test_the_generator_numbers_are_bounded(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    out = tmp_path / "trace.yaml"
    line = _one_error_line(_cli("generate", "-o", str(out), *args))
    assert line.startswith(message), line
    assert not out.exists()


@pytest.mark.parametrize(("objects", "message"), [
    ([{**node("n1"), "metadata": {"name": "N_1"}}], 'Node N_1: metadata.name: Invalid value: "N_1"'),
    ([{**node("n1"), "status": {"allocatable": {"cpu": "lots"}}}], "Node n1: status.allocatable.cpu: invalid quantity"),
    ([node("n0")], "Node n0: duplicate Node"),
    ([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "run"}, "spec": {"nodeName": "n0", "containers": [
        {"name": "m", "resources": {"requests": {"cpu": "x"}}}]}}],
     "Pod default/run: spec.containers[0].resources.requests.cpu: invalid quantity"),
])
def test_the_cluster_is_read_as_plan_reads_it(files: tuple[Path, Path], tmp_path: Path, objects: list[Any],
                                              message: str) -> None:
    """A node or running pod the simulated store cannot parse used to be dropped without a word."""
    _, workload = files
    snapshot = write(tmp_path / "bad.yaml", {"apiVersion": "v1", "kind": "List", "items": [node("n0"), *objects]})
    line = _one_error_line(_cli("--cluster", str(snapshot), "--workload", str(workload), "--scheduler", "fgd"))
    assert line.startswith(f"error: {snapshot}: {message}"), line
