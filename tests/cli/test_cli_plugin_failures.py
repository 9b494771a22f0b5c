"""A user plugin whose code raises (or answers what its contract does not allow) in any hook never
ends a plan in a traceback: a hook about one pod fails that pod's class ("plugin X failed: ..." is
its pods' whole reason, every other pod is planned), a hook about one node fails that node for the
plugin, a hook about the whole problem (or the build, the import, the registration) is one line
naming the plugin, exit 2 (models/plugin_guard.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from tests.builders import node, pod

HEADER = "apiVersion: kubeplace.io/v1alpha1\nkind: PlacementConfiguration\n"
FAST = ("--time-limit", "5", "--workers", "1")

PLUGIN = '''
from dataclasses import dataclass
import numpy as np
from kubeplace.plugins import CONSTRAINT, FILTER, SCORE, PluginFactory


@dataclass(frozen=True)
class Args:
    hook: str = ""
    answer: str = "raise"


def broken(self, hook, what):
    """The wrong answer chosen by the args, as a 1-tuple, when ``hook`` is the one chosen and
    ``what`` is special; () otherwise."""
    if self.args.hook != hook or not what:
        return ()
    if self.args.answer == "raise":
        raise ValueError(f"{hook} broke")
    return ({"none": None, "list": [1], "short": np.ones(0, dtype=np.bool_), "int": 3}[self.args.answer],)


@dataclass(frozen=True)
class Broken:
    args: Args
    name: str = "Broken"
    reason: str = "node(s) refused by Broken"

    def pod_key(self, pod):
        special = pod.labels.get("special") == "true"
        out = broken(self, "pod_key", special)
        return out[0] if out else special

    def node_key(self, node):
        special = node.labels.get("special") == "true"
        out = broken(self, "node_key", special)
        return out[0] if out else node.name

    def node_key_basis(self):
        broken(self, "node_key_basis", True)
        return self.args

    def filter(self, pod, nodes):
        out = broken(self, "filter", pod.labels.get("special") == "true")
        return out[0] if out else np.ones(len(nodes), dtype=np.bool_)

    def rejection(self, pod):
        out = broken(self, "rejection", pod.labels.get("special") == "true")
        return out[0] if out else ""

    def node_reasons(self, pod, nodes):
        out = broken(self, "node_reasons", True)
        return out[0] if out else [("refused",) for _ in nodes]

    def unmodelled(self, pod):
        out = broken(self, "unmodelled", pod.labels.get("special") == "true")
        return out[0] if out else ()

    def terms(self, problem):
        out = broken(self, "terms", True)
        return out[0] if out else ()

    def constraints(self, view):
        out = broken(self, "constraints", True)
        return out[0] if out else ()


def _build(args, ctx):
    return Broken(args)


FACTORY = PluginFactory("Broken", (FILTER, SCORE, CONSTRAINT), Args, _build)
'''


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def module_name(tmp_path: Path) -> str:
    """A module name of the test's own: Python keeps every module it imported once."""
    return "broken_" + "".join(c if c.isalnum() else "_" for c in tmp_path.name)


def setup(tmp_path: Path, hook: str, answer: str = "raise", plugin: str = PLUGIN) -> tuple[Path, Path]:
    (tmp_path / f"{module_name(tmp_path)}.py").write_text(plugin)
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + f"userPlugins:\n- {{name: Broken, import: '{module_name(tmp_path)}:FACTORY'}}\n"
                      "profiles:\n- plugins: {enabled: [Broken]}\n"
                      f"  pluginConfig: [{{name: Broken, args: {{hook: '{hook}', answer: {answer}}}}}]\n")
    return cluster_file(tmp_path), config


def cluster_file(tmp_path: Path) -> Path:
    """Two nodes (n2 special) and two pending pods, 'odd' special."""
    cluster = tmp_path / "cluster.yaml"
    objects = [node("n1").cpu("4").memory("8Gi"), node("n2").cpu("4").memory("8Gi").label("special", "true"),
               pod("plain").cpu("1"), pod("odd").cpu("1").label("special", "true")]
    cluster.write_text(yaml.safe_dump_all([o.manifest() for o in objects]))
    return cluster


