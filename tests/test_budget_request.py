"""`tpubench budget KIND` (budget/planners.py, tpubench/cli_budget.py): each unit of output has a
planner, each planner its subcommand (and the token planner one per kind making tokens), each
subcommand its volume flag and only the options its planner reads; an option of another subcommand,
and the form before subcommands, are refused in one line naming the subcommand(s) to use, before any
file is read."""

from __future__ import annotations

import pytest
import typer.main
from helpers_cli import run_cli
from helpers_synthetic import write_results, write_serve_results, write_train_results

from tpubench.budget.planners import GENERIC_PLANNER, PLANNERS, budget_commands
from tpubench.budget.request import BudgetOptions, option_fields
from tpubench.cli import app
from tpubench.errors import UserError
from tpubench.scenarios import registry

PRICES = """cloud,region,instance_type,accelerator,chips_per_instance,on_demand,spot,commit_1y,commit_3y,source,as_of
testcloud,r1,h100x4,H100,4,32.0,16.0,,,hand-made test price,2026-12-01
"""
TRAIN = dict(accelerator="NVIDIA H100 80GB HBM3", world_size=2, batch_size=4, sequence_length=1024, step_s=0.5)
SERVE = dict(accelerator="NVIDIA H100 80GB HBM3", chips=4, concurrency=8, input_length=1024, output_length=128)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("per-unit")
    write_results(root / "results", [dict(batch_size=8), dict(batch_size=16)])
    write_serve_results(root / "results", [SERVE])
    write_train_results(root / "results", [TRAIN])
    (root / "prices.csv").write_text(PRICES, encoding="utf-8")
    return root


def budget(monkeypatch, capsys, folder, kind, *args):
    return run_cli(monkeypatch, capsys, "budget", kind, str(folder / "results"), "--prices",
                   str(folder / "prices.csv"), "--cloud", "testcloud", *args)


def commands() -> dict:
    return {c.name: c for c in budget_commands()}


def test_every_shipped_unit_has_a_subcommand_and_the_token_planner_one_per_kind():
    got = {name: (c.unit.key, c.flag, c.scenarios) for name, c in commands().items()}
    assert got == {"generate": ("token", "--tokens-per-day", ("generate",)),
                   "serve": ("token", "--tokens-per-day", ("serve",)),
                   "tokens": ("token", "--tokens-per-day", None),
                   "train": ("training_token", "--train-tokens", None),
                   "images": ("image", "--images-per-day", None)}
    assert {u.key for u in registry.units()} <= {c.unit.key for c in commands().values()}


def test_budget_help_lists_every_subcommand(monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, "budget", "--help")
    assert code == 0
    listed = out.split("Commands:")[1]
    for name, command in commands().items():
        assert f"{name} " in listed and command.short_help in " ".join(listed.split()), name


def test_each_subcommand_has_its_volume_what_its_planner_reads_and_the_common_options():
    """A subcommand's options are made from BudgetOptions and the planner's `reads`: they cannot drift apart."""
    group = typer.main.get_command(app).commands["budget"]
    common = {f.metadata["flag"] for f in option_fields(common=True)}
    inputs = {"--prices", "--discount", "--format", "-f", "--out", "-o", "--all-runs", "--include-published",
              "--no-shipped"}
    sizing_flags = {f.metadata["flag"] for f in option_fields(common=False)}
    for name, command in commands().items():
        flags = {opt for param in group.commands[name].params for opt in param.opts if opt.startswith("-")}
        assert set(command.planner.reads) <= sizing_flags, name
        assert flags == {command.flag} | set(command.planner.reads) | common | inputs, name
        assert f"--no-{command.flag[2:]}" not in flags


def test_a_planner_per_unit_and_any_other_unit_the_generic_one():
    assert set(PLANNERS) == {"token", "training_token", "image"}
    assert GENERIC_PLANNER.name == "{unit}" and GENERIC_PLANNER.flag == "--{unit}-per-day"
    for planner in [*PLANNERS.values(), GENERIC_PLANNER]:
        assert callable(planner.sizing().plan) and callable(planner.sizing().check)


