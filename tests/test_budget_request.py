"""`tpubench budget` sized per unit (money/budget_request.py): each unit of output names its planner,
the command picks the planner of the volume given (its own flag or `--volume UNIT=AMOUNT`), and an
option the chosen planner does not read is refused, naming it, before any file is read."""

from __future__ import annotations

import math

import pytest
from helpers_cli import run_cli
from helpers_synthetic import write_results, write_train_results

from tpubench.errors import UserError
from tpubench.money.budget_request import BudgetOptions, check_request, chosen_volume, unit_planners
from tpubench.scenarios import registry

PRICES = """cloud,region,instance_type,accelerator,chips_per_instance,on_demand,spot,commit_1y,commit_3y,source,as_of
testcloud,r1,h100x4,H100,4,32.0,16.0,,,hand-made test price,2026-12-01
"""
TRAIN = dict(accelerator="NVIDIA H100 80GB HBM3", world_size=2, batch_size=4, sequence_length=1024, step_s=0.5)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("per-unit")
    write_results(root / "results", [dict(batch_size=8), dict(batch_size=16)])
    write_train_results(root / "results", [TRAIN])
    (root / "prices.csv").write_text(PRICES, encoding="utf-8")
    return root


def budget(monkeypatch, capsys, folder, *args):
    return run_cli(monkeypatch, capsys, "budget", str(folder / "results"), "--prices", str(folder / "prices.csv"),
                   "--cloud", "testcloud", *args)


def test_every_shipped_unit_names_a_planner_with_its_own_flag():
    planners = dict((unit.key, planner) for unit, planner in unit_planners(registry.units()))
    assert {key: p.flag for key, p in planners.items()} == {
        "token": "--tokens-per-day", "training_token": "--train-tokens", "image": "--images-per-day"}


def test_every_option_a_planner_reads_is_a_flag_of_the_command():
    """BudgetOptions and the planners' `reads` name flags the command has: they cannot drift apart."""
    import typer.main

    from tpubench.cli import app

    command = typer.main.get_command(app).commands["budget"]
    flags = {opt for param in command.params for opt in param.opts}
    option_flags = {f.metadata["flag"] for f in BudgetOptions.__dataclass_fields__.values() if "flag" in f.metadata}
    assert option_flags <= flags
    for unit, planner in unit_planners(registry.units()):
        assert set(planner.reads) <= option_flags, unit.key
        assert planner.flag is None or planner.flag in flags, unit.key
    assert "--volume" in flags


def test_options_given_are_those_away_from_their_default():
    assert BudgetOptions().given() == []
    assert BudgetOptions(plans=("spot",), peak_factor=2.0, split=True).given() == ["--peak-factor", "--split"]
    assert BudgetOptions(pue=math.nan).given() == ["--pue"]   # NaN is a value given (and then refused)


@pytest.mark.parametrize("own, generic", [(["--tokens-per-day", "1e9"], ["--volume", "token=1e9"]),
                                          (["--train-tokens", "1e9"], ["--volume", "training_token=1e9"])])
def test_volume_unit_equals_the_units_own_flag(folder, monkeypatch, capsys, own, generic):
    code, by_flag, err = budget(monkeypatch, capsys, folder, *own, "--format", "csv")
    assert code == 0, err
    code, by_volume, err = budget(monkeypatch, capsys, folder, *generic, "--format", "csv")
    assert code == 0, err
    assert by_volume == by_flag and by_flag.count("\n") > 1


@pytest.mark.parametrize("base, flag, value", [
    (["--train-tokens", "1e9"], "--peak-factor", "2"),         # a training run is an amount, not a load
    (["--train-tokens", "1e9"], "--power-price", "0.1"),
    (["--train-tokens", "1e9"], "--split", None),
    (["--images-per-day", "1e4"], "--output-share", "0.5"),
    (["--images-per-day", "1e4"], "--current", "h100x4"),
    (["--tokens-per-day", "1e9"], "--max-image-latency-s", "1"),
    (["--volume", "token=1e9"], "--max-image-latency-s", "1"),
])
def test_an_option_the_planner_does_not_read_is_refused(folder, monkeypatch, capsys, base, flag, value):
    code, out, err = budget(monkeypatch, capsys, folder, *base, flag, *([value] if value else []))
    assert code == 2 and out == ""
    assert err.startswith("error: " + base[0]) and flag in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("args, field", [
    ([], "--tokens-per-day"),
    (["--tokens-per-day", "1e9", "--volume", "image=10"], "--tokens-per-day"),
    (["--volume", "token=1e9", "--volume", "token=1e9"], "--tokens-per-day"),
    (["--volume", "token"], "--volume"),
    (["--volume", "litre=5"], "--volume"),
    (["--volume", "token=lots"], "--volume"),
    (["--volume", "token=-1"], "--volume"),
    (["--volume", "image=inf"], "--volume"),
    (["--volume", "token=1e30"], "--volume"),
])
def test_a_volume_that_is_not_exactly_one_known_amount_is_a_one_line_error(folder, monkeypatch, capsys, args,
                                                                          field):
    code, _, err = budget(monkeypatch, capsys, folder, *args)
    assert code == 2 and err.startswith(f"error: {field}:") and len(err.strip().splitlines()) == 1, err


def test_a_volume_is_checked_before_any_file_is_read(tmp_path):
    planners = unit_planners(registry.units())
    volume = chosen_volume({"--tokens-per-day": None}, ["image=1e20"], planners)
    assert volume.unit.key == "image" and volume.flag == "--volume"
    with pytest.raises(UserError) as err:
        check_request(volume, BudgetOptions(), planners)
    assert err.value.field == "--volume" and "images" in err.value.message
    with pytest.raises(UserError) as err:   # the planner's own check: a peak factor below 1
        check_request(chosen_volume({"--images-per-day": 10.0}, [], planners), BudgetOptions(peak_factor=0.5),
                      planners)
    assert err.value.field == "--peak-factor"
