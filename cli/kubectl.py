"""kubectl's plugin entry points (console scripts; ``kubeplace`` itself never imports this).

``kubectl-kubeplace`` is the executable kubectl runs for ``kubectl kubeplace ...`` (any executable
named ``kubectl-<name>`` on PATH is the plugin ``<name>``); ``kubectl_complete-kubeplace`` is the one
kubectl (1.26 and later) runs to complete ``kubectl kubeplace <TAB>``: it gets the words after the
plugin's name, the last one the word being completed, and prints one candidate per line then
cobra's directive (``:4``, no file completion; ``:0`` where a file name is expected).
"""

from __future__ import annotations

import sys

from click.shell_completion import ShellComplete

from kubeplace.cli.main import main

KUBECTL_PROG = "kubectl kubeplace"
KUBECTL_COMPLETE_VAR = "_KUBECTL_KUBEPLACE_COMPLETE"
COBRA_DEFAULT = 0
"""Cobra's ShellCompDirectiveDefault: the shell completes file names when no candidate is given."""
COBRA_NO_FILE = 4
"""Cobra's ShellCompDirectiveNoFileComp."""


def kubectl_main() -> None:
    """``kubectl kubeplace ...``: the kubeplace command, with kubectl's words in its help."""
    main(prog_name=KUBECTL_PROG, complete_var=KUBECTL_COMPLETE_VAR)


def kubectl_candidates(words: list[str]) -> tuple[list[str], int]:
    """Candidates for the last of ``words`` (the words after ``kubectl kubeplace``) and cobra's
    directive."""
    args, incomplete = (words[:-1], words[-1]) if words else ([], "")
    items = ShellComplete(main, {}, KUBECTL_PROG, KUBECTL_COMPLETE_VAR).get_completions(args, incomplete)
    if any(item.type in ("file", "dir") for item in items):
        return [], COBRA_DEFAULT
    return [f"{item.value}\t{item.help}" if item.help else str(item.value) for item in items], COBRA_NO_FILE


def kubectl_complete() -> None:
    """``kubectl_complete-kubeplace WORD...``: what kubectl's completion runs for this plugin."""
    candidates, directive = kubectl_candidates(sys.argv[1:])
    sys.stdout.write("".join(f"{c}\n" for c in candidates) + f":{directive}\n")
