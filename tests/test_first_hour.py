"""docs/first-hour.md: every command on the page, read from the page, in the form a test can run
(issue 51). tpubench's own commands are parsed by its command line and `validate` and `launch
--dry-run` are run; `pip install` lines by pip's own parser; gcloud and aws commands against their
reference synopses (tests/fixtures/cloud_cli_synopsis.json); the shell's own steps (cd, venv, ssh,
scp) by name. A command the test cannot place fails it: the page can hold nothing unchecked."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import pytest
import typer
from helpers_cli import run_cli

from tpubench.cli import app

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "first-hour.md"
SYNOPSES = json.loads((REPO / "tests" / "fixtures" / "cloud_cli_synopsis.json").read_text())
SHELL_STEPS = {"cd", ".", "ssh", "scp"}


def page_commands() -> list[list[str]]:
    """Every command of the page's bash blocks: lines joined at `\\`, split at `&&`."""
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                commands += [shlex.split(part) for part in line.split("&&")]
    return commands


def by_tool(tool: str) -> list[list[str]]:
    return [c for c in page_commands() if c[0] == tool]


def test_the_page_walks_through_the_first_hour():
    tpubench = {c[1] for c in by_tool("tpubench")}
    assert {"doctor", "run", "launch", "collect", "report", "estimate", "validate"} <= tpubench
    runs = [c for c in by_tool("tpubench") if c[1] == "run"]
    assert {c[c.index("--device") + 1] for c in runs} == {"tpu", "neuron", "cuda"}
    assert all(c[2] == "workloads/qwen3_moe.yaml" and c[c.index("--scale") + 1] == "full" for c in runs)
    assert {c[0] for c in page_commands()} <= {"tpubench", "pip", "gcloud", "aws", "python3"} | SHELL_STEPS


def test_every_command_is_one_the_tests_place():
    for command in page_commands():
        placed = command[0] in {"tpubench", "pip", "gcloud", "aws"} | SHELL_STEPS
        assert placed or command[:3] == ["python3", "-m", "venv"], command


@pytest.mark.parametrize("args", [c[1:] for c in by_tool("tpubench")], ids=lambda a: " ".join(a[:2]))
def test_tpubench_commands_parse(args):
    """Click's own parser, as the command line reads them (a typo'd flag is a UsageError)."""
    group = typer.main.get_command(app)
    with click.Context(group) as ctx:
        name, command, rest = group.resolve_command(ctx, list(args))
        command.make_context(name, rest, parent=ctx)


def test_the_workload_validates(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(REPO / "workloads" / "qwen3_moe.yaml"))
    assert code == 0, err


@pytest.mark.slow   # writes SkyPilot task files for three targets
@pytest.mark.parametrize("args", [c[1:] for c in by_tool("tpubench") if c[1] == "launch"])
def test_launch_commands_run_dry(monkeypatch, capsys, tmp_path, args):
    args = [str(REPO / a) if a.startswith("workloads/") else a for a in args]
    args = args if "--dry-run" in args else [*args, "--dry-run"]
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    assert len(list((tmp_path / "launch").glob("*/*.yaml"))) == 3, out


@pytest.mark.parametrize("args", [c[2:] for c in by_tool("pip")], ids=lambda a: " ".join(a)[:40])
def test_pip_commands_parse(args):
    from pip._internal.commands import create_command

    assert by_tool("pip") and all(c[1] == "install" for c in by_tool("pip"))
    options, targets = create_command("install").parse_args(list(args))
    assert targets or options.editables


@pytest.mark.parametrize("command", by_tool("gcloud") + by_tool("aws"), ids=lambda c: " ".join(c[:5]))
def test_cloud_cli_commands_match_their_synopsis(command):
    words = 5 if command[0] == "gcloud" else 3
    key = " ".join(command[:words])
    assert key in SYNOPSES, f"no stored synopsis for {key!r}"
    synopsis = SYNOPSES[key]
    positionals, flags = [], []
    rest = command[words:]
    i = 0
    while i < len(rest):
        word = rest[i]
        if word.startswith("--"):
            flags.append(word.split("=", 1)[0])
            if "=" not in word and i + 1 < len(rest) and not rest[i + 1].startswith("--") and command[0] == "aws":
                i += 1   # aws flags take their value as the next word
        else:
            positionals.append(word)
        i += 1
    assert set(flags) <= set(synopsis["flags"]), (key, sorted(set(flags) - set(synopsis["flags"])))
    assert len(positionals) == synopsis["positionals"], (key, positionals)
