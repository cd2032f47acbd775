"""Running the `tpubench` command in-process, as a user would type it (a plain module: import it)."""

from __future__ import annotations

import sys

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