def planned(tmp_path: Path, hook: str, answer: str = "raise") -> dict[str, Any]:
    cluster, config = setup(tmp_path, hook, answer)
    code, out, err = run("plan", str(cluster), "--config", str(config), "-o", "json", *FAST)
    assert code in (0, 1) and "Traceback" not in out + err, (code, out, err)
    return dict(json.loads(out))


@pytest.mark.parametrize("hook", ["pod_key", "filter", "rejection", "unmodelled"])
@pytest.mark.parametrize("answer", ["raise", "none", "list", "short", "int"])
def test_a_hook_about_one_pod_fails_that_pods_class_only(tmp_path: Path, hook: str, answer: str) -> None:
    plan = planned(tmp_path, hook, answer)
    fine = {"pod_key": ("none", "int"), "rejection": (), "unmodelled": ("short",), "filter": ()}[hook]
    placed = {p["name"] for p in plan["placements"]}
    if answer in fine:  # a hashable key is a key, whatever its type
        assert placed == {"plain", "odd"}, plan
        return
    assert placed == {"plain"}, plan
    [odd] = plan["unplaced"]
    assert odd["name"] == "odd" and len(odd["reasons"]) == 1, odd
    assert odd["reasons"][0].startswith(f"plugin Broken failed: {hook}(): "), odd
    if answer == "raise":
        assert odd["reasons"][0] == f"plugin Broken failed: {hook}(): ValueError: {hook} broke"


@pytest.mark.parametrize("answer", ["raise", "list"])
def test_a_node_key_failing_for_one_node_fails_that_node_for_the_plugin(tmp_path: Path, answer: str) -> None:
    plan = planned(tmp_path, "node_key", answer)
    assert {p["node"] for p in plan["placements"]} == {"n1"}
    assert not plan["unplaced"]


def test_a_node_keys_failure_is_the_reason_of_its_node(tmp_path: Path) -> None:
    cluster, config = setup(tmp_path, "node_key")
    text = cluster.read_text().replace("cpu: '4'", "cpu: '1'", 1)  # n1 too small for both
    cluster.write_text(text)
    code, out, err = run("plan", str(cluster), "--config", str(config), "-o", "json", *FAST)
    assert code in (0, 1), err
    [left] = json.loads(out)["unplaced"]
    assert "1 plugin Broken failed: node_key(): ValueError: node_key broke" in left["reasons"][0], left


def test_node_reasons_and_node_key_basis_failing_cost_no_pod(tmp_path: Path) -> None:
    for hook in ("node_reasons", "node_key_basis"):
        assert {p["name"] for p in planned(tmp_path, hook)["placements"]} == {"plain", "odd"}


@pytest.mark.parametrize("hook", ["terms", "constraints"])
@pytest.mark.parametrize("answer", ["raise", "list", "int"])
def test_a_hook_about_the_whole_problem_is_one_line_naming_the_plugin(tmp_path: Path, hook: str,
                                                                    answer: str) -> None:
    cluster, config = setup(tmp_path, hook, answer)
    code, out, err = run("plan", str(cluster), "--config", str(config), *FAST)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (code, out, err)
    assert err.startswith(f"error: plugin Broken failed: {hook}(): "), err


