"""Traces, the generator, node edits and bad input: one line naming file, object and field, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.errors import InputError
from kubeplace.simulate.cluster import NodeEdits, edit_nodes
from kubeplace.simulate.generate import generate
from kubeplace.simulate.trace import parse_trace
from tests.simulate.sim_builders import cluster, node, trace_doc, write


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
