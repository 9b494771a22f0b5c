"""``kubeplace completion SHELL`` and what ``kubectl_complete-kubeplace`` answers (the installed
executables themselves are run in tests/install/test_runtime_install.py)."""

from __future__ import annotations

import subprocess

import pytest
from click.testing import CliRunner

from kubeplace.cli.kubectl import COBRA_DEFAULT, COBRA_NO_FILE, kubectl_candidates
from kubeplace.cli.main import main


def test_subcommands_and_flags_complete_without_file_names() -> None:
    names, directive = kubectl_candidates(["re"])
    assert [n.split("\t")[0] for n in names] == ["rebalance"] and directive == COBRA_NO_FILE
    assert kubectl_candidates(["rebalance", "--profile", ""]) == (["balance", "binpack", "defrag"], COBRA_NO_FILE)
    names, _ = kubectl_candidates([])
    assert {"plan", "bind", "rebalance", "serve", "completion"} <= {n.split("\t")[0] for n in names}


def test_a_path_argument_is_left_to_the_shells_file_completion() -> None:
    assert kubectl_candidates(["plan", "fixtures/de"]) == ([], COBRA_DEFAULT)
    assert kubectl_candidates(["bind", "--plan", ""]) == ([], COBRA_DEFAULT)


@pytest.mark.parametrize(("shell", "marker"), [("bash", "_KUBEPLACE_COMPLETE=bash_complete"),
                                               ("zsh", "#compdef kubeplace"),
                                               ("fish", "_KUBEPLACE_COMPLETE=fish_complete")])
def test_completion_prints_the_shells_script(shell: str, marker: str) -> None:
    out = CliRunner().invoke(main, ["completion", shell])
    assert out.exit_code == 0 and marker in out.output
    if shell == "bash":
        assert subprocess.run(["bash", "-n"], input=out.output, text=True, check=False).returncode == 0


def test_completion_refuses_another_shell_in_one_line() -> None:
    out = CliRunner().invoke(main, ["completion", "tcsh"])
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1
