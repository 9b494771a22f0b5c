"""``kubeplace completion SHELL``: the shell completion script, click's completion underneath
(``kubectl kubeplace`` completes through kubectl; see :mod:`kubeplace.cli.kubectl`)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_command(shell: str) -> None:
    """Print the shell completion script of kubeplace for SHELL.

    \b
    bash:  echo 'eval "$(kubeplace completion bash)"' >> ~/.bashrc
    zsh:   echo 'eval "$(kubeplace completion zsh)"' >> ~/.zshrc
    fish:  kubeplace completion fish > ~/.config/fish/completions/kubeplace.fish

    `kubectl kubeplace <TAB>` completes through kubectl's own completion (`kubectl completion
    SHELL`), which runs the installed kubectl_complete-kubeplace.
    """
    script_class = get_completion_class(shell)
    assert script_class is not None  # every name in SHELLS is one of click's
    root = click.get_current_context().find_root().command
    click.echo(script_class(root, {}, "kubeplace", "_KUBEPLACE_COMPLETE").source())
