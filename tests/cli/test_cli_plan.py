"""The `kubeplace` command through click's CliRunner: outputs, exit codes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.kube.files import load_snapshot
from kubeplace.plan.plan import placements_from_dict
from kubeplace.plan.verify import verify
from kubeplace.plan.verify_gpu import verify_devices
from tests.builders import node, pod

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "config.yaml"
FAST = ["--time-limit", "5", "--workers", "1"]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def write_objects(tmp_path: Path, *builders: object, name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all([b.manifest() for b in builders]))  # type: ignore[attr-defined]
    return path


def test_plan_demo_table_lists_bindings_reasons_and_summary() -> None:
    code, out, _ = run("plan", str(DEMO), *FAST)
    assert code == 0
    assert "NAMESPACE" in out and "NODE" in out and "NOT PLACED BECAUSE" in out
    assert "0/12 nodes are available:" in out
    assert "Pods placed: 32" in out and "left to the default scheduler: 0" in out and "Solver: cpsat" in out


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_plan_machine_output_is_verified_and_complete(output: str) -> None:
    code, out, _ = run("plan", str(DEMO), "-o", output, *FAST)
    assert code == 0
    doc = json.loads(out) if output == "json" else yaml.safe_load(out)
    assert set(doc["summary"]) >= {"pods_placed", "pods_unplaced", "objective", "bound", "status", "seconds"}
    assert {"namespace", "name", "node"} <= set(doc["placements"][0])
    assert {"namespace", "name", "reasons"} <= set(doc["unplaced"][0])
    assert doc["summary"]["pods_placed"] == len(doc["placements"])
    snapshot = load_snapshot([DEMO])
    placements = placements_from_dict(doc, "stdout")
    assert verify(snapshot, [(p.namespace, p.name, p.node) for p in placements]) == []
    assert verify_devices(snapshot, [(p.namespace, p.name, p.node, p.gpus) for p in placements]) == []


@pytest.mark.parametrize("backend", ["cpsat", "milp", "highs", "cbc"])
def test_every_backend_plans_the_demo_alike(backend: str) -> None:
    code, out, _ = run("plan", str(DEMO), "-o", "json", "--backend", backend, *FAST)
    assert code == 0
    summary = json.loads(out)["summary"]
    assert summary["pods_placed"] == 32 and summary["backend"] == backend


def test_namespace_and_selector_narrow_the_pending_pods(tmp_path: Path) -> None:
    path = write_objects(tmp_path, node("n1").cpu("8").memory("8Gi").pods(110),
                         pod("a", ns="x").cpu("1").label("app", "web"), pod("b", ns="x").cpu("1"),
                         pod("c", ns="y").cpu("1").label("app", "web"))
    _, out, _ = run("plan", str(path), "-n", "x", "-l", "app=web", "-o", "json", *FAST)
    assert [p["name"] for p in json.loads(out)["placements"]] == ["a"]
    _, out, _ = run("plan", str(path), "-A", "-o", "json", *FAST)
    assert len(json.loads(out)["placements"]) == 3


def test_scheduler_name_selects_the_pods(tmp_path: Path) -> None:
    path = write_objects(tmp_path, node("n1").cpu("8").memory("8Gi").pods(110),
                         pod("mine").cpu("1"), pod("theirs").cpu("1").scheduler("batch"))
    _, out, _ = run("plan", str(path), "-o", "json", *FAST)
    assert [p["name"] for p in json.loads(out)["placements"]] == ["mine"]


def test_user_plugin_from_the_example_config(tmp_path: Path) -> None:
    path = write_objects(tmp_path, node("plain").cpu("8").memory("8Gi").pods(110),
                         node("special").cpu("1").memory("8Gi").pods(110).label("allow-special-pods", "true"),
                         pod("s").cpu("1").label("special", "true"), pod("t").cpu("1").label("special", "true"))
    code, out, _ = run("plan", str(path), "--config", str(EXAMPLE_CONFIG), "-o", "json", *FAST)
    assert code == 0, out
    doc = json.loads(out)
    assert [(p["name"], p["node"]) for p in doc["placements"]] == [("s", "special")]
    assert "node(s) do not allow special pods" in doc["unplaced"][0]["reasons"][0]
    # without the plugin both pods would be placed
    _, out, _ = run("plan", str(path), "-o", "json", *FAST)
    assert len(json.loads(out)["placements"]) == 2


def test_config_check_lists_the_profile(tmp_path: Path) -> None:
    code, out, _ = run("config-check", str(EXAMPLE_CONFIG))
    assert code == 0
    assert "NodeLabelMatch" in out and "Balance" in out


BAD_CONFIGS = {
    "unknown plugin": ("profiles:\n- plugins: {enabled: [NoSuchPlugin]}\n", "unknown plugin 'NoSuchPlugin'"),
    "negative weight": ("profiles:\n- pluginConfig:\n  - name: Balance\n"
                        "    args: {resources: [{name: cpu, weight: -1}]}\n",
                        "resources[0].weight: expected an integer >= 0, got -1"),
    "wrong type": ("solver: {workers: two}\n", "solver.workers: expected int, got 'two'"),
    "unknown field": ("solver: {timeout: 3}\n", "solver.timeout: unknown field"),
    "bad objective": ("profiles:\n- objective: fastest\n", "profiles[0].objective: expected one of balance, binpack"),
    "bad placement weight": ("profiles:\n- placementWeight: money\n",
                             "profiles[0].placementWeight: expected one of pods, gpu"),
    "bad import": ("userPlugins:\n- {name: X, import: 'nope.nothere:FACTORY'}\n",
                   "userPlugins[0].import: cannot import"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_is_one_clear_line_and_exit_2(tmp_path: Path, case: str) -> None:
    body, message = BAD_CONFIGS[case]
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubeplace.io/v1alpha1\nkind: PlacementConfiguration\n" + body)
    code, out, err = run("plan", str(DEMO), "--config", str(config))
    assert code == 2
    assert message in err and str(config) in err
    assert "Traceback" not in err + out and out == ""


BAD_INPUTS = {
    "malformed yaml": ("kind: Pod\n  metadata: [\n", "malformed"),
    "unknown kind": ("apiVersion: v1\nkind: Pods\nmetadata: {name: x}\n", "Pods"),
    "bad quantity": ("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  schedulerName: kubeplace\n"
                     "  containers: [{name: a, resources: {requests: {cpu: 12Zi}}}]\n",
                     "spec.containers[0].resources.requests.cpu: invalid quantity '12Zi'"),
    "negative quantity": ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '-1'}}\n",
                          "status.allocatable.cpu"),
    "missing name": ("apiVersion: v1\nkind: Node\nmetadata: {}\n", "metadata.name"),
    "bad anti-affinity": ("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  affinity:\n"
                          "    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
                          "      - labelSelector: {matchExpressions: [{key: a, operator: Equals, values: [b]}]}\n"
                          "        topologyKey: zone\n  containers: [{name: c}]\n",
                          "unknown operator 'Equals'"),
    "bad podgroup": ("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\n"
                     "spec: {minMember: 0}\n", "spec.minMember"),
    "empty gang topology key": ("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: g\n"
                                "  annotations: {kubeplace.io/gang-topology-key: ''}\nspec: {minMember: 2}\n",
                                "metadata.annotations.kubeplace.io/gang-topology-key: got ''"),
    # tracebacks before (UnicodeDecodeError, RecursionError, ValueError)
    "not UTF-8": (b"apiVersion: v1\nkind: Node\nmetadata: {name: caf\xe9}\n",
                  "bad.yaml:3: not UTF-8 text: byte 0xe9 cannot be decoded"),
    "deeply nested JSON": (b"[" * 100_000 + b"]" * 100_000, "bad.yaml: nested too deeply to read"),
    "a 5,000-digit number": (b"apiVersion: v1\nkind: Node\nmetadata: {name: " + b"1" * 5000 + b"}\n",
                             "bad.yaml: malformed YAML: Exceeds the limit (4300 digits)"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path: Path, case: str) -> None:
    body, message = BAD_INPUTS[case]
    path = tmp_path / "bad.yaml"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    code, out, err = run("plan", str(path))
    assert code == 2, (out, err)
    assert message in err and "bad.yaml" in err and err.count("\n") == 1
    assert "Traceback" not in err and out == ""


def test_unreachable_cluster_is_a_clear_error(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    code, out, err = run("plan", "--kubeconfig", str(kubeconfig))
    assert code == 2 and out == ""
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "unreachable" in err and "127.0.0.1" in err


def test_bind_refuses_files_and_binds_nothing() -> None:
    code, _, err = run("bind", str(DEMO), "--yes")
    assert code == 2 and "bind works on the live cluster" in err


def test_bad_flag_values_are_usage_errors() -> None:
    code, _, err = run("plan", str(DEMO), "--time-limit", "-3")
    assert code == 2 and "--time-limit" in err
    code, _, err = run("plan", str(DEMO), "-o", "xml")
    assert code == 2 and "xml" in err


def test_bench_synthetic_needs_one_pod_count_per_node_count() -> None:
    code, _, err = run("bench", "synthetic", "--nodes", "5,6", "--pods", "3")
    assert code == 2 and "give one pod count per node count" in err
    code, _, err = run("bench", "synthetic", "--nodes", "five")
    assert code == 2 and "expected integers separated by commas" in err
