"""`gpuledger completion bash|zsh|fish`: print the shell's completion script (Click's own).

Install: `gpuledger completion bash > ~/.local/share/bash-completion/completions/gpuledger`,
`gpuledger completion zsh > "${fpath[1]}/_gpuledger"`, or
`gpuledger completion fish > ~/.config/fish/completions/gpuledger.fish`. The script calls
`gpuledger` back with `_GPULEDGER_COMPLETE` set, which `gpuledger.cli.main` answers.
"""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_GPULEDGER_COMPLETE"
"""The environment variable the scripts set to ask for completions (`gpuledger.cli.main`)."""


@click.command("completion", help="print the shell completion script (bash, zsh or fish)")
@click.argument("shell", type=click.Choice(SHELLS))
def command(shell: str) -> int:
    """Needs no settings: it prints a script, so it works before any config exists."""
    from click.shell_completion import get_completion_class
    root = click.get_current_context().find_root().command
    cls = get_completion_class(shell)
    assert cls is not None  # every name in SHELLS is one Click ships
    click.echo(cls(root, {}, "gpuledger", COMPLETE_VAR).source())
    return 0
