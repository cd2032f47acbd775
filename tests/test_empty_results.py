"""A results folder with nothing to show (issue 50): empty, unreadable, or holding only files that
are no tpubench result. `report`, `report --table answer` and `budget` each say so in one line
naming the folder, exit 2, instead of an empty report ("No result could be priced."), a blank
line or "No priced platform has a valid point meeting the SLOs". A budget on results none of which
is a point of its kind names the subcommand that sizes on them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers_cli import run_cli
from helpers_synthetic import write_results

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "results"
INFERENCEX = REPO / "tests" / "fixtures" / "published" / "inferencex_llama70b.json"

COMMANDS = {
    "report": ("report", "{folder}"),
    "answer": ("report", "{folder}", "--table", "answer"),
    "answer csv": ("report", "{folder}", "--table", "answer", "--format", "csv"),
    "budget serve": ("budget", "serve", "{folder}", "--tokens-per-day", "1e9"),
    "budget tokens": ("budget", "tokens", "{folder}", "--tokens-per-day", "1e9"),
    "budget train": ("budget", "train", "{folder}", "--train-tokens", "1e9"),
}


def run(monkeypatch, capsys, command: str, folder: Path) -> tuple[int, str, str]:
    return run_cli(monkeypatch, capsys, *[a.format(folder=folder) for a in COMMANDS[command]])


def one_line_error(code: int, out: str, err: str) -> str:
    assert code == 2, (code, out, err)
    assert out == "" and "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    return errors[0]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_empty_folder(tmp_path, monkeypatch, capsys, command):
    folder = tmp_path / "results"
    folder.mkdir()
    line = one_line_error(*run(monkeypatch, capsys, command, folder))
    assert line.startswith(f"error: {folder}: no tpubench result files here")


@pytest.mark.parametrize("command", ["report", "answer", "budget tokens"])
def test_a_folder_that_cannot_be_read(tmp_path, monkeypatch, capsys, command):
    # The suite may run as root, which reads any folder: the folder's listing is refused as the OS would.
    folder = tmp_path / "results"
    folder.mkdir()
    scandir = os.scandir

    def refusing(path="."):
        if Path(path) == folder:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    line = one_line_error(*run(monkeypatch, capsys, command, folder))
    assert line == f"error: {folder}: cannot read this folder (permission denied)"


@pytest.mark.parametrize("command", ["report", "answer", "budget serve", "budget tokens"])
def test_a_folder_of_files_that_are_no_results(tmp_path, monkeypatch, capsys, command):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "truncated.json").write_text('{"schema_version": ')
    (folder / "other.json").write_text('{"name": "not a result"}')
    code, out, err = run(monkeypatch, capsys, command, folder)
    line = one_line_error(code, out, err)
    assert line.startswith(f"error: {folder}: none of the 2 *.json file(s) here is a readable tpubench result")
    assert "skipping" in err and "truncated.json" in err     # each file named in its warning


@pytest.mark.parametrize("command, kinds, use", [
    ("budget serve", "serve", "`tpubench budget generate` or `tpubench budget tokens`"),
    ("budget train", "train", "`tpubench budget generate` or `tpubench budget tokens`"),
])
def test_a_budget_of_a_kind_the_results_are_not(monkeypatch, capsys, command, kinds, use):
    line = one_line_error(*run(monkeypatch, capsys, command, EXAMPLES))
    assert line.startswith(f"error: {EXAMPLES}: {command}: none of the ")
    assert f"is a {kinds} point (they are generate): {use} sizes on those" in line


def test_a_budget_of_the_right_kind_still_sizes(monkeypatch, capsys):
    code, out, err = run(monkeypatch, capsys, "budget tokens", EXAMPLES)
    assert code == 0, err
    assert "## Options, cheapest first" in out


def test_published_rows_alone_are_a_report_but_not_a_budget(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "results"
    code, _, err = run_cli(monkeypatch, capsys, "import", "inferencex", str(INFERENCEX), "--into", str(folder))
    assert code == 0, err
    code, out, err = run(monkeypatch, capsys, "report", folder)
    assert code == 0, err
    assert "Published results" in out
    line = one_line_error(*run(monkeypatch, capsys, "budget tokens", folder))
    assert "no measured results here" in line and "--include-published" in line


def test_a_readable_result_beside_junk_is_reported(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "results"
    write_results(folder, [dict(accelerator="NVIDIA H100 80GB HBM3", chips=8, batch_size=8)])
    (folder / "truncated.json").write_text("{")
    code, out, err = run(monkeypatch, capsys, "report", folder)
    assert code == 0, err
    assert "1 result(s)" in out and "skipping" in err
