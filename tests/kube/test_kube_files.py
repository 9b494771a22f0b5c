from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeplace.kube.errors import InputError
from kubeplace.kube.files import load_objects, load_snapshot, read_document
from kubeplace.kube.objects import SpecRule
from tests.builders import NodeBuilder, PodBuilder, namespace, node, pod, snapshot_of

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"


def write_yaml(path: Path, *documents: Any) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def as_list(*manifests: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(manifests)}


CLUSTER: list[NodeBuilder | PodBuilder] = [
    node("n1").cpu("4"),
    node("n2").cpu("8"),
    pod("a").cpu("1"),
    pod("b").cpu("1").on("n1"),
]


def test_kubectl_list_file(tmp_path: Path) -> None:
    file = write_yaml(tmp_path / "dump.yaml", as_list(*(item.manifest() for item in CLUSTER)))
    snapshot = load_snapshot([file])
    assert [n.name for n in snapshot.nodes] == ["n1", "n2"]
    assert [p.key for p in snapshot.pending] == ["default/a"]
    assert [p.key for p in snapshot.bound] == ["default/b"]
    assert snapshot == snapshot_of(*CLUSTER)
    assert snapshot.pending[0].source == str(file)


def test_multi_document_yaml_json_and_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write_yaml(tmp_path / "nodes.yml", *(item.manifest() for item in CLUSTER[:2]))
    (tmp_path / "sub" / "pods.json").write_text(json.dumps(as_list(*(item.manifest() for item in CLUSTER[2:]))))
    (tmp_path / "notes.txt").write_text("not a snapshot: ignored")
    assert load_snapshot([tmp_path]) == snapshot_of(*CLUSTER)


def test_typed_lists_give_their_items_a_kind(tmp_path: Path) -> None:
    items = [node("n1").manifest()]
    for item in items:
        del item["kind"], item["apiVersion"]
    file = write_yaml(tmp_path / "nodes.yaml", {"apiVersion": "v1", "kind": "NodeList", "items": items})
    assert [n.name for n in load_snapshot([file]).nodes] == ["n1"]


def test_pending_filter(tmp_path: Path) -> None:
    cluster: list[NodeBuilder | PodBuilder] = [
        node("n1").cpu("4"),
        pod("ours"),
        pod("gated").gate("quota"),
        pod("terminating").deleting(),
        pod("other").scheduler("default-scheduler"),
        pod("done").phase("Succeeded"),
        pod("failed").phase("Failed"),
        pod("bound").on("n1"),
        pod("bound-elsewhere").on("gone"),
        pod("finished-on-node").on("n1").phase("Succeeded"),
        pod("terminating-on-node").on("n1").deleting(),
        pod("theirs-on-node").on("n1").scheduler("default-scheduler"),
    ]
    snapshot = load_snapshot([write_yaml(tmp_path / "c.yaml", *(item.manifest() for item in cluster))])
    assert [p.name for p in snapshot.pending] == ["ours"]
    assert [p.name for p in snapshot.bound] == ["bound", "terminating-on-node", "theirs-on-node"]


def test_scheduler_namespace_and_selector_filters(tmp_path: Path) -> None:
    cluster: list[NodeBuilder | PodBuilder] = [
        pod("a", ns="team-a").label("app", "web"),
        pod("b", ns="team-a").label("app", "batch"),
        pod("c", ns="team-b").label("app", "web"),
        pod("d", ns="team-b").label("app", "web").scheduler("mine"),
        pod("e", ns="team-c").label("app", "web").on("n1"),
        node("n1"),
    ]
    file = write_yaml(tmp_path / "c.yaml", *(item.manifest() for item in cluster))
    keys = [p.key for p in load_snapshot([file], namespaces={"team-a", "team-b"}, selector="app=web").pending]
    assert keys == ["team-a/a", "team-b/c"]
    assert [p.key for p in load_snapshot([file], scheduler_name="mine").pending] == ["team-b/d"]
    # usage is never filtered
    assert [p.key for p in load_snapshot([file], namespaces={"team-a"}).bound] == ["team-c/e"]


