"""`kubeplace serve` command line: flags, bad input as one line and exit 2, JSON log lines."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.cli.serve import JsonFormatter


def test_serve_is_registered_with_kubectl_style_flags() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    for flag in ("--kubeconfig", "--context", "--scheduler-name", "--config", "--batch-window", "--batch-size",
                 "--metrics-port", "--lease-name", "--lease-namespace", "--identity"):
        assert flag in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["--kubeconfig", "/nonexistent/kubeconfig"], "error: kubeconfig /nonexistent/kubeconfig does not exist"),
    (["--scheduler-name", "nobody"], "error: "),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["serve", "--metrics-port", "0", *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_a_bad_configuration_file_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubeplace.io/v1alpha1\nkind: PlacementConfiguration\nbogus: 1\n")
    result = CliRunner().invoke(main, ["serve", "--config", str(config), "--metrics-port", "0"])
    assert result.exit_code == 2 and "bogus" in result.stderr


def test_decisions_are_json_lines() -> None:
    record = logging.LogRecord("kubeplace.serve", logging.INFO, __file__, 1, "decision", None, None)
    record.fields = {"pod": "ns/p", "node": "n1", "gang": "ns/g", "outcome": "bound"}
    line = JsonFormatter().format(record)
    entry = json.loads(line)
    assert "\n" not in line
    assert entry["msg"] == "decision" and entry["pod"] == "ns/p" and entry["node"] == "n1"
    assert entry["level"] == "info" and entry["ts"].endswith("Z")
