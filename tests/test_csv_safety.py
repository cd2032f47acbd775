"""CSV formula injection: every CSV tpubench writes neutralises text cells a spreadsheet would run as
a formula (a `'` in front), and keeps numbers numeric."""

from __future__ import annotations

import csv
import io
import math
import re
import subprocess
import sys
from datetime import date

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES
from helpers_synthetic import write_results

from tpubench.cli import main
from tpubench.money import pricing, sky_prices
from tpubench.records.csv_safety import DANGEROUS_PREFIXES, neutralize_cell, neutralize_frame

EVIL = "=cmd|' /C calc'!A0"
H100 = "NVIDIA H100 80GB HBM3"
TODAY = date(2026, 12, 2)
PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


# ----------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("text, expected", [
    ("=1+1", "'=1+1"),
    ("+1+1", "'+1+1"),
    ("-1+1", "'-1+1"),
    ("@SUM(A1)", "'@SUM(A1)"),
    ("\t=1+1", "'\t=1+1"),
    ("\r=1+1", "'\r=1+1"),
    (EVIL, "'" + EVIL),
    ("=", "'="),
    ("-", "'-"),
    ("-inf", "'-inf"),
    ("- 1", "'- 1"),
    ("-1.5 ", "'-1.5 "),
    ("-1_000", "'-1_000"),
    # Plain decimal numbers cannot be formulas: left as they are.
    ("-1.5", "-1.5"),
    ("+3", "+3"),
    ("-2e-05", "-2e-05"),
    ("-.5", "-.5"),
    # Safe text: the dangerous character is not the first one.
    ("qwen3_moe", "qwen3_moe"),
    ("a=b", "a=b"),
    (" =1+1", " =1+1"),
    ("'=1+1", "'=1+1"),
    ("https://example.com/?a=-1", "https://example.com/?a=-1"),
    ("2026-01-22", "2026-01-22"),
    ("", ""),
])
def test_neutralize_cell(text, expected):
    assert neutralize_cell(text) == expected


@pytest.mark.parametrize("value", [-1.5, -3, 0, np.float64(-2.0), np.int64(-7), None, math.nan, pd.NA, True])
def test_non_strings_are_left_alone(value):
    assert neutralize_cell(value) is value


def test_neutralize_frame_touches_only_text_and_returns_a_copy():
    df = pd.DataFrame({
        "name": ["=1+1", "ok", None, "-2.5"],
        "mixed": pd.Series(["@x", -3, math.nan, 4.5], dtype=object),
        "f": [-1.5, 2.0, math.nan, -0.25],
        "i": [-1, 0, 1, 2],
        "b": [True, False, True, False],
        "s": pd.Series(["+x", pd.NA, "y", "\tz"], dtype="string"),
        "c": pd.Categorical(["-a", "b", "-a", None]),
        "=SUM(A1)": ["a", "b", "c", "d"],
    })
    before = df.copy()
    out = neutralize_frame(df)
    pd.testing.assert_frame_equal(df, before)                          # the input is not changed
    assert list(out.columns) == ["name", "mixed", "f", "i", "b", "s", "c", "'=SUM(A1)"]
    assert out["name"].tolist()[:2] == ["'=1+1", "ok"] and pd.isna(out["name"][2])
    assert out["name"][3] == "-2.5"
    assert out["mixed"][0] == "'@x" and out["mixed"][1] == -3 and math.isnan(out["mixed"][2])
    assert out["mixed"][3] == 4.5
    pd.testing.assert_series_equal(out["f"], df["f"])
    pd.testing.assert_series_equal(out["i"], df["i"])
    pd.testing.assert_series_equal(out["b"], df["b"])
    assert out["s"].dtype == df["s"].dtype
    assert out["s"][0] == "'+x" and out["s"][1] is pd.NA and out["s"][3] == "'\tz"
    assert out["c"].tolist()[:3] == ["'-a", "b", "'-a"] and pd.isna(out["c"][3])
    # The CSV, computed by hand: numbers unquoted and unchanged, NaN/None/NA empty.
    assert out.to_csv(index=False, lineterminator="\n") == (
        "name,mixed,f,i,b,s,c,'=SUM(A1)\n"
        "'=1+1,'@x,-1.5,-1,True,'+x,'-a,a\n"
        "ok,-3,2.0,0,False,,b,b\n"
        ",,,1,True,y,'-a,c\n"
        "-2.5,4.5,-0.25,2,False,'\tz,,d\n")


def test_neutralize_frame_handles_empty_duplicate_and_non_str_column_names():
    empty = neutralize_frame(pd.DataFrame(columns=["-x", "y"]))
    assert list(empty.columns) == ["'-x", "y"] and empty.empty
    dup = pd.DataFrame([["=a", "=b", 1]], columns=["k", "k", 0])
    out = neutralize_frame(dup)
    assert out.values.tolist() == [["'=a", "'=b", 1]] and list(out.columns) == ["k", "k", 0]


