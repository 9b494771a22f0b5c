"""The PlacementConfiguration and the solver flags: one validation for both, one line and exit
code 2 for every mistake, and the plugin contract checked when the configuration is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.models.config import SolverSettings
from kubeplace.models.config_load import parse_configuration

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
HEADER = "apiVersion: kubeplace.io/v1alpha1\nkind: PlacementConfiguration\n"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def one_line_exit_2(code: int, out: str, err: str) -> None:
    assert code == 2, (code, out, err)
    assert "Traceback" not in out + err and out == ""
    assert len(err.strip().splitlines()) == 1, err


BAD_SOLVER = {
    "unknown backend": ("solver: {backend: gurobi}\n",
                        "solver.backend: expected one of cpsat, milp, highs, cbc, got 'gurobi'"),
    "nan time limit": ("solver: {timeLimitSeconds: .nan}\n", "solver.timeLimitSeconds: expected a finite number"),
    "infinite time limit": ("solver: {timeLimitSeconds: .inf}\n", "solver.timeLimitSeconds: expected a finite"),
    "nan gap": ("solver: {relativeGap: .nan}\n", "solver.relativeGap: expected a number in [0, 1), got nan"),
    "too many workers": ("solver: {workers: 100000}\n", "solver.workers: expected an integer from 1 to 256"),
    "no workers": ("solver: {workers: 0}\n", "solver.workers: expected an integer from 1 to 256, got 0"),
    "huge seed": ("solver: {seed: 100000000000000000000}\n", "solver.seed: expected an integer from 0 to"),
    "huge float": (f"solver: {{timeLimitSeconds: 1{'0' * 400}}}\n", "solver.timeLimitSeconds: expected float"),
}


@pytest.mark.parametrize("case", sorted(BAD_SOLVER))
@pytest.mark.parametrize("command", ["config-check", "plan"])
def test_bad_solver_settings_are_refused_by_config_check_and_plan(tmp_path: Path, case: str, command: str) -> None:
    body, message = BAD_SOLVER[case]
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + body)
    args = [command, str(config)] if command == "config-check" else [command, str(DEMO), "--config", str(config)]
    code, out, err = run(*args)
    one_line_exit_2(code, out, err)
    assert message in err and str(config) in err


BAD_GPU = {
    "native device resource": ("gpu: {deviceResource: cpu}\n",
                               "gpu.deviceResource: expected an extended resource name (a domain-prefixed name "
                               "outside kubernetes.io, e.g. example.com/gpu), got 'cpu'"),
    "empty device resource": ("gpu: {deviceResource: ''}\n", "gpu.deviceResource: expected an extended resource"),
    "kubernetes.io percent": ("gpu: {percentOfGpus: [kubernetes.io/gpu-share]}\n",
                              "gpu.percentOfGpus[0]: expected an extended resource name"),
    "quota name": ("gpu: {percentPerDevice: [requests.example.com/cores]}\n",
                   "gpu.percentPerDevice[0]: expected an extended resource name"),
    "device resource as a percent": ("gpu: {percentPerDevice: [nvidia.com/gpu]}\n",
                                     "gpu.percentPerDevice[0]: 'nvidia.com/gpu' is already gpu.deviceResource "
                                     "(each resource has one GPU role)"),
    "one percent in both roles": ("gpu: {percentOfGpus: [example.com/share, example.com/share]}\n",
                                  "gpu.percentOfGpus[1]: 'example.com/share' is already gpu.percentOfGpus[0]"),
}


@pytest.mark.parametrize("case", sorted(BAD_GPU))
@pytest.mark.parametrize("command", ["config-check", "plan"])
def test_bad_gpu_conventions_are_refused_by_config_check_and_plan(tmp_path: Path, case: str, command: str) -> None:
    """A name the kubelet does not count as an extended resource, or read in two GPU roles, would
    make every GPU need wrong (``deviceResource: cpu`` took each core for a GPU)."""
    body, message = BAD_GPU[case]
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + body)
    args = [command, str(config)] if command == "config-check" else [command, str(DEMO), "--config", str(config)]
    code, out, err = run(*args)
    one_line_exit_2(code, out, err)
    assert message in err and str(config) in err


def test_a_dra_class_name_is_a_gpu_device_resource(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + "gpu: {deviceResource: deviceclass.resource.kubernetes.io/gpu}\n")
    code, _, err = run("config-check", str(config))
    assert code == 0, err


BAD_FLAGS = {
    "unknown backend": (["--backend", "gurobi"], "--backend: expected one of cpsat, milp, highs, cbc, got 'gurobi'"),
    "nan time limit": (["--time-limit", "nan"], "--time-limit: expected a finite number of seconds > 0, got nan"),
    "infinite time limit": (["--time-limit", "inf"], "--time-limit: expected a finite number of seconds > 0"),
    "negative time limit": (["--time-limit", "-3"], "--time-limit: expected a finite number of seconds > 0"),
    "nan gap": (["--gap", "nan"], "--gap: expected a number in [0, 1), got nan"),
    "gap of one": (["--gap", "1"], "--gap: expected a number in [0, 1), got 1"),
    "too many workers": (["--workers", "100000"], "--workers: expected an integer from 1 to 256, got 100000"),
    "negative seed": (["--seed", "-1"], "--seed: expected an integer from 0 to 2147483647, got -1"),
    "huge seed": (["--seed", str(10**20)], "--seed: expected an integer from 0 to 2147483647"),
}


@pytest.mark.parametrize("case", sorted(BAD_FLAGS))
@pytest.mark.parametrize("command", ["plan", "rebalance"])
def test_bad_solver_flags_get_the_same_validation(case: str, command: str) -> None:
    flags, message = BAD_FLAGS[case]
    code, out, err = run(command, str(DEMO), *flags)
    one_line_exit_2(code, out, err)
    assert message in err


def test_flags_override_the_file_and_are_validated_over_it(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + "solver: {backend: highs, workers: 4, seed: 3}\n")
    code, out, err = run("plan", str(DEMO), "--config", str(config), "--workers", "1", "--time-limit", "2",
                         "-o", "json")
    assert code == 0, err
    assert '"backend": "highs"' in out


def test_the_internal_settings_are_snake_case_and_typed() -> None:
    doc = {"apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementConfiguration",
           "solver": {"backend": "milp", "timeLimitSeconds": 3, "workers": 1, "relativeGap": 0.1, "seed": 7}}
    config = parse_configuration(doc)
    assert config.solver == SolverSettings("milp", 3.0, 1, 0.1, 7)
    code, out, _ = run("config-check", str(Path(__file__).resolve().parents[2] / "examples/plugins/config.yaml"))
    assert code == 0 and "timeLimitSeconds: 10.0" in out  # printed in the file's shape


def test_an_exponent_is_a_float_as_in_yaml_1_2(tmp_path: Path) -> None:
    """``1e3`` was the string '1e3' to PyYAML's YAML 1.1 resolver: "expected float"."""
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + "solver: {timeLimitSeconds: 1e3, relativeGap: 5e-2}\n")
    code, out, err = run("config-check", str(config))
    assert code == 0, err
    assert "timeLimitSeconds: 1000.0" in out and "relativeGap: 0.05" in out


