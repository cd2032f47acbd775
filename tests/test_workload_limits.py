"""What `tpubench validate` reads, bounded (issue 50): a YAML alias bomb, an alias inside its own
anchor, an oversized file and a `compare_on` of a thousand chips are refused in one line naming
file, line and field (exit 2) before anything walks them; every `compare_on` chip is resolved
against the price and spec tables the way `tpubench estimate` resolves it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_cli import click_command, run_cli, validate  # noqa: F401 (fixtures)

from tpubench.errors import UserError
from tpubench.run import workload as workload_module
from tpubench.run.workload import MAX_COMPARE_ON, MAX_FILE_BYTES, MAX_VALUES, load_workload

REPO = Path(__file__).resolve().parents[1]
QWEN_MOE = REPO / "workloads" / "qwen3_moe.yaml"
SHIPPED_COMPARE_ON = 'compare_on: [tpu-v6e-8, "H100:8", trn2]'


def with_text(tmp_path: Path, old: str, new: str, name: str = "w.yaml") -> Path:
    text = QWEN_MOE.read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    return path


def alias_bomb(levels: int, width: int) -> str:
    """`levels` anchors, each a list of `width` aliases of the one before: width**levels values."""
    lines = [f"  a0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "x-bomb:\n" + "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path, validate):
    # 10 levels of 9: ~8e9 values that pydantic would walk for hours; refused by counting the tree's nodes.
    path = with_text(tmp_path, "name: qwen3_moe", alias_bomb(10, 9) + "name: qwen3_moe")
    code, err = validate(path)
    assert code == 2
    assert f"{path}:3: x-bomb:" in err and "expand the file to" in err and f"{MAX_VALUES:,}" in err


def test_an_alias_bomb_under_a_known_field_names_that_field(tmp_path, validate):
    items = alias_bomb(7, 9).replace("x-bomb:\n", "").replace("  a", "  - a")
    items = "\n".join(f"  - {line.split(': ', 1)[1]}" for line in items.splitlines())
    path = with_text(tmp_path, "description: Qwen3", "description:\n" + items + "\nx-was: Qwen3")
    code, err = validate(path)
    assert code == 2 and f"{path}:4: description: YAML aliases" in err


def test_aliases_that_stay_small_are_fine(tmp_path):
    # Anchors are legitimate YAML: a scale reusing the model's config block validates as before.
    path = with_text(tmp_path, "  config:\n    hidden_size: 2048", "  config: &full\n    hidden_size: 2048")
    path.write_text(path.read_text().replace("    config:\n      hidden_size: 512",
                                             "    config:\n      <<: *full\n      hidden_size: 512"))
    w = load_workload(path)
    assert w.scales["small"].config["hidden_size"] == 512 and w.scales["small"].config["num_experts"] == 32


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path, validate):
    path = tmp_path / "w.yaml"
    path.write_text("name: x\nloop: &a [1, *a]\n")
    code, err = validate(path)
    assert code == 2 and f"{path}:2: loop:" in err and "contain itself" in err


@pytest.mark.parametrize("uses, refused", [(8, True), (7, False)])
def test_the_count_is_of_expanded_values(tmp_path, uses, refused):
    # a3 holds 11,111 values (4 levels of 10); the anchors themselves ~12,300. Eight more uses of *a3
    # take the file over 100,000 values, seven do not (and the file then fails on what it lacks).
    path = tmp_path / "w.yaml"
    path.write_text("name: x\n" + alias_bomb(4, 10).replace("x-bomb:", "x-tree:")
                    + "".join(f"x-use{i}: *a3\n" for i in range(uses)))
    with pytest.raises(UserError) as info:
        load_workload(path)
    assert ("expand the file to" in info.value.message) is refused


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path, validate, monkeypatch):
    path = with_text(tmp_path, "name: qwen3_moe", "name: qwen3_moe\n# " + "x" * (MAX_FILE_BYTES + 10))
    read = []
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or b"")
    code, err = validate(path)
    assert code == 2 and f"a workload file is at most {MAX_FILE_BYTES:,}" in err and str(path) in err
    assert read == []


def test_a_thousand_compare_on_chips_are_refused_in_one_short_line(tmp_path, validate):
    chips = ", ".join(f"'H100:{n}'" for n in range(1, 1001))
    path = with_text(tmp_path, SHIPPED_COMPARE_ON, f"compare_on: [{chips}]")
    code, err = validate(path)
    assert code == 2 and ": compare_on: 1,000 chips" in err and f"at most {MAX_COMPARE_ON}" in err
    assert len(err) < 400          # the list is not repeated back


def test_compare_on_at_the_limit_validates(tmp_path, validate):
    chips = ", ".join(f"'H100:{n}'" for n in range(1, MAX_COMPARE_ON + 1))
    code, err = validate(with_text(tmp_path, SHIPPED_COMPARE_ON, f"compare_on: [{chips}]"))
    assert code == 0, err


@pytest.mark.parametrize("chip, words", [
    ("tpu-v9z-8", "is not an instance type or a TPU slice name"),
    ("Z900:8", "unknown chip 'Z900:8'"),
    ("A100x8", "did you mean 'A100:8'?"),
    ("v5p-7", "a v5p slice name counts TensorCores"),
])
def test_validate_resolves_compare_on_chips_as_estimate_does(tmp_path, validate, monkeypatch, capsys, chip, words):
    path = with_text(tmp_path, SHIPPED_COMPARE_ON, f'compare_on: [tpu-v6e-8, "{chip}"]')
    code, err = validate(path)
    assert code == 2 and words in err
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("compare_on"))
    assert err.startswith(f"error: {path}:{line}: compare_on: ")
    # estimate refuses the same chip with the same words
    code, _, est_err = run_cli(monkeypatch, capsys, "estimate", str(path))
    assert code == 2 and words in est_err and "compare_on" in est_err


def test_the_shipped_compare_on_chips_validate(validate):
    assert validate(QWEN_MOE)[0] == 0


def test_the_limits_apply_to_every_loader(tmp_path, monkeypatch):
    # load_workload (run, estimate, report) refuses what validate refuses.
    monkeypatch.setattr(workload_module, "MAX_VALUES", 50)
    with pytest.raises(UserError, match="at most 50"):
        load_workload(QWEN_MOE)


def test_a_compare_on_instance_from_your_price_file_is_checked_against_it(tmp_path, validate, monkeypatch, capsys):
    # validate knows the shipped tables only; estimate --prices resolves against the table with your rows.
    prices = tmp_path / "mine.csv"
    prices.write_text("cloud,region,instance_type,accelerator,chips_per_instance,on_demand,spot,commit_1y,commit_3y,"
                      "source,as_of\nonprem,dc1,my-hopper-box,H100,8,20.0,,,,our contract,2026-11-01\n")
    path = with_text(tmp_path, SHIPPED_COMPARE_ON, "compare_on: [my-hopper-box]")
    code, err = validate(path)
    assert code == 2 and "unknown chip 'my-hopper-box'" in err
    code, out, err = run_cli(monkeypatch, capsys, "estimate", str(path), "--prices", str(prices), "--format", "json")
    assert code == 0, err
    assert {row["target"] for row in json.loads(out)["estimates"]} == {"my-hopper-box"}
