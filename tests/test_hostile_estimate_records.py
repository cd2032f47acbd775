"""Hostile estimate records (issue 47, item 4): a record read back from DIR/estimates/*.json
(estimate/records.py) is checked as its writer writes it (finite, positive, low <= point <= high,
types) and a bad one is skipped with one line naming the file and the field, never an internal
error, at the library level and through `tpubench report`. Each case starts from a real record,
written by `tpubench estimate --out` as a user's run writes it, with one thing broken.

Before the check: a `[` nested 100,000 deep was a RecursionError, a 0 lower bound a
ZeroDivisionError in the verdict, a list where a number belongs a TypeError, and negative or
infinite $ reached the answer table.
"""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path

import pandas as pd
import pytest
from helpers_cli import run_cli

from tpubench.estimate.records import check_record, read_records

WORKLOAD = Path("workloads/qwen3_moe.yaml")
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> dict:
    """A real record: `tpubench estimate workloads/qwen3_moe.yaml --on trn2 --out DIR`'s."""
    from tpubench.estimate.command import run_estimate
    from tpubench.estimate.records import write_record
    from tpubench.estimate.render import payload
    from tpubench.money.pricing import load_prices
    from tpubench.output.published.store import shipped_published

    report = run_estimate(WORKLOAD, ["trn2"], prices=load_prices(), published=shipped_published(checked=True))
    path = write_record(payload(report), report.workload, tmp_path_factory.mktemp("record"))
    return json.loads(path.read_text())


def _priced(record: dict) -> int:
    return next(i for i, row in enumerate(record["estimates"]) if row.get("plan"))


def _folder(tmp_path: Path, record: dict, bad_text: str) -> tuple[Path, Path]:
    """A results folder holding the good record and a bad one; (the folder, the bad file)."""
    folder = tmp_path / "results" / "estimates"
    folder.mkdir(parents=True)
    (folder / "good.json").write_text(json.dumps(record))
    bad = folder / "bad.json"
    bad.write_bytes(bad_text.encode("utf-8", "surrogateescape"))    # not_utf8: a Latin-1 byte
    return folder.parent, bad


def _set(key: str, value):
    def change(record: dict) -> str:
        record["estimates"][_priced(record)][key] = value
        return json.dumps(record)
    return change


