"""records/csv_writer.frame_to_csv writes the very bytes of `df.to_csv(index=False, float_format=...)`,
once per distinct value; the report CSV built with it (and its per-distinct stack labels) is the
report CSV pandas wrote row by row."""

from __future__ import annotations

import decimal
import math
import subprocess
import sys
from datetime import date

import numpy as np
import pandas as pd
import pytest
from helpers_synthetic import write_results

from tpubench.output.report import build_report, render
from tpubench.output.report.csv import _stack_labels
from tpubench.output.report.format import stack_label
from tpubench.records import csv_writer
from tpubench.records.csv_safety import neutralize_frame
from tpubench.records.csv_writer import frame_to_csv

FORMATS = ("%.6g", "%.9g", "%.2f", "%.3e")
N = 12


def _edge_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "f": [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-7, 123456789.0, 2.0, -1.5, 1 / 3, 2.0, -0.0],
        "f32": np.array([1.1, math.nan, -0.0, 3, 1e30, 0.1, 2, 2, 2, 2, 0.0, 1e-7], dtype=np.float32),
        "i": range(-6, 6),
        "b": [True, False] * 6,
        # text a spreadsheet would run, plain negative numbers as text, every kind of NA, and
        # values a dict would take as equal (1, 1.0, True; 0.0, -0.0) but csv writes apart
        "o": pd.Series(["=a", "-1.5", None, math.nan, pd.NA, 1, 1.0, True, np.float64(-0.0), -0.0, 0.0,
                        "@x"], dtype=object),
        "bool_na": pd.Series([True, False, math.nan] * 4, dtype=object),
        "float_na": pd.Series([None, 0.0, -0.0, 1.5, 1.5, math.nan, 2.5, 0.0, -0.0, 1e-7, None, 3.0], dtype=object),
        "int_na": pd.Series([None, 1, 2, 1, 2, 3, None, 1, 2, 3, 4, 5], dtype=object),
        "np_float_na": pd.Series([np.float64(1.5), None, np.float64(2.5)] * 4, dtype=object),
        "s": pd.Series(['a,b', 'q"q', "l\nx", "r\rx", None, "", " sp", "t\tx", "ü", "+1", "-x", "x"],
                       dtype="string"),
        "c": pd.Categorical(["x", "y", None, "x,y", "x", "x", "y", "y", "x", "x", "=z", "y"]),
        "cf": pd.Categorical([1.5, 2.0, None, 1.5, 1.5, 1.5, 2.0, 2.0, 1.5, 1.5, 2.0, 2.0]),
        "d": [decimal.Decimal("NaN"), decimal.Decimal("1.0"), decimal.Decimal("1.00"), pd.NaT] + [None] * 8,
        "u": [[1], {"a": 1}, "x", None, 1, 2, 3, 4, 5, 6, 7, "=8"],
    })


@pytest.mark.parametrize("float_format", FORMATS)
def test_the_bytes_are_pandas_own(float_format):
    df = _edge_frame()
    assert csv_writer._coded_columns(df, float_format) is not None    # the fast path is what is compared
    for frame in (df, df.drop(columns="u"), df.iloc[:0], df[["f", "i"]], df.iloc[::-1], df.iloc[[3, 3, 4]]):
        assert frame_to_csv(frame, float_format) == frame.to_csv(index=False, float_format=float_format)


