"""`--help` of every command and sub-command prints its usage and exits 0 (help texts are rich
markup: a stray '[/...]' used to crash `tpubench launch --help` after printing it)."""

import pytest
import typer
from helpers_cli import run_cli

from tpubench.cli import app


def command_paths(command, prefix=()) -> list[tuple[str, ...]]:
    """The path of every command under a click command or group, the group itself included."""
    paths = [prefix]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        paths.extend(command_paths(sub, (*prefix, name)))
    return paths


ALL_COMMANDS = command_paths(typer.main.get_command(app))


def test_the_walk_finds_nested_commands():
    assert ("launch",) in ALL_COMMANDS and ("pricing", "validate") in ALL_COMMANDS


@pytest.mark.parametrize("path", ALL_COMMANDS, ids=lambda p: " ".join(p) or "tpubench")
def test_help_of_every_command(path, monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, *path, "--help")
    assert code == 0, err
    assert "internal error" not in out + err
    assert "Usage" in out


@pytest.mark.parametrize("args, says", [(("budget", "tokens", "results", "--tokens", "1"),
                                         "No such option: --tokens"),
                                        (("nonsense",), "No such command 'nonsense'")])
def test_a_misspelt_command_or_option_is_a_usage_error_not_an_internal_one(args, says, monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 2 and says in err and "internal error" not in err + out