BAD_LOADING = {
    "import raises": ("raise RuntimeError('no licence')\n", "cannot import MODULE:FACTORY: RuntimeError"),
    "import exits": ("import sys\nsys.exit(3)\n", "cannot import MODULE:FACTORY: SystemExit: 3"),
    "syntax error": ("def (:\n", "cannot import MODULE:FACTORY: SyntaxError"),
    "not a factory": ("FACTORY = 3\n", "MODULE:FACTORY is not a kubeplace PluginFactory"),
    "factory function raises": ("def FACTORY():\n    raise KeyError('x')\n", "cannot import MODULE:FACTORY"),
    "no such attribute": ("X = 1\n", "cannot import MODULE:FACTORY: AttributeError"),
    "name not a string": (PLUGIN.replace('PluginFactory("Broken"', 'PluginFactory(7'),
                          "the factory's name must be a non-empty string, got 7"),
    "point not a string": (PLUGIN.replace("(FILTER, SCORE, CONSTRAINT), Args", "3, Args"),
                           "the factory's point must be an extension point or a tuple of them, got 3"),
    "args type not a dataclass": (PLUGIN.replace("(FILTER, SCORE, CONSTRAINT), Args", "FILTER, int"),
                                  "the factory's args_type must be a dataclass or None, got <class 'int'>"),
    "build not callable": (PLUGIN.replace("Args, _build)", "Args, 5)"), "the factory's build must be callable"),
    "build returns nothing": (PLUGIN.replace("return Broken(args)", "return None"),
                              "declares extension point filter but does not implement"),
    "name a raising property": (PLUGIN.replace('    name: str = "Broken"\n',
                                               '    @property\n    def name(self):\n        raise OSError("no")\n'),
                                "plugin 'Broken'"),
}


@pytest.mark.parametrize("case", sorted(BAD_LOADING))
@pytest.mark.parametrize("command", ["plan", "config-check"])
def test_a_plugin_that_cannot_be_loaded_is_one_line(tmp_path: Path, case: str, command: str) -> None:
    source, message = BAD_LOADING[case]
    cluster, config = setup(tmp_path, "", plugin=source)
    args = ["config-check", str(config)] if command == "config-check" else ["plan", str(cluster), "--config",
                                                                             str(config), *FAST]
    code, out, err = run(*args)
    assert code == 2 and "Traceback" not in out + err and len(err.strip().splitlines()) == 1, (code, out, err)
    assert message.replace("MODULE", module_name(tmp_path)) in err, err


def test_a_build_failing_on_the_runs_snapshot_is_one_line(tmp_path: Path) -> None:
    source = PLUGIN.replace("    return Broken(args)", "    assert not ctx.snapshot.nodes, 'nodes!'\n"
                                                     "    return Broken(args)")
    cluster, config = setup(tmp_path, "", plugin=source)
    code, out, err = run("plan", str(cluster), "--config", str(config), *FAST)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (code, out, err)
    assert "plugin 'Broken' failed to build: AssertionError: nodes!" in err


ROWS = '''
from dataclasses import dataclass
import numpy as np
from kubeplace.plugins import CONSTRAINT, GroupCap, Headroom, NodePreference, PluginFactory


@dataclass(frozen=True)
class Args:
    rows: str = "fine"


@dataclass(frozen=True)
class Rows:
    args: Args
    name: str = "Rows"

    def pod_key(self, pod):
        return None

    def constraints(self, view):
        k, n = len(view.class_pods), len(view.nodes)
        return {
            "fine": [GroupCap("one each", tuple(range(k)), np.ones(n, dtype=np.int64))],
            "class out of range": [GroupCap("x", (k + 5,), np.ones(n, dtype=np.int64))],
            "cap too short": [GroupCap("x", (0,), np.ones(0, dtype=np.int64))],
            "cap of floats": [GroupCap("x", (0,), np.ones(n))],
            "domain of the wrong size": [GroupCap("x", (0,), np.ones(1, dtype=np.int64),
                                                  domain=np.zeros(n + 3, dtype=np.int64))],
            "preference rows": [NodePreference("Rows", (0,), np.zeros((2, n + 1), dtype=np.int64), "default")],
            "headroom nan": [Headroom(("cpu",), np.full(n, np.nan))],
            "headroom negative": [Headroom(("cpu",), np.full(n, -1.0))],
        }[self.args.rows]


FACTORY = PluginFactory("Rows", CONSTRAINT, Args, lambda args, ctx: Rows(args))
'''


@pytest.mark.parametrize("rows", ["fine", "class out of range", "cap too short", "cap of floats",
                                  "domain of the wrong size", "preference rows", "headroom nan", "headroom negative"])
