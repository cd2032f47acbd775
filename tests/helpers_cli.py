"""Running the `tpubench` command in-process, as a user would type it (a plain module: import it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer

from tpubench import cli
from tpubench.cli import main


def run_cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `tpubench ARGS...`."""
    monkeypatch.setattr(sys, "argv", ["tpubench", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def numeric_leaves(node, path=()):
    """(path, value) of every number in a parsed YAML tree (bools are not numbers)."""
    if isinstance(node, dict):
        for key, child in node.items():
            yield from numeric_leaves(child, (*path, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from numeric_leaves(child, (*path, i))
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, node


# Fixtures of `tpubench validate` for the hostile-input suites (import them by name into a test module).
@pytest.fixture(scope="module")
def click_command():
    return typer.main.get_command(cli.app)   # built once; cli.main still runs around it


@pytest.fixture
def validate(monkeypatch, capsys, click_command):
    """`tpubench validate FILE` -> (exit code, stderr), asserting the one-line, no-traceback shape."""
    monkeypatch.setattr(cli, "app", click_command)

    def run(path: Path) -> tuple[int, str]:
        code, out, err = run_cli(monkeypatch, capsys, "validate", str(path))
        assert "internal error" not in out + err and "Traceback" not in out + err, out + err
        if code:
            assert code == 2 and err.count("\n") == 1, (code, out, err)
        return code, err.strip()
    return run