def test_namespace_labels(tmp_path: Path) -> None:
    file = write_yaml(tmp_path / "ns.yaml", namespace("team-a").label("tenant", "a").manifest())
    assert load_snapshot([file]).namespace_labels == {
        "team-a": {"kubernetes.io/metadata.name": "team-a", "tenant": "a"}
    }


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels: {a: b\n")
    with pytest.raises(InputError) as caught:
        load_snapshot([file])
    assert caught.value.file == str(file)
    assert caught.value.line == 6
    assert str(caught.value).startswith(f"{file}:6: malformed YAML")


DUPLICATE_CPU = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
- apiVersion: v1
  kind: Pod
  metadata: {name: web, namespace: shop}
  spec:
    containers:
    - name: main
      resources:
        requests: {cpu: "100", cpu: "1"}
"""


@pytest.mark.parametrize(("text", "message"), [
    (DUPLICATE_CPU, ':14: Pod shop/web: spec.containers[0].resources.requests.cpu: mapping key "cpu" already '
                    "defined at line 14"),
    ("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels: &l {a: b}\nmetadata: {name: n2}\n",
     ':6: Node n2: metadata: mapping key "metadata" already defined at line 3'),  # anchors: the full loader
    ('{"apiVersion": "v1", "kind": "Node",\n "metadata": {"name": "n1", "name": "n2"}}\n',
     ':2: Node n2: metadata.name: mapping key "name" already defined at line 2'),  # JSON
])
def test_a_key_twice_in_a_mapping_names_file_line_object_and_field(tmp_path: Path, text: str, message: str) -> None:
    """The API server's reader refuses it; PyYAML and json.loads kept the last value silently."""
    file = tmp_path / "dump.yaml"
    file.write_text(text)
    with pytest.raises(InputError) as caught:
        load_objects([file])
    assert str(caught.value) == f"{file}{message}"


def test_a_merged_key_may_be_overridden(tmp_path: Path) -> None:
    file = tmp_path / "merged.yaml"
    file.write_text("base: &b {x: 1, y: 2}\nmerged:\n  <<: *b\n  x: 3\n")
    assert read_document(file) == {"base": {"x": 1, "y": 2}, "merged": {"x": 3, "y": 2}}


def test_floats_are_yaml_1_2_floats(tmp_path: Path) -> None:
    """``1e3`` is a float to the API server's reader (YAML 1.2); PyYAML's YAML 1.1 made it a string."""
    file = tmp_path / "numbers.yaml"
    file.write_text("a: 1e3\nb: 1.0e3\nc: -2E-3\nd: .5\ne: 1.5\nf: 12\ng: 0x10\nh: '1e3'\ni: 1e400\nj: .inf\n")
    assert read_document(file) == {"a": 1000.0, "b": 1000.0, "c": -0.002, "d": 0.5, "e": 1.5, "f": 12, "g": 16,
                                   "h": "1e3", "i": "1e400", "j": float("inf")}
    assert isinstance(read_document(file)["a"], float)


def test_unknown_kind(tmp_path: Path) -> None:
    file = write_yaml(tmp_path / "x.yaml", {"apiVersion": "v1", "kind": "Pods", "metadata": {"name": "p"}})
    with pytest.raises(InputError, match=r"x.yaml: Pods p: kind: unknown kind 'Pods'"):
        load_snapshot([file])


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"kind": "Pod", "metadata": {"name": "p"}}, "Pod default/p: apiVersion: missing apiVersion"),
        ({"apiVersion": "v1", "metadata": {"name": "p"}}, "missing kind"),
        (["a", "list"], "list is not a Kubernetes object"),
        ("just text", "str is not a Kubernetes object"),
    ],
)
def test_documents_that_are_not_objects(tmp_path: Path, document: Any, problem: str) -> None:
    file = write_yaml(tmp_path / "x.yaml", document)
    with pytest.raises(InputError, match=problem):
        load_objects([file])