def test_kinds_size_on_their_own_points_and_tokens_on_both(folder, monkeypatch, capsys):
    import io

    import pandas as pd

    for kind in ("serve", "generate"):
        code, out, err = budget(monkeypatch, capsys, folder, kind, "--tokens-per-day", "1e9", "--format", "csv")
        assert code == 0, err
        assert set(pd.read_csv(io.StringIO(out))["scenario_kind"]) == {kind}
        code, out, err = budget(monkeypatch, capsys, folder, kind, "--tokens-per-day", "1e9")
        assert f"of other scenario kinds left out (kept: {kind})" in out
    code, out, err = budget(monkeypatch, capsys, folder, "tokens", "--tokens-per-day", "1e9")
    assert code == 0 and "other scenario kinds left out" not in out   # both kinds compete


@pytest.mark.parametrize("kind, flag, value", [
    ("train", "--peak-factor", "2"),          # a training run is an amount, not a load
    ("train", "--power-price", "0.1"),
    ("train", "--split", None),
    ("train", "--tokens-per-day", "1e9"),
    ("images", "--output-share", "0.5"),
    ("images", "--current", "h100x4"),
    ("tokens", "--max-image-latency-s", "1"),
    ("serve", "--train-tokens", "1e9"),
])
def test_an_option_of_another_subcommand_is_refused_naming_those_it_applies_to(folder, monkeypatch, capsys, kind,
                                                                                flag, value):
    owners = [name for name, c in commands().items() if flag in c.flags()]
    volume = commands()[kind].flag
    code, out, err = budget(monkeypatch, capsys, folder, kind, volume, "10", flag, *([value] if value else []))
    assert code == 2 and out == ""
    assert err.startswith(f"error: {flag}: applies to `tpubench budget {'|'.join(owners)}`"), err
    assert f"not to `tpubench budget {kind}`" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("args, kind", [
    (["results", "--tokens-per-day", "1e9"], "tokens"),
    (["results", "--train-tokens", "1e9"], "train"),
    (["--images-per-day", "1e4", "results"], "images"),
    (["results"], "KIND"),
])
def test_the_form_before_subcommands_names_the_one_to_use(monkeypatch, capsys, args, kind):
    code, out, err = run_cli(monkeypatch, capsys, "budget", *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: budget: ") and f"`tpubench budget {kind} PATHS ...`" in err
    assert "generate, serve, tokens, train, images" in err and "Traceback" not in err


@pytest.mark.parametrize("kind, args, field", [
    ("tokens", ["--tokens-per-day", "lots"], None),               # click's own: not a number
    ("tokens", ["--tokens-per-day", "-1"], "--tokens-per-day"),
    ("images", ["--images-per-day", "inf"], "--images-per-day"),
    ("train", ["--train-tokens", "1e30"], "--train-tokens"),
    ("images", ["--images-per-day", "10", "--peak-factor", "0.5"], "--peak-factor"),
    ("tokens", ["--tokens-per-day", "1e9", "--format", "html"], "--format"),
])
def test_a_volume_or_option_no_budget_could_mean_is_a_one_line_error(folder, monkeypatch, capsys, kind, args, field):
    code, _, err = budget(monkeypatch, capsys, folder, kind, *args)
    assert code == 2 and "Traceback" not in err and "internal error" not in err, err
    if field:
        assert err.startswith(f"error: {field}:") and len(err.strip().splitlines()) == 1, err


def test_a_volume_is_checked_before_any_file_is_read(tmp_path):
    images = commands()["images"]
    sizing = images.planner.sizing()
    with pytest.raises(UserError) as err:
        sizing.check(1e20, BudgetOptions(), images.unit)
    assert err.value.field == "--images-per-day" and "images" in err.value.message
    with pytest.raises(UserError) as err:   # the planner's own check: a peak factor below 1
        sizing.check(10.0, BudgetOptions(peak_factor=0.5), images.unit)
    assert err.value.field == "--peak-factor"