def test_importing_the_module_does_not_import_pandas():
    code = "import sys, tpubench.records.csv_safety; assert 'pandas' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- end to end


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _assert_safe(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            if cell.startswith(DANGEROUS_PREFIXES):
                assert PLAIN_NUMBER.fullmatch(cell), f"unsafe cell {cell!r}"


def _floats(records: list[dict], column: str) -> list[float]:
    return [float(r[column]) for r in records if r[column] != ""]


@pytest.fixture
def evil_results(tmp_path):
    out = tmp_path / "results"
    write_results(out, [
        dict(workload=EVIL, accelerator=H100, chips=8, batch_size=64, host="@SUM(1+1)"),
        dict(workload=EVIL, accelerator="TPU v6 lite", device="tpu", batch_size=8, host="\t=1+1"),
        dict(workload=EVIL, status="failed", error="-2+3+cmd|' /C calc'!A0", host="+1+1"),
    ])
    return out


def _cli(monkeypatch, capsys, *args) -> str:
    monkeypatch.setattr(sys, "argv", ["tpubench", *args])
    main()
    return capsys.readouterr().out


def test_report_csv_neutralises_text_and_keeps_numbers(evil_results, monkeypatch, capsys):
    text = _cli(monkeypatch, capsys, "report", str(evil_results), "--format", "csv")
    rows = _rows(text)
    _assert_safe(rows)
    records = [dict(zip(rows[0], r)) for r in rows[1:]]
    assert len(records) > 3 and {r["workload"] for r in records} == {"'" + EVIL}
    assert {r["host"] for r in records} - {""} == {"'@SUM(1+1)", "'\t=1+1"}     # unpriced rows: no host
    assert any(r["unpriced_reason"].startswith("run failed") for r in records)
    priced = [r for r in records if r["priced"] == "True"]
    for column in ("batch_size", "usd_per_instance_hour", "output_tokens_per_s", "blended_usd_per_mtok"):
        assert len(_floats(priced, column)) == len(priced)
    # Read back with pandas, numeric columns are still numbers.
    table = pd.read_csv(io.StringIO(text))
    assert pd.api.types.is_float_dtype(table["blended_usd_per_mtok"])
    assert pd.api.types.is_numeric_dtype(table["batch_size"])


def test_export_csv_neutralises_text_and_keeps_numbers(evil_results, tmp_path, monkeypatch, capsys):
    out = tmp_path / "t.csv"
    _cli(monkeypatch, capsys, "export", str(evil_results), "--to", "csv", "--out", str(out))
    rows = _rows(out.read_text(encoding="utf-8"))
    _assert_safe(rows)
    records = [dict(zip(rows[0], r)) for r in rows[1:]]
    assert len(records) == 3 and {r["workload"] for r in records} == {"'" + EVIL}
    assert {r["error"] for r in records} == {"", "'-2+3+cmd|' /C calc'!A0"}
    ok = [r for r in records if r["status"] == "ok"]
    assert len(_floats(ok, "output_tokens_per_s")) == 2 and len(_floats(records, "batch_size")) == 3
    back = pd.read_csv(out)
    assert pd.api.types.is_float_dtype(back["output_tokens_per_s"])
    assert (back["schema_version"] == 1).all()


def test_budget_csv_neutralises_text_and_keeps_negative_numbers(evil_results, monkeypatch, capsys):
    text = _cli(monkeypatch, capsys, "budget", "tokens", str(evil_results), "--tokens-per-day", "1e9", "--format", "csv",
                "--current", "aws/eu-west-2/p5.48xlarge")
    rows = _rows(text)
    _assert_safe(rows)
    records = [dict(zip(rows[0], r)) for r in rows[1:]]
    assert records and {r["workload"] for r in records} == {"'" + EVIL}
    assert len(_floats(records, "monthly_usd")) == len(records)
    savings = _floats(records, "saving_vs_current_usd_per_month")
    assert savings and min(savings) < 0 < max(savings)     # dearer and cheaper than the current one
    assert any(r["saving_vs_current_usd_per_month"].startswith("-") for r in records)   # unquoted


def test_price_csv_round_trip(tmp_path):
    table = sky_prices.import_skypilot(FIXTURES / "skypilot_aws_vms.csv", "aws", as_of="2026-11-01",
                                       source="https://example.com/vms.csv?rev=-1")
    table.loc[0, "source"] = "=HYPERLINK(\"http://evil\")"
    path = pricing.write_price_csv(table, tmp_path / "aws.csv")
    rows = _rows(path.read_text(encoding="utf-8"))
    _assert_safe(rows)
    assert rows[0] == list(pricing.BASIC_COLUMNS)
    prices = pricing.load_prices([path], shipped=False, today=TODAY)
    wide = pricing.prices_wide(prices)
    assert len(wide) == len(table) and set(prices["as_of"]) == {"2026-11-01"}
    assert set(prices["source"]) == {"https://example.com/vms.csv?rev=-1", "'=HYPERLINK(\"http://evil\")"}
    back = wide.set_index(["region", "instance_type"])
    for r in table.itertuples(index=False):
        got = back.loc[(r.region, r.instance_type)]
        assert got["chips_per_instance"] == r.chips_per_instance
        for plan in ("on_demand", "spot"):
            want = getattr(r, plan)
            assert (math.isnan(want) and math.isnan(got[plan])) or got[plan] == pytest.approx(want, rel=1e-5)


def test_pricing_import_skypilot_cli_writes_a_valid_price_file(tmp_path, monkeypatch, capsys):
    out = tmp_path / "gcp.csv"
    _cli(monkeypatch, capsys, "pricing", "import-skypilot", str(FIXTURES / "skypilot_gcp_vms.csv"),
         "--cloud", "gcp", "--out", str(out))
    _assert_safe(_rows(out.read_text(encoding="utf-8")))
    _cli(monkeypatch, capsys, "pricing", "validate", str(out))