MISSPELLED = '''
from dataclasses import dataclass
from kubeplace.plugins import FILTER, PluginFactory


@dataclass(frozen=True)
class Typo:
    name: str = "Typo"
    reason: str = "never"

    def pod_key(self, pod):
        return None

    def node_key(self, node):
        return None

    def filtr(self, pod, nodes):  # misspelled: the framework must refuse it, not skip it
        raise AssertionError("never called")


FACTORY = PluginFactory("Typo", FILTER, None, lambda args, ctx: Typo())
'''


@pytest.mark.parametrize("command", ["config-check", "plan"])
def test_a_plugin_missing_its_extension_points_method_is_refused_at_load_time(tmp_path: Path,
                                                                              command: str) -> None:
    (tmp_path / "typo_plugin.py").write_text(MISSPELLED)
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + "userPlugins:\n- {name: Typo, import: 'typo_plugin:FACTORY'}\n"
                      "profiles:\n- plugins: {enabled: [Typo]}\n")
    args = [command, str(config)] if command == "config-check" else [command, str(DEMO), "--config", str(config)]
    code, out, err = run(*args)
    one_line_exit_2(code, out, err)
    assert "userPlugins[0]: plugin 'Typo' declares extension point filter but does not implement filter()" in err


def test_an_unknown_extension_point_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd_plugin.py").write_text(MISSPELLED.replace("FILTER, None", '"prefilter", None'))
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + "userPlugins:\n- {name: Typo, import: 'odd_plugin:FACTORY'}\n")
    code, out, err = run("config-check", str(config))
    one_line_exit_2(code, out, err)
    assert "unknown extension point 'prefilter'" in err


