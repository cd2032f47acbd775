"""The results cache (output/results_cache.py): what comes out is what parsing every file gives, and
a changed, damaged or foreign cache is not used."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers_synthetic import make_result

from tpubench.output import results_cache, rows_file
from tpubench.output.frames import flatten, load_results
from tpubench.output.python_strings import python_strings
from tpubench.records.result import read_results


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("TPUBENCH_CACHE_DIR", str(folder))
    monkeypatch.setattr(results_cache, "MIN_FILES", 1)
    return folder


def _write(folder: Path, n: int, **kw) -> Path:
    result = make_result(batch_size=1 + n, seed=n, workload="w" if n % 2 else "v",
                         status="failed" if n == 3 else "ok", error="out of memory" if n == 3 else None, **kw)
    if n == 4:     # a row without some metrics and with a None one: NaN in pandas, whether cached or not
        result.metrics = {k: (None if k == "mfu" else v) for k, v in list(result.metrics.items())[:10]}
        result.metrics["mfu"] = None
    path = folder / f"r{n:02d}.json"
    path.write_text(result.model_dump_json(indent=1), encoding="utf-8")
    return path


@pytest.fixture
def results(tmp_path) -> Path:
    folder = tmp_path / "results"
    (folder / "sub").mkdir(parents=True)
    for n in range(8):
        _write(folder / ("sub" if n == 6 else ""), n)
    (folder / "broken.json").write_text("{not json", encoding="utf-8")
    return folder


def _reference(folder: Path) -> pd.DataFrame:
    """What load_results built before the cache: one frame from the row dicts."""
    rows = [flatten(r, str(f)) for f, r in read_results(folder, warn=lambda m: None)]
    return python_strings(pd.DataFrame)(rows)       # text as load_results holds it (output/python_strings.py)


def _load(folder, warnings=None):
    return load_results(folder, warn=(warnings.append if warnings is not None else lambda m: None), keep="all")


def test_cold_and_warm_loads_equal_parsing_every_file(cache, results):
    reference = _reference(results)
    cold_warnings, warm_warnings = [], []
    cold = _load(results, cold_warnings)
    files = list(cache.glob("results-*.rows"))
    assert len(files) == 1
    written = files[0].stat().st_mtime_ns
    warm = _load(results, warm_warnings)
    assert files[0].stat().st_mtime_ns == written          # nothing changed: not rewritten
    pd.testing.assert_frame_equal(cold, warm)
    assert list(cold.dtypes) == list(warm.dtypes)
    expected = reference[cold.columns.drop("older_runs")]
    pd.testing.assert_frame_equal(cold.drop(columns="older_runs"), expected)
    # The unreadable file is named on every load, cached or not.
    assert len(cold_warnings) == len(warm_warnings) == 1 and "broken.json" in warm_warnings[0]


def test_added_changed_and_removed_files_are_seen(cache, results):
    _load(results)
    _write(results, 8)                                     # added
    changed = results / "r01.json"
    data = json.loads(changed.read_text())
    data["metrics"]["output_tokens_per_s"] = 12345.0
    tmp = results / "new.tmp"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, changed)                                # rewritten as results are: a new file
    (results / "r02.json").unlink()                         # removed
    df = _load(results)
    pd.testing.assert_frame_equal(df.drop(columns="older_runs"),
                                  _reference(results)[df.columns.drop("older_runs")])
    assert df.loc[df["file"] == str(changed), "output_tokens_per_s"].item() == 12345.0
    assert str(results / "r02.json") not in set(df["file"])
    assert str(results / "r08.json") in set(df["file"])


@pytest.mark.parametrize("damage", ["truncate", "flip", "fingerprint", "garbage"])
def test_a_damaged_or_foreign_cache_is_ignored_and_rewritten(cache, results, monkeypatch, damage):
    first = _load(results)
    (path,) = cache.glob("results-*.rows")
    blob = bytearray(path.read_bytes())
    if damage == "truncate":
        blob = blob[:len(blob) // 2]
    elif damage == "flip":
        blob[-5] ^= 0xFF                       # inside the float block: only the checksum tells
    elif damage == "garbage":
        blob = bytearray(b"not a cache at all")
    path.write_bytes(bytes(blob))
    if damage == "fingerprint":               # written by other code
        monkeypatch.setattr(results_cache, "_fingerprint", lambda: "another tpubench")
    assert results_cache._read_cache(path) is None
    again = _load(results)
    pd.testing.assert_frame_equal(first, again)
    assert results_cache._read_cache(path) is not None       # rewritten, and sound


def test_off_writes_nothing_and_small_sets_are_not_cached(tmp_path, results, monkeypatch):
    monkeypatch.setenv("TPUBENCH_CACHE_DIR", "off")
    monkeypatch.setattr(results_cache, "MIN_FILES", 1)
    assert results_cache.cache_file(results) is None
    _load(results)
    monkeypatch.setenv("TPUBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(results_cache, "MIN_FILES", 100)
    _load(results)
    assert not (tmp_path / "cache").exists()


def test_an_unwritable_cache_folder_costs_only_time(tmp_path, results, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TPUBENCH_CACHE_DIR", str(blocker / "cache"))     # under a file: cannot exist
    monkeypatch.setattr(results_cache, "MIN_FILES", 1)
    pd.testing.assert_frame_equal(_load(results), _load(results))


def _column_kinds() -> dict[str, list]:
    """Columns of each form the cache file has (output/rows_file.py), with the values that tell a
    careless encoding: True, 1 and 1.0 are equal keys; 0.0 and -0.0 are equal floats."""
    n = 6
    return {
        "floats": [1.5, -0.0, 0.0, math.nan, math.inf, 1e-300],
        "ints": [1, -2, 2 ** 63 - 1, -(2 ** 63), 0, 7],
        "big_ints": [2 ** 63, 1, 1, 1, 1, 1],                          # beyond int64: kept as they are
        "repeated": ["a", "b", "a", "a", None, "b"],
        "equal_keys": [True, 1, 1.0, True, 1, 1.0],
        "zeros": [0.0, -0.0, 0, 0.0, -0.0, 0],
        "nans": [math.nan, None, math.nan, 2, math.nan, None],
        "unique": [f"key-{i}" for i in range(n)],
        "bools": [True, False, True, True, False, True],
        "nested": [[1], [1], [1], [1], [1], [1]],                      # not a key: kept as it is
    }


def _same(a, b) -> bool:
    """Equal values of the same types, NaN equal to NaN and -0.0 told from 0.0."""
    return len(a) == len(b) and all(type(x) is type(y) and (x == y or x != x and y != y)
                                    and (type(x) is not float or math.copysign(1, x) == math.copysign(1, y))
                                    for x, y in zip(a, b))


def test_the_cache_file_gives_back_every_value_of_every_kind():
    columns = _column_kinds()
    meta, decoded = rows_file.decode(rows_file.encode({"rows": 6, "files": ["f"] * 6}, columns))
    assert list(decoded) == list(columns) and meta["files"] == ["f"] * 6
    for name, values in columns.items():
        got = decoded[name]
        if isinstance(got, np.ndarray):       # float and int columns: numpy makes the pandas column
            assert got.dtype == (np.float64 if name in ("floats", "zeros") else np.int64), name
            got = got.tolist()
        if name == "zeros":     # ints among floats come back as the floats pandas makes of them, signs kept
            assert _same(got, [float(v) for v in values]), (name, got)
            pd.testing.assert_series_equal(pd.Series(got), pd.Series(values))
            continue
        assert _same(got, values), (name, got, values)
    assert rows_file.decode(rows_file.encode({"rows": 0}, {})) == ({"rows": 0, **_EMPTY}, {})


_EMPTY = {"order": [], "float_columns": [], "int_columns": [], "coded_columns": [], "columns": {}}


@pytest.mark.parametrize("where", [0, 9, 30, 100, -1])
def test_any_damaged_byte_of_a_cache_file_is_seen(where):
    blob = bytearray(rows_file.encode({"rows": 6}, _column_kinds()))
    blob[where] ^= 0x01
    assert rows_file.decode(bytes(blob)) is None


def test_a_sound_file_with_codes_out_of_range_is_ignored(cache, results, monkeypatch):
    _load(results)
    (path,) = cache.glob("results-*.rows")
    meta, _ = rows_file.decode(path.read_bytes())
    dtype = meta["coded_columns"][0][1]
    # One distinct value, and every row pointing past it: a file only a bug could write, checksum sound.
    monkeypatch.setattr(rows_file, "_coded", lambda values, types: (dtype, ["only"], [5] * len(values)))
    path.write_bytes(rows_file.encode({k: meta[k] for k in ("fingerprint", "rows", "files", "stats",
                                                             "environment_keys")}, {"status": ["x"] * meta["rows"]}))
    assert results_cache._read_cache(path) is None


_REPORT = """
import hashlib, json, sys
from tpubench.output.frames import load_results
from tpubench.output.report import build_report, render
html = render(build_report(load_results(sys.argv[1])), "html")
html = html.replace(html[html.index("Generated "):html.index(" by tpubench")], "")
print(json.dumps({"html": hashlib.sha256(html.encode()).hexdigest(), "figures": html.count("<figure"),
                  "matplotlib": "matplotlib" in sys.modules}))
"""


@pytest.mark.slow   # two fresh Python processes, each building a whole HTML report
def test_a_report_run_again_gives_the_same_html_and_neither_imports_matplotlib(results, cache):
    def report():
        done = subprocess.run([sys.executable, "-c", _REPORT, str(results)], capture_output=True, text=True,
                              env={**os.environ, "TPUBENCH_CACHE_DIR": str(cache)}, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    cold, warm = report(), report()
    assert cold["figures"] > 0 and not cold["matplotlib"]      # the browser draws the figures
    assert warm == cold