HOSTILE = {
    "nested_100k": (lambda r: DEEP, "JSON nested too deeply"),
    "zero_lower_bound": (_set("blended_usd_per_mtok_low", 0), "blended_usd_per_mtok_low: 0 is not a positive number"),
    "list_for_a_number": (_set("blended_usd_per_mtok", [1.0, 2.0]), "blended_usd_per_mtok: expected a single value"),
    "negative_usd": (_set("blended_usd_per_mtok", -5.0), "blended_usd_per_mtok: -5.0 is not a positive number"),
    "infinite_usd": (lambda r: _set("output_usd_per_mtok_high", 1.0)(r).replace('"output_usd_per_mtok_high": 1.0',
                                                                                  '"output_usd_per_mtok_high": 1e999'),
                     "output_usd_per_mtok_high: inf is not a finite number"),
    "nan_throughput": (lambda r: _set("output_tokens_per_s_per_chip", 1.0)(r).replace(
        '"output_tokens_per_s_per_chip": 1.0', '"output_tokens_per_s_per_chip": NaN'), "is not a finite number"),
    "bound_above_point": (_set("blended_usd_per_mtok_low", 1e6), "is not within its interval"),
    "chips_as_text": (_set("chips", "8"), "chips: expected a number, got text"),
    "huge_int": (_set("usd_per_chip_hour", 10 ** 400), "usd_per_chip_hour: "),
    "target_a_number": (_set("target", 8), "target: expected text"),
    "count_fractional": (_set("own_rows", 0.5), "own_rows: 0.5 is not a count"),
    "missing_workload": (lambda r: json.dumps({**r, "estimates": [{k: v for k, v in row.items() if k != "workload"}
                                                                   for row in r["estimates"]]}), "workload: missing"),
    "row_not_an_object": (lambda r: json.dumps({**r, "estimates": [3]}), "expected an object"),
    "made_at_a_list": (lambda r: json.dumps({**r, "made_at": ["2026"]}), "made_at: expected text"),
    "not_utf8": (lambda r: json.dumps(r).replace("estimate", "estim\udce9te", 1), "not a tpubench estimate record"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_record_is_skipped_with_one_line_naming_it(name, record, tmp_path):
    make, needle = HOSTILE[name]
    text = make(copy.deepcopy(record))
    folder, bad = _folder(tmp_path, record, text)
    seen: list[str] = []
    rows = read_records(folder, warn=seen.append)
    assert len(seen) == 1 and str(bad) in seen[0] and needle in seen[0], seen
    assert "\n" not in seen[0] and set(rows["file"]) == {str(folder / "estimates" / "good.json")}
    assert len(rows) == len(record["estimates"])


def test_the_real_record_passes_its_check(record):
    check_record(record)
    assert any(row.get("plan") for row in record["estimates"])


# --- a small fuzz over record mutations ------------------------------------------------------------

VALUES = [0, -1, -0.0, 1e-300, 1e300, "1e999", math.nan, "x", "", True, False, None, [1], {"a": 1}, 10 ** 400, 2.5]


def _mutate(record: dict, rng: random.Random) -> str:
    """One random change of a real record: a value replaced, a key dropped, a bound swapped, the
    head spoiled, or the text cut short."""
    r = copy.deepcopy(record)
    row = rng.choice(r["estimates"])
    kind = rng.randrange(6)
    if kind <= 2:
        key = rng.choice(sorted(row))
        value = rng.choice(VALUES)
        row[key] = value
        text = json.dumps(r)
        return text.replace('"1e999"', "1e999").replace("NaN", rng.choice(["NaN", "Infinity", "-Infinity"]))
    if kind == 3:
        del row[rng.choice(sorted(row))]
    elif kind == 4:
        stems = [k[:-4] for k in row if k.endswith("_low") and f"{k[:-4]}_high" in row]
        if stems:
            stem = rng.choice(stems)
            row[f"{stem}_low"], row[f"{stem}_high"] = row[f"{stem}_high"], row[f"{stem}_low"]
    else:
        r[rng.choice(["source", "estimates", "workload_file", "made_at"])] = rng.choice(VALUES)
    text = json.dumps(r)
    return text[:rng.randrange(len(text))] if rng.random() < 0.1 else text


def _sane(rows: pd.DataFrame) -> None:
    """What the answer may rely on in the rows of records that passed: finite positive $ and
    throughput, each estimate inside its interval."""
    for stem in ("blended_usd_per_mtok", "output_tokens_per_s_per_chip", "ttft_s", "tpot_s"):
        if stem not in rows:
            continue
        value, low, high = (pd.to_numeric(rows[c], errors="raise") for c in (stem, f"{stem}_low", f"{stem}_high"))
        known = value.notna() & low.notna() & high.notna()
        assert (value[known] > 0).all() and (low[known] <= value[known]).all() and (value[known] <= high[known]).all()
        assert not (value.abs() == math.inf).any()


def test_fuzzed_records_end_in_one_warning_or_sane_rows(record, tmp_path):
    rng = random.Random(47)
    folder = tmp_path / "results" / "estimates"
    folder.mkdir(parents=True)
    for i in range(150):
        (folder / f"r{i:03d}.json").write_text(_mutate(record, rng))
    seen: list[str] = []
    rows = read_records(folder.parent, warn=seen.append)
    skipped = {line.split(": ", 1)[0].removeprefix("skipping ") for line in seen}
    assert len(skipped) == len(seen) and all("\n" not in line for line in seen)
    kept = set(rows["file"]) if len(rows) else set()
    assert not kept & skipped and len(kept | skipped) == 150
    assert 20 < len(seen) < 150                                 # the fuzz reaches both sides
    _sane(rows)


def test_the_report_skips_hostile_records_with_one_line_each(record, tmp_path, monkeypatch, capsys):
    rng = random.Random(4747)
    folder = tmp_path / "results" / "estimates"
    folder.mkdir(parents=True)
    (folder / "good.json").write_text(json.dumps(record))
    texts = [HOSTILE[name][0](copy.deepcopy(record)) for name in sorted(HOSTILE) if name != "not_utf8"]
    texts += [_mutate(record, rng) for _ in range(25)]
    for i, text in enumerate(texts):
        (folder / f"bad{i:02d}.json").write_text(text)
    code, out, err = run_cli(monkeypatch, capsys, "report", str(folder.parent), "--format", "csv", "--table", "answer")
    assert code == 0 and "Traceback" not in err and "internal error" not in err, err
    skipping = [line for line in err.splitlines() if "skipping" in line and "estimate record" in line]
    assert len(skipping) >= len(HOSTILE) - 1 and len({line.split(": not a")[0] for line in skipping}) == len(skipping)
    assert "good.json" not in err
    assert "Trainium2 ×16 (trn2)" in out                       # the good record still answers