def test_bad_item_in_list_names_its_index(tmp_path: Path) -> None:
    file = write_yaml(tmp_path / "x.yaml", as_list(node("n1").manifest(), {"metadata": {"name": "x"}}))
    with pytest.raises(InputError, match=r"items\[1\].apiVersion: missing apiVersion"):
        load_objects([file])


def test_companion_kinds_are_ignored_by_the_snapshot_but_returned_by_load_objects(tmp_path: Path) -> None:
    pod_group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 2},
    }
    file = write_yaml(tmp_path / "x.yaml", pod_group, pod("a").manifest())
    assert [p.name for p in load_snapshot([file]).pending] == ["a"]
    assert [(obj["kind"], source) for obj, source in load_objects([file])] == [
        ("PodGroup", str(file)),
        ("Pod", str(file)),
    ]


def test_duplicates(tmp_path: Path) -> None:
    first = write_yaml(tmp_path / "a.yaml", node("n1").manifest(), pod("p").manifest())
    second = write_yaml(tmp_path / "b.yaml", node("n1").manifest())
    with pytest.raises(InputError, match=rf"b.yaml: Node n1: duplicate node \(first defined in {first}\)"):
        load_snapshot([first, second])
    write_yaml(second, pod("p").manifest())
    with pytest.raises(InputError, match=r"b.yaml: Pod default/p: duplicate pod"):
        load_snapshot([first, second])


def test_missing_path() -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        load_snapshot([Path("/nonexistent/cluster.yaml")])


def test_bad_selector_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="invalid selector"):
        load_snapshot([write_yaml(tmp_path / "x.yaml", pod("p").manifest())], selector="app in web")


def test_demo_fixture() -> None:
    snapshot = load_snapshot([DEMO])
    assert len(snapshot.nodes) == 12
    assert len(snapshot.pending) == 40
    assert len(snapshot.bound) == 9
    assert {"team-a", "team-b"} <= set(snapshot.namespace_labels)
    pending = {p.key: p for p in snapshot.pending}
    assert pending["default/cache-0"].spec_rules == {SpecRule.REQUIRED_POD_ANTI_AFFINITY}
    assert pending["default/web-5d8f7c9b6-p000"].priority == 1000
    assert pending["default/etl-nightly-0"].requests["cpu"] == 2100
    assert pending["team-b/api-7b9d4-new00"].requests["cpu"] == 1500
    assert any(n.unschedulable for n in snapshot.nodes)


TRICKY_YAML = """\
plain: text
quoted: "true"
single: 'null'
boolean: yes
off: off
nothing: ~
empty:
number: 0x1F
octal: 012
float: 1.5e3
sexagesimal: 1:20
date: 2024-05-01
time: 2024-05-01T10:00:00Z
tagged: !!str 123
folded: >
  a
  b
literal: |
  x
list: [1, "2", three, {a: b}]
nested: {k: [ {x: 1} ]}
1: int key
---
---
second: document
"""

ALIASED_YAML = """\
base: &base {a: 1, b: 2}
merged:
  <<: *base
  c: 3
tagged: !!int "7"
"""


@pytest.mark.parametrize("text", [TRICKY_YAML, ALIASED_YAML], ids=["plain", "anchors-and-tags"])
def test_fast_yaml_path_gives_what_the_full_loader_gives(text: str) -> None:
    from kubeplace.kube.files import _Loader, _parse_documents

    assert _parse_documents(text, "x.yaml") == list(yaml.load_all(text, Loader=_Loader))


def test_demo_fixture_parses_as_safe_load_does() -> None:
    from kubeplace.kube.files import _parse_documents

    text = (DEMO / "cluster.yaml").read_text()
    assert _parse_documents(text, "cluster.yaml") == list(yaml.safe_load_all(text))