def test_plugin_names_may_be_written_as_the_kube_scheduler_writes_them() -> None:
    doc = {"apiVersion": "kubeplace.io/v1alpha1", "kind": "PlacementConfiguration",
           "profiles": [{"plugins": {"disabled": [{"name": "Tenant"}, "GPUModel"]}}]}
    assert parse_configuration(doc).profiles[0].disabled == ("Tenant", "GPUModel")


def test_a_plugin_that_fails_to_build_is_one_line(tmp_path: Path) -> None:
    broken = MISSPELLED.replace("lambda args, ctx: Typo()", "lambda args, ctx: 1 / 0")
    (tmp_path / "crashing_build_plugin.py").write_text(broken)
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + "userPlugins:\n- {name: Typo, import: 'crashing_build_plugin:FACTORY'}\n")
    code, out, err = run("config-check", str(config))
    one_line_exit_2(code, out, err)
    assert "userPlugins[0]: plugin 'Typo' failed to build: ZeroDivisionError" in err


PREFERENCES = """profiles:
  - pluginConfig:
      - name: NodeAffinity
        args: {weight: 5}
      - name: TaintToleration
        args: {weight: 0}
      - name: InterPodAffinity
        args: {weight: 1, hardPodAffinityWeight: 10}
      - name: PodTopologySpread
        args:
          defaultingType: List
          defaultConstraints:
            - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}
"""


def test_score_weights_and_default_spread_constraints_are_read_per_profile() -> None:
    import yaml

    from kubeplace.models.plugins.topology_spread import DefaultConstraint

    args = parse_configuration(yaml.safe_load(HEADER + PREFERENCES)).profiles[0].plugin_args
    assert args["NodeAffinity"].weight == 5 and args["TaintToleration"].weight == 0
    assert args["InterPodAffinity"].hardPodAffinityWeight == 10
    assert args["PodTopologySpread"].defaultConstraints == (
        DefaultConstraint(1, "kubernetes.io/hostname", "DoNotSchedule"),)


BAD_PREFERENCES = {
    "weight": ("{name: NodeAffinity, args: {weight: 101}}", "weight: expected an integer from 0 to 100, got 101"),
    "defaulting type": ("{name: PodTopologySpread, args: {defaultingType: Some}}",
                        "defaultingType: expected System or List, got 'Some'"),
    "system with list": ("{name: PodTopologySpread, args: {defaultConstraints: [{maxSkew: 1, topologyKey: zone, "
                         "whenUnsatisfiable: DoNotSchedule}]}}", "expected none with defaultingType System"),
    "max skew": ("{name: PodTopologySpread, args: {defaultingType: List, defaultConstraints: [{maxSkew: 0, "
                 "topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}}", "defaultConstraints[0].maxSkew"),
    "selector": ("{name: PodTopologySpread, args: {defaultingType: List, defaultConstraints: [{topologyKey: zone, "
                 "whenUnsatisfiable: DoNotSchedule, labelSelector: {}}]}}", "labelSelector"),
}


@pytest.mark.parametrize("case", sorted(BAD_PREFERENCES))
def test_bad_score_args_are_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    entry, expected = BAD_PREFERENCES[case]
    path = tmp_path / "config.yaml"
    path.write_text(HEADER + f"profiles:\n  - pluginConfig: [{entry}]\n")
    code, out, err = run("config-check", str(path))
    one_line_exit_2(code, out, err)
    assert expected in err, err
