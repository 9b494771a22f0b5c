"""Bad input through the `kubeplace` command: one line naming file, object and field, exit 2,
nothing written; usage errors in one line; names escaped; every printed plan verified."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.plan.verify import Violation
from tests.builders import node, pod
from tests.cli.test_cli_plan import DEMO, FAST, run, write_objects
from tests.kube.fake_apiserver import FakeApiServer, serving
from tests.kube.test_kube_client import write_kubeconfig

HEADER = "apiVersion: kubeplace.io/v1alpha1\nkind: PlacementConfiguration\n"


def assert_one_line_exit_2(code: int, out: str, err: str, *parts: str) -> None:
    assert code == 2, (out, err)
    assert out == "" and "Traceback" not in err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for part in parts:
        assert part in err, err


# Each ended in a traceback (OverflowError, RecursionError...) or was accepted, before.
BAD_OBJECTS: dict[str, tuple[list[Any], str]] = {
    "cpu 1e400": ([pod("p").cpu("1e400")], "Pod default/p: spec.containers[0].resources.requests.cpu: "
                  "quantity '1e400' is out of range (expected at most 2^53-1 milli-CPU"),
    "cpu 1Ei": ([pod("p").cpu("1Ei")], "spec.containers[0].resources.requests.cpu: quantity '1Ei' is out of range"),
    "allocatable 100Ei": ([node("big").memory("100Ei")],
                          "Node big: status.allocatable.memory: quantity '100Ei' is out of range"),
    "pods 1e23": ([node("big").allocatable("pods", "1e23")], "Node big: status.allocatable.pods"),
    "bound pods summing past 2^63": ([pod("b").memory("4Ei").on("n1")], "spec.containers[0].resources.requests.memory"),
    "priority 1e23": ([pod("p").priority(10**23)],
                      "Pod default/p: spec.priority: 100000000000000000000000 is out of range"),
    "taint without effect": ([node("t").taint("gpu", effect="")], "Node t: spec.taints[0].effect: missing effect"),
    "taint with a bad effect": ([node("t").taint("gpu", effect="NoScheduled")],
                                "spec.taints[0].effect: unsupported effect 'NoScheduled'"),
    "toleration Exists with a value": ([pod("p").tolerate("gpu", "yes", operator="Exists")],
                                       "spec.tolerations[0].value: value must be empty when operator is 'Exists'"),
    "restartPolicy always": ([pod("p").spec("initContainers", [{"name": "i", "restartPolicy": "always"}])],
                             "spec.initContainers[0].restartPolicy: unsupported restartPolicy 'always'"),
    "gang-min-member -3": ([pod("p").label("kubeplace.io/gang", "g").annotation("kubeplace.io/gang-min-member", "-3")],
                           "metadata.annotations.kubeplace.io/gang-min-member: got '-3'"),
}


@pytest.mark.parametrize("case", sorted(BAD_OBJECTS))
def test_bad_objects_are_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    objects, message = BAD_OBJECTS[case]
    path = write_objects(tmp_path, node("n1").cpu("8").memory("8Gi"), *objects)
    code, out, err = run("plan", str(path), *FAST)
    assert_one_line_exit_2(code, out, err, f"error: {path}: ", message)


def test_an_empty_snapshot_says_there_are_no_nodes(tmp_path: Path) -> None:
    # exit 0 and an empty summary before
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    code, out, err = run("plan", str(empty))
    assert_one_line_exit_2(code, out, err, f"error: {empty}: no nodes in the snapshot, so nothing can be placed")
    only_pods = write_objects(tmp_path, pod("p").cpu("1"), name="pods.yaml")
    code, out, err = run("plan", str(only_pods), str(empty))
    assert_one_line_exit_2(code, out, err, f"{only_pods}, {empty}: no nodes in the snapshot")


def test_dev_null_is_not_called_missing() -> None:
    code, out, err = run("plan", "/dev/null")
    assert_one_line_exit_2(code, out, err, "error: /dev/null: not a regular file: a character device")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # the solver flags (nan/inf time limit or gap, seeds, --workers 100000) are validated as the
        # configuration file is: tests/cli/test_cli_config.py
        (["--time-limit", "five"], "Invalid value for '--time-limit': 'five' is not a valid float"),
        (["--bogus"], "No such option '--bogus'"),
        (["-o", "xml"], "'xml' is not one of 'table', 'wide', 'json', 'yaml'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    # click's usage block was several lines, and nan/inf were accepted (the solver then skipped)
    code, out, err = run("plan", str(DEMO), *args)
    assert_one_line_exit_2(code, out, err, message, "(see 'main plan --help')")


def test_top_level_usage_errors_are_one_line_too() -> None:
    assert_one_line_exit_2(*run("nosuchcommand"), "No such command 'nosuchcommand'")
    assert_one_line_exit_2(*run("--bogus"), "No such option '--bogus'")
    code, _, err = run()
    assert code == 2 and "Commands:" in err  # no arguments still shows the whole help, as click does


def test_names_are_escaped_in_tables_and_messages(tmp_path: Path) -> None:
    # a pod name with terminal escapes cleared the screen of whoever ran `plan`; such a name is now
    # refused as the API server refuses it (in one escaped line), and text from annotations (a gang's
    # name in the reason) is escaped in tables
    gang = "g\x1b[2J[bold]x[/]"
    path = write_objects(tmp_path, node("n1").cpu("1").memory("8Gi"),
                         pod("p").cpu("2").annotation("scheduling.k8s.io/group-name", gang))
    code, out, err = run("plan", str(path), *FAST)
    assert code == 0, err
    assert "\x1b" not in out and "g\\x1b[2J[bold]x[/]" in out
    path = write_objects(tmp_path, node("n1").cpu("1").memory("8Gi"), pod("p\x1b]0;pwned\x07").cpu("1"))
    code, out, err = run("plan", str(path), *FAST)
    assert_one_line_exit_2(code, out, err, "Pod default/p\\x1b]0;pwned\\x07: metadata.name: Invalid value: ")
    assert "\x1b" not in err and "\x07" not in err


def test_every_printed_plan_is_verified_and_says_so() -> None:
    code, out, _ = run("plan", str(DEMO), *FAST)
    assert code == 0
    assert "Verified: 32 placement(s) re-checked by the independent verifier, none refused" in out
    code, out, _ = run("plan", str(DEMO), "-o", "json", *FAST)
    assert code == 0 and json.loads(out)["summary"]["verified"] is True


def refuse(*_: Any) -> list[Violation]:
    """A stand-in verifier that refuses every plan."""
    return [Violation("default", "web-1", "n1", "Capacity", "needs 2 cpu, 1 free")]


def test_a_plan_the_verifier_refuses_is_a_loud_bug_not_a_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kubeplace.plan.pipeline.verify_plan", refuse)
    for output in ("table", "json"):
        code, out, err = run("plan", str(DEMO), "-o", output, *FAST)
        assert code == 3 and out == ""
        lines = err.splitlines()
        assert lines[0] == "verifier: default/web-1 -> n1: needs 2 cpu, 1 free"
        assert lines[1].startswith("error: the plan kubeplace made fails its independent verifier (1 violation(s)); "
                                   "this is a bug in kubeplace")


# --- configuration files -----------------------------------------------------------------------


def config_file(tmp_path: Path, body: bytes) -> Path:
    path = tmp_path / "config.yaml"
    path.write_bytes(HEADER.encode() + body)
    return path


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"solver: {seed: 100000000000000000000}\n",
         "solver.seed: expected an integer from 0 to 2147483647, got 100000000000000000000"),
        (b"profiles: caf\xe9\n", ":3: not UTF-8 text: byte 0xe9 cannot be decoded"),
        (b"profiles: " + b"[" * 1000 + b"]" * 1000 + b"\n", "malformed YAML: exceeded maximum nesting depth"),
        (b"x: " + b"[" * 900 + b"]" * 900 + b"\n", "x: unknown field"),  # RecursionError before
        # TypeError tracebacks before (found by the fuzz test)
        (b"profiles: [{plugins: {disabled: [[1]]}}]\n", "profiles[0].plugins.disabled[0]: unknown plugin '[1]'"),
        (b"profiles: [{pluginConfig: [{name: [0]}]}]\n", "profiles[0].pluginConfig[0].name: unknown plugin '[0]'"),
        (b"profiles: [{pluginConfig: [{name: Balance, args: {resources: [{weight: 1}]}}]}]\n",
         "profiles[0].pluginConfig[0].args.resources[0].name: missing field"),
        (b"solver: {timeLimitSeconds: 1" + b"0" * 400 + b"}\n", "solver.timeLimitSeconds: expected float, got 1000"),
        (b"solver: {workers: 1}\nsolver: {workers: 2}\n", ':4: solver: mapping key "solver" already defined at line 3'),
    ],
)
@pytest.mark.parametrize("command", ["plan", "config-check"])
def test_bad_configuration_files_are_one_line(tmp_path: Path, body: bytes, message: str, command: str) -> None:
    path = config_file(tmp_path, body)
    args = ["plan", str(DEMO), "--config", str(path)] if command == "plan" else ["config-check", str(path)]
    assert_one_line_exit_2(*run(*args), f"error: {path}", message)


def test_a_plugin_whose_import_raises_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('no licence server')\n")
    path = config_file(tmp_path, b"userPlugins:\n- {name: X, import: 'broken_plugin:FACTORY'}\n")
    message = "userPlugins[0].import: cannot import broken_plugin:FACTORY: RuntimeError: no licence server"
    assert_one_line_exit_2(*run("config-check", str(path)), message)


# --- plan files for `bind --plan` -----------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, FakeApiServer]]:
    """A fake API server with one node and one pending pod, and a kubeconfig for it."""
    api = FakeApiServer([node("n1").cpu("4").memory("8Gi").manifest()],
                        [pod("web").cpu("1").manifest()], [])
    with serving(api) as url:
        yield write_kubeconfig(tmp_path / "kubeconfig", url), api


def bind_plan(kubeconfig: Path, plan: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["bind", "--kubeconfig", str(kubeconfig), "--plan", str(plan), "-y"],
                                catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def plan_document(**placement: Any) -> dict[str, Any]:
    return {"apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementPlan",
            "placements": [{"namespace": "default", "name": "web", "node": "n1", **placement}]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (yaml.safe_dump(plan_document(gpus="01")).encode(), "placements[0].gpus: got '01' (expected a list of device"),
        (yaml.safe_dump(plan_document(gpus=[True])).encode(), "placements[0].gpus: got [True]"),
        (yaml.safe_dump(plan_document(uid=7)).encode(), "placements[0].uid: 7 is not a string"),
        (json.dumps({**plan_document(), "placements": plan_document()["placements"] * 2}).encode(),
         "placements[1].name: pod default/web placed twice (also placements[0])"),
        (b"kind: PlacementPlan\nsource: caf\xe9\n", ":2: not UTF-8 text"),
        (b"kind: PlacementPlan\nx: " + b"[" * 900 + b"]" * 900 + b"\n", "placements: missing or not a list"),
        (b"", "kind: not a kubeplace plan"),
        (b"kind: PlacementPlan\nplacements:\n- {namespace: default, name: web, node: n1, node: n2}\n",
         ':3: placements[0].node: mapping key "node" already defined at line 3'),
    ],
)
def test_bad_plan_files_are_one_line_and_bind_nothing(cluster: tuple[Path, FakeApiServer], tmp_path: Path,
                                                      body: bytes, message: str) -> None:
    kubeconfig, api = cluster
    path = tmp_path / "plan.yaml"
    path.write_bytes(body)
    assert_one_line_exit_2(*bind_plan(kubeconfig, path), f"error: {path}", message)
    assert not [r for r in api.requests if r[0] == "POST"]


def test_a_good_plan_file_binds(cluster: tuple[Path, FakeApiServer], tmp_path: Path) -> None:
    kubeconfig, api = cluster
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_document()))
    code, _, err = bind_plan(kubeconfig, path)
    assert code == 0, err
    assert [r[1] for r in api.requests if r[0] == "POST"] == ["/api/v1/namespaces/default/pods/web/binding"]


def test_bind_without_a_plan_file_refuses_a_plan_made_now_that_the_verifier_refuses(
        cluster: tuple[Path, FakeApiServer], monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig, api = cluster
    monkeypatch.setattr("kubeplace.plan.pipeline.verify_plan", refuse)
    result = CliRunner().invoke(main, ["bind", "--kubeconfig", str(kubeconfig), "-y", *FAST],
                                catch_exceptions=False)
    assert result.exit_code == 3 and result.stdout == ""
    assert "this is a bug in kubeplace" in result.stderr
    assert not [r for r in api.requests if r[0] == "POST"]


def test_the_skipped_kinds_note_is_escaped_and_a_snapshot_of_them_alone_says_so(tmp_path: Path) -> None:
    odd = tmp_path / "odd.yaml"
    odd.write_text(yaml.safe_dump({"apiVersion": "x.io/v1", "kind": "Foo\x1b[31m", "metadata": {"name": "a"}}))
    assert_one_line_exit_2(*run("plan", str(odd)), "no nodes in the snapshot, so nothing can be placed; "
                           "skipped 1 object of kinds placement does not read: 1 Foo\\x1b[31m.x.io")
    code, _, err = run("plan", str(odd), str(DEMO), *FAST)
    assert code == 0 and err == "note: skipped 1 object of kinds placement does not read: 1 Foo\\x1b[31m.x.io\n"
