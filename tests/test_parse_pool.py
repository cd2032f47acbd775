"""Result files parsed in worker processes (output/parse_pool.py): the same columns, positions,
keys and warnings, in the same order, as parsing them in this process."""

from __future__ import annotations

import math
import sys

import pandas as pd
import pytest
from helpers_synthetic import make_result

from tpubench.output import forked, parse_pool
from tpubench.output.frames import flatten, load_results
from tpubench.output.parse_pool import ParsedRows, parse_files

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only"),
              # A worker process of the suite may have imported JAX for an earlier test; JAX warns at any fork.
              pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")]


@pytest.fixture
def files(tmp_path) -> list[str]:
    paths = []
    for n in range(9):
        path = tmp_path / f"r{n}.json"
        if n in (2, 7):
            path.write_text("{not json" if n == 2 else '{"schema_version": 1}', encoding="utf-8")
        else:
            result = make_result(batch_size=1 + n, seed=n, workload="w" if n % 2 else "v")
            if n == 5:      # a row that lacks most metrics: NaN there, whichever process parsed it
                result.metrics = dict(list(result.metrics.items())[:3])
            path.write_text(result.model_dump_json(), encoding="utf-8")
        paths.append(str(path))
    return paths


@pytest.fixture(autouse=True)
def _no_other_threads(monkeypatch):
    """Workers as in a process of one thread, whatever threads earlier tests of this process left."""
    monkeypatch.setattr(forked, "other_threads_running", lambda: False)


def _parsed(files, monkeypatch, workers: int):
    monkeypatch.setattr(parse_pool, "PARALLEL_MIN_FILES", 1 if workers else 10**9)
    monkeypatch.setattr(forked, "usable_cpus", lambda: workers)
    said: list[str] = []
    return parse_files(files, flatten, said.append), said


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_workers_give_what_this_process_gives(files, monkeypatch):
    here, said_here = _parsed(files, monkeypatch, 0)
    assert forked.workers_for(len(files), parse_pool.PARALLEL_MIN_FILES) == 0
    pooled, said_pooled = _parsed(files, monkeypatch, 2)
    assert forked.workers_for(len(files), parse_pool.PARALLEL_MIN_FILES) == 2   # chunks of a few files, some left out
    assert pooled.at == here.at == [0, 1, 3, 4, 5, 6, 8]
    assert pooled.keys == here.keys
    assert list(pooled.columns) == list(here.columns)
    for name, values in here.columns.items():
        assert all(_same(a, b) for a, b in zip(values, pooled.columns[name], strict=True)), name
    assert said_pooled == said_here and len(said_here) == 2
    assert "r2.json" in said_here[0] and "r7.json" in said_here[1]


def test_columns_are_what_a_frame_of_the_rows_would_hold(files, monkeypatch):
    pooled, _ = _parsed(files, monkeypatch, 2)
    rows = pd.DataFrame([flatten(r, f) for r, f in _results(files)])
    assert list(rows.columns) == list(pooled.columns)
    pd.testing.assert_frame_equal(pd.DataFrame(pooled.columns), rows)


def _results(files):
    from tpubench.records.result import read_usable_result

    out = []
    for f in files:
        result = read_usable_result(f, lambda m: None)
        if result is not None:
            out.append((result, f))
    return out


def test_chunks_join_with_names_first_seen_and_nan_where_missing():
    joined = ParsedRows()
    joined.extend(ParsedRows.of_rows([0, 2], ["a", "b"], [{"x": 1}, {"x": 2, "y": 3}]), 0)
    joined.extend(ParsedRows.of_rows([1], ["c"], [{"z": 4}]), 3)
    assert joined.at == [0, 2, 4] and joined.keys == ["a", "b", "c"]
    assert list(joined.columns) == ["x", "y", "z"]
    assert joined.columns["x"][:2] == [1, 2] and math.isnan(joined.columns["x"][2])
    assert math.isnan(joined.columns["y"][0]) and joined.columns["y"][1] == 3
    assert [math.isnan(v) for v in joined.columns["z"][:2]] == [True, True] and joined.columns["z"][2] == 4


def test_a_report_load_through_workers_is_the_same_frame(files, tmp_path, monkeypatch):
    monkeypatch.setenv("TPUBENCH_CACHE_DIR", "off")
    folder = tmp_path
    here = load_results(folder, warn=lambda m: None, keep="all")
    monkeypatch.setattr(parse_pool, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    pooled = load_results(folder, warn=lambda m: None, keep="all")
    pd.testing.assert_frame_equal(pooled, here)


def test_rows_of_interleaved_shapes_are_columns_in_first_seen_order():
    rows = [{"a": 1, "b": [1, 2]}, {"c": (1, 2), "a": 2}, {"a": 3, "b": [3]}, {}, {"a": 5, "b": None}]
    columns = ParsedRows.of_rows(list(range(5)), list("vwxyz"), rows).columns
    assert list(columns) == ["a", "b", "c"]
    assert columns["a"][:3] == [1, 2, 3] and math.isnan(columns["a"][3]) and columns["a"][4] == 5
    assert columns["b"][0] == [1, 2] and math.isnan(columns["b"][1]) and columns["b"][2] == [3]
    assert columns["b"][4] is None       # a value as the row has it; a list in a cell stays a list
    assert columns["c"][1] == (1, 2) and all(math.isnan(columns["c"][i]) for i in (0, 2, 3, 4))
    one_shape = ParsedRows.of_rows([0, 1], ["k", "l"], [{"x": 1, "y": "a"}, {"x": 2, "y": "b"}]).columns
    assert one_shape == {"x": [1, 2], "y": ["a", "b"]}


def test_a_cache_written_behind_the_report_is_read_whole_by_the_next_load(files, tmp_path, monkeypatch):
    from tpubench.output import results_cache

    monkeypatch.setenv("TPUBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(results_cache, "MIN_FILES", 1)
    monkeypatch.setattr(parse_pool, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    children, imported = [], []
    real_behind = forked.behind
    monkeypatch.setattr(forked, "behind", lambda fn, fork: children.append(fork) or real_behind(fn, fork=fork))
    cold = load_results(tmp_path, warn=lambda m: None, keep="all", meanwhile=lambda: imported.append(1))
    assert children == [True] and imported == [1]     # parsed by workers: the cache is written by a child
    # The next load waits for that child, then reads every usable file's row from the cache: only
    # the two unreadable files are parsed again.
    parsed_again = []
    real_parse = results_cache.parse_files
    monkeypatch.setattr(results_cache, "parse_files", lambda paths, *a: parsed_again.extend(paths) or real_parse(paths, *a))
    warm = load_results(tmp_path, warn=lambda m: None, keep="all", meanwhile=lambda: imported.append(2))
    pd.testing.assert_frame_equal(warm, cold)
    assert sorted(parsed_again) == [files[2], files[7]]
    assert imported == [1, 2] and not forked._behind     # said whether or not anything was parsed