def test_invalid_json_falls_back_to_yaml_errors_with_a_line(tmp_path: Path) -> None:
    file = tmp_path / "x.json"
    file.write_text('{"apiVersion": "v1",\n "kind": "Node",\n "metadata": {"name": "n1"\n}\n')
    with pytest.raises(InputError, match="malformed YAML") as caught:
        load_objects([file])
    assert caught.value.line is not None


def test_dev_null_is_named_for_what_it_is() -> None:
    # it was called "no such file or directory"
    with pytest.raises(InputError) as caught:
        load_objects([Path("/dev/null")])
    assert str(caught.value) == "/dev/null: not a regular file: a character device (expected a YAML or JSON file)"


def test_a_pipe_is_read_like_a_file(tmp_path: Path) -> None:
    """`kubeplace plan <(kubectl get nodes,pods -A -o yaml)` reads a pipe."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    text = yaml.safe_dump(node("n1").manifest())
    writer = threading.Thread(target=fifo.write_text, args=(text,), daemon=True)
    writer.start()
    try:
        assert [obj["metadata"]["name"] for obj, _ in load_objects([fifo])] == ["n1"]
    finally:
        if writer.is_alive():  # the pipe was never opened for reading: let the writer's open() return
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(timeout=10)


def test_non_utf8_text_names_file_line_and_byte(tmp_path: Path) -> None:
    file = tmp_path / "latin1.yaml"
    file.write_bytes(b"apiVersion: v1\nkind: Node\nmetadata: {name: caf\xe9}\n")
    with pytest.raises(InputError) as caught:
        load_objects([file])
    assert str(caught.value) == (f"{file}:3: not UTF-8 text: byte 0xe9 cannot be decoded "
                                 "(expected a UTF-8 YAML or JSON file)")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig"])
def test_byte_order_marks_are_read(tmp_path: Path, encoding: str) -> None:
    """PowerShell's `kubectl get ... > file` writes UTF-16 with a byte-order mark."""
    file = tmp_path / "x.yaml"
    file.write_bytes(yaml.safe_dump(node("n1").manifest()).encode(encoding))
    assert [obj["kind"] for obj, _ in load_objects([file])] == ["Node"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply to read"),  # a RecursionError in json before
        ("a: " + "[" * 5000 + "]" * 5000, "malformed YAML: exceeded maximum nesting depth"),
        ("a: &x 1\nb: " + "[" * 5000 + "]" * 5000, "malformed YAML: exceeded maximum nesting depth"),
        ("a: " + "1" * 5000, "malformed YAML: Exceeds the limit (4300 digits) for integer string conversion"),
    ],
)
def test_pathological_documents_are_input_errors(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "x.yaml"
    file.write_text(text)
    with pytest.raises(InputError) as caught:
        load_objects([file])
    assert message in str(caught.value) and str(file) in str(caught.value)


def test_read_document_reads_one_document_through_the_same_guarded_path(tmp_path: Path) -> None:
    """Configuration and plan files: pure-Python safe_load ended in a RecursionError at 900 levels."""
    file = tmp_path / "config.yaml"
    file.write_text("a: " + "[" * 900 + "]" * 900 + "\n")
    assert read_document(file) == {"a": nested_lists(900)}
    file.write_text("a: 1\n---\nb: 2\n")
    with pytest.raises(InputError, match=r"2 YAML documents \(expected a single document\)"):
        read_document(file)
    file.write_text("")
    assert read_document(file) is None


def nested_lists(depth: int) -> Any:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_control_character_is_a_one_line_yaml_error(tmp_path: Path) -> None:
    file = tmp_path / "x.yaml"
    file.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: a\x00b}\n")
    with pytest.raises(InputError) as caught:
        load_objects([file])
    assert "\n" not in str(caught.value) and "unacceptable character #x0000" in str(caught.value)