def test_constraint_rows_that_do_not_fit_the_problem_are_one_line_naming_the_plugin(tmp_path: Path, rows: str) -> None:
    (tmp_path / f"{module_name(tmp_path)}.py").write_text(ROWS)
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + f"userPlugins:\n- {{name: Rows, import: '{module_name(tmp_path)}:FACTORY'}}\n"
                      "profiles:\n- plugins: {enabled: [Rows]}\n"
                      f"  pluginConfig: [{{name: Rows, args: {{rows: '{rows}'}}}}]\n")
    code, out, err = run("plan", str(cluster_file(tmp_path)), "--config", str(config), "-o", "json", *FAST)
    if rows == "fine":  # one pod per node at most: both placed, on two nodes
        assert code == 0, err
        assert len({p["node"] for p in json.loads(out)["placements"]}) == 2
        return
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (code, out, err)
    assert err.startswith("error: plugin Rows failed: constraints(): TypeError: "), err


TERMS = ROWS.replace("CONSTRAINT, GroupCap, Headroom, NodePreference", "SCORE, LoadBalanceTerm, NodesUsedTerm").replace(
    "FACTORY = PluginFactory(\"Rows\", CONSTRAINT", "FACTORY = PluginFactory(\"Rows\", SCORE")


@pytest.mark.parametrize(("term", "fine"), [
    ("LoadBalanceTerm('cpu', 3)", True), ("NodesUsedTerm(2)", True), ("LoadBalanceTerm('cpu', -1)", False),
    ("LoadBalanceTerm('cpu', 0.5)", False), ("LoadBalanceTerm('cpu', 'x')", False), ("LoadBalanceTerm(7, 1)", False),
    ("NodesUsedTerm(None)", False)])
def test_score_terms_are_checked_as_the_objective_reads_them(tmp_path: Path, term: str, fine: bool) -> None:
    source = TERMS + f"\n\ndef terms(self, problem):\n    return [{term}]\n\n\nRows.terms = terms\n"
    (tmp_path / f"{module_name(tmp_path)}.py").write_text(source)
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + f"userPlugins:\n- {{name: Rows, import: '{module_name(tmp_path)}:FACTORY'}}\n"
                      "profiles:\n- plugins: {enabled: [Rows]}\n")
    code, out, err = run("plan", str(cluster_file(tmp_path)), "--config", str(config), *FAST)
    if fine:
        assert code == 0, err
        return
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (code, out, err)
    assert err.startswith("error: plugin Rows failed: terms(): TypeError: "), err


SCORE_ONLY = '''
from dataclasses import dataclass
from kubeplace.plugins import SCORE, LoadBalanceTerm, PluginFactory


@dataclass(frozen=True)
class Scores:
    name: str = "Scores"

    def terms(self, problem):
        return [LoadBalanceTerm("cpu", 1)]


def _build(args, ctx):
    if any(n.labels.get("special") == "true" for n in ctx.snapshot.nodes):
        raise ValueError("build broke")
    return Scores()


FACTORY = PluginFactory("Scores", SCORE, None, _build)
'''


def test_a_score_plugin_s_build_failing_on_one_node_refuses_that_node(tmp_path: Path) -> None:
    """A score (or constraint) plugin has no filter of its own: the node its build fails on is
    refused by the guard's filter, with the failure as that node's reason, the rest planned."""
    (tmp_path / f"{module_name(tmp_path)}.py").write_text(SCORE_ONLY)
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + f"userPlugins:\n- {{name: Scores, import: '{module_name(tmp_path)}:FACTORY'}}\n"
                      "profiles:\n- plugins: {enabled: [Scores]}\n")
    code, out, err = run("plan", str(cluster_file(tmp_path)), "--config", str(config), "-o", "json", *FAST)
    assert code == 0, (code, out, err)
    assert {p["node"] for p in json.loads(out)["placements"]} == {"n1"}, out
    text = cluster_file(tmp_path).read_text().replace("cpu: '4'", "cpu: '1'", 1)  # n1 holds one pod only
    (tmp_path / "small.yaml").write_text(text)
    code, out, err = run("plan", str(tmp_path / "small.yaml"), "--config", str(config), "-o", "json", *FAST)
    [left] = json.loads(out)["unplaced"]
    assert "1 plugin Scores failed: build(): ValueError: build broke" in left["reasons"][0], left
