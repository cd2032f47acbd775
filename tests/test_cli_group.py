"""The lazy click group (tpubench/cli_group.py): what `tpubench` prints and exits with is what typer's
own group (every command converted up front) prints and exits with; and a command runs having
converted only itself (issue 34: start-up)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import typer.main
from helpers_cli import run_cli
from test_cli_help import ALL_COMMANDS

from tpubench import cli
from tpubench.cli_group import CommandsOnDemand, lazy_group

WORKLOAD = str(Path(__file__).resolve().parent.parent / "workloads" / "qwen3_moe.yaml")

# Usage errors of every kind click and typer raise: each prints a usage line and a message (exit 2).
ERRORS = [
    (), ("valdate",), ("validate",), ("validate", "--bogus"), ("validate", WORKLOAD, "--max-points", "0"),
    ("validate", WORKLOAD, "--max-points", "many"), ("pricing",), ("pricing", "bogus"), ("import", "mlperf"),
    ("run",), ("report", "x", "--format"), ("budget", "tokens", "results", "--tokens", "1"),
    ("budget", "results", "--tokens-per-day", "1"), ("budget", "train", "results", "--split"),
]


def outputs(monkeypatch, capsys, args, eager: bool) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `tpubench ARGS`, through the lazy group or typer's own."""
    with monkeypatch.context() as m:
        if eager:
            m.setattr(cli, "app", typer.main.get_command(cli.app))
        return run_cli(m, capsys, *args)


@pytest.mark.parametrize("args", [(*path, "--help") for path in ALL_COMMANDS] + ERRORS, ids=" ".join)
def test_the_lazy_group_prints_and_exits_as_typers_own(args, monkeypatch, capsys):
    lazy = outputs(monkeypatch, capsys, args, eager=False)
    assert lazy == outputs(monkeypatch, capsys, args, eager=True)
    assert "internal error" not in lazy[1] + lazy[2]


def test_validate_converts_only_the_validate_command(monkeypatch, capsys):
    converted = []
    convert = typer.main.get_command_from_info

    def recording(info, **kwargs):
        converted.append(info.callback.__name__)
        return convert(info, **kwargs)

    monkeypatch.setattr(typer.main, "get_command_from_info", recording)
    code, out, err = run_cli(monkeypatch, capsys, "validate", WORKLOAD)
    assert code == 0 and out.startswith("ok "), err
    assert converted == ["validate"]


def test_group_help_converts_every_command_in_typers_order():
    group = lazy_group(cli.app)
    eager = typer.main.get_command(cli.app)
    assert list(group.commands) == list(eager.commands)     # commands as registered, then pricing, import
    assert not group.commands._built
    group.commands["pricing"]        # a sub-group is lazy too: built, with none of its own commands yet
    assert list(group.commands["pricing"].commands) == list(eager.commands["pricing"].commands)
    assert not group.commands["pricing"].commands._built


def test_commands_on_demand_is_a_mapping_that_builds_each_entry_once():
    built = []
    commands = CommandsOnDemand({"a": 1, "b": 2}, lambda entry: built.append(entry) or entry * 10)
    assert list(commands) == ["a", "b"] and len(commands) == 2 and "a" in commands and "c" not in commands
    assert commands["b"] == 20 and commands["b"] == 20 and built == [2]
    assert commands.get("c") is None
    commands["c"] = "ready"            # click's add_command: an entry built already
    assert commands["c"] == "ready" and list(commands) == ["a", "b", "c"]
    del commands["a"]
    assert list(commands) == ["b", "c"] and built == [2]


def test_a_sub_app_added_without_a_name_is_merged_as_typer_merges_it():
    app, named, merged = typer.Typer(), typer.Typer(), typer.Typer()
    for target, name in ((app, "top"), (app, "second"), (named, "inner"), (merged, "merged_in")):
        target.command(name)(lambda: None)
    app.add_typer(named, name="named")
    app.add_typer(merged)
    eager = typer.main.get_command(app)
    group = lazy_group(app)
    assert list(group.commands) == list(eager.commands) == ["top", "second", "named", "merged_in"]
    assert list(group.commands["named"].commands) == ["inner"]


def test_budget_subcommands_are_made_only_when_tpubench_budget_is_looked_into(monkeypatch, capsys):
    """`tpubench --help` lists `budget` without reading the planners (nor the scenario registry);
    `tpubench budget --help` reads them (cli_group.DeferredTyper, cli_budget.py)."""
    from tpubench.budget import planners

    made = []
    make = planners.budget_commands
    monkeypatch.setattr(planners, "budget_commands", lambda: made.append(1) or make())
    code, out, _ = run_cli(monkeypatch, capsys, "--help")
    assert code == 0 and "budget" in out and made == []
    code, out, _ = run_cli(monkeypatch, capsys, "budget", "--help")
    assert code == 0 and "serve" in out and made