def test_blocks_whose_combinations_outgrow_a_64_bit_key():
    """A block's key is a mixed-radix number of its columns' codes. 63 distinct values make a
    radix of 64 = 2**6, so 16 columns need 96 bits: unless the key is renumbered on the way, the
    first column's code is shifted out and rows 2k and 2k + 1 (which differ only there) collide."""
    rows = range(126)
    df = pd.DataFrame({"c0": [(i % 63) * 0.5 for i in rows]}
                      | {f"c{j}": [((i // 2 + j) % 63) * 0.5 + j for i in rows] for j in range(1, 20)})
    assert all(df[c].nunique() == 63 for c in df.columns)
    assert frame_to_csv(df, "%.6g") == df.to_csv(index=False, float_format="%.6g")


def test_neutralised_frames_too():
    df = neutralize_frame(_edge_frame())
    assert frame_to_csv(df, "%.6g") == df.to_csv(index=False, float_format="%.6g")
    assert "'=a" in frame_to_csv(df, "%.6g") and ",-1.5," in frame_to_csv(df, "%.6g")


def test_the_text_of_one_cell_is_csvs_own():
    quote = csv_writer._Quoter()
    assert [quote(v) for v in ("plain", "a,b", 'q"q', "l\nx", "", 1.5, True)] == [
        "plain", '"a,b"', '"q""q"', '"l\nx"', "", "1.5", "True"]


@pytest.mark.parametrize("frame, float_format", [
    (pd.DataFrame({"f": pd.array([1.5, None], dtype="Float64"), "g": [1.0, 2.0]}), "%.6g"),   # nullable
    (pd.DataFrame({"t": pd.to_datetime(["2026-01-22", None]), "g": [1.0, 2.0]}), "%.6g"),  # datetimes
    (pd.DataFrame([[1.5, "x"]], columns=pd.MultiIndex.from_tuples([("a", "b"), ("a", "c")])), "%.6g"),
    (pd.DataFrame({"only": ["", "x"]}), "%.6g"),                         # a lone empty field is quoted
    (pd.DataFrame({"f": [1.5], "g": [2.0]}), None),                      # no float_format
])
def test_what_it_does_not_handle_pandas_writes(frame, float_format):
    assert csv_writer._coded_columns(frame, float_format) is None
    assert frame_to_csv(frame, float_format) == frame.to_csv(index=False, float_format=float_format)


def test_stack_labels_are_stack_label_of_every_row():
    frame = pd.DataFrame({
        "server_name": pd.Series(["vllm", "vllm", None, math.nan, "sglang", "vllm", "vllm", "vllm", None, "vllm"],
                                 dtype=object),
        "server_version": pd.Series(["0.11.0", None, "x", None, 1, 1.0, True, -0.0, None, 0.0], dtype=object),
        "backend": pd.Series(["torch", "torch", "jax", None, "torch", "torch", "torch", "torch", math.nan,
                              "torch"], dtype=object),
        "other": range(10),
    })
    expected = [stack_label(row) for _, row in frame.iterrows()]
    assert _stack_labels(frame) == expected
    assert expected[:4] == ["vllm 0.11.0", "vllm", "jax", "None"] and expected[5:8] == ["vllm 1.0", "vllm True",
                                                                                        "vllm -0.0"]
    assert _stack_labels(frame.drop(columns=["server_name", "server_version"])) == [str(v) for v in frame["backend"]]
    unhashable = frame.assign(server_version=pd.Series([[1]] * 10, dtype=object))
    assert _stack_labels(unhashable) == [stack_label(row) for _, row in unhashable.iterrows()]


def test_the_report_csv_is_what_pandas_wrote_row_by_row(tmp_path):
    write_results(tmp_path, [
        dict(accelerator="NVIDIA H100 80GB HBM3", chips=8, batch_size=8, ttft_s=0.05, e2e_s=0.7, workload="=evil"),
        dict(accelerator="TPU v6 lite", device="tpu", batch_size=8, ttft_s=0.07, e2e_s=0.9, valid=False,
             invalid_reasons=["-recompiled"]),
        dict(status="failed", error="@oom"),
    ])
    data = build_report(tmp_path, today=date(2026, 12, 2), warn=lambda _: None)
    # render_csv as it was before frame_to_csv: stack labels by iterrows, pandas' own writer.
    from tpubench.money.cost import unit_keys
    from tpubench.scenarios import registry

    priced = data.priced.assign(priced=True, unpriced_reason="",
                                stack=[stack_label(r) for _, r in data.priced.iterrows()],
                                cost_basis=unit_keys(data.priced).map({u.key: u.basis_words for u in registry.units()}))
    unpriced = data.unpriced.rename(columns={"reason": "unpriced_reason"}).assign(priced=False)
    table = pd.concat([priced, unpriced], ignore_index=True)
    table = table[["priced", "unpriced_reason"] + [c for c in table.columns if c not in ("priced", "unpriced_reason")]]
    expected = neutralize_frame(table).to_csv(index=False, float_format="%.6g")
    assert render(data, "csv") == expected and "'=evil" in expected


def test_importing_the_module_does_not_import_pandas():
    code = "import sys, tpubench.records.csv_writer; assert 'pandas' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
