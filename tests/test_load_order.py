"""The order load_results relies on, made without pandas' sort and groupby or Path objects: result
files listed in the order of their path parts (records/files.py), and each run's place among the
runs of its point (frames._run_order), against the straightforward ways of computing both."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tpubench.output.frames import SAME_POINT_KEYS, _run_order
from tpubench.records.files import iter_result_files, result_file_names

# Names whose order by path parts differs from their order as text ("a-b/x" < "a/x" as text, not
# by parts), with upper case, spaces, dots, non-ASCII and nesting.
FOLDERS = ["", "a", "a-b", "a/b", "a/b/c", "a.b", "A", "a b", "é", "z", "a0"]
NAMES = ["x.json", "a.json", "a-.json", "A.json", "x.txt", ".tmp-1.json", "é.json", "0.json"]


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "results"
    for folder in FOLDERS:
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in NAMES:
            (root / folder / name).write_text("{}")
    (root / "a" / "b.json").mkdir()                       # a folder named *.json: entered, not read
    (root / "a" / "b.json" / "in.json").write_text("{}")
    os.symlink(root / "a", root / "link")                 # a symlinked folder: not entered
    return root


def _by_rglob(folder: Path) -> list[str]:
    """What the listing was: rglob, regular files only, less temporary files, sorted by parts."""
    found = [f for f in folder.rglob("*.json") if f.is_file() and not f.name.startswith(".tmp-")]
    return [str(f) for f in sorted(found, key=lambda f: f.parts)]


def test_files_come_in_the_order_of_their_path_parts(tree):
    expected = _by_rglob(tree)
    assert len(expected) == len(FOLDERS) * 6 + 1          # six *.json names a folder, and in.json
    assert result_file_names(tree) == expected
    assert [str(f) for f in iter_result_files(tree)] == expected
    assert result_file_names(str(tree) + "/") == expected


@pytest.mark.parametrize("given", [".", "./", "a", "a/", "./a/../a", "a/b"])
def test_relative_folders_are_named_as_paths_name_them(tree, monkeypatch, given):
    monkeypatch.chdir(tree)
    assert result_file_names(given) == _by_rglob(Path(given))


def test_files_and_folders_together_keep_the_order_given(tree):
    named = tree / "z" / "x.json"
    got = result_file_names([named, tree / "a-b", tree / "a"])
    assert got == [str(named), *_by_rglob(tree / "a-b"), *_by_rglob(tree / "a")]


def _older_newer_by_groupby(df: pd.DataFrame, environment_keys, names):
    """_run_order as it was: a sorted frame and a groupby's cumcount."""
    started = pd.to_datetime(df["started_at"], utc=True, errors="coerce", format="ISO8601")
    order = pd.DataFrame({"point_key": df["point_key"].to_numpy(), "environment_key": environment_keys,
                          "backend": df["backend"].to_numpy(), "device": df["device"].to_numpy(),
                          "started": started.dt.tz_convert(None).to_numpy(), "name": names,
                          "file": df["file"].to_numpy()})
    order = order.sort_values(["started", "name", "file"], na_position="first", kind="stable")
    groups = order.groupby(list(SAME_POINT_KEYS), sort=False, dropna=False)
    older = pd.Series(groups.cumcount().to_numpy(), index=order.index).sort_index().to_numpy()
    newer = pd.Series(groups.cumcount(ascending=False).to_numpy(), index=order.index).sort_index().to_numpy()
    return older, newer


@pytest.mark.parametrize("seed", range(6))
def test_run_order_is_the_groupbys(seed):
    rng = random.Random(seed)
    n = rng.choice([1, 2, 7, 60, 400])
    times = ["2026-12-01T00:00:00+00:00", "2026-12-01T02:00:00+02:00", "2026-12-02T00:00:00Z", "",
             "not a time", "2026-12-01T00:00:00.25+00:00"]
    names = [rng.choice(["a.json", "b.json", "A.json", "é.json"]) for _ in range(n)]
    df = pd.DataFrame({
        "started_at": [rng.choice(times) for _ in range(n)],
        "point_key": [rng.choice(["p1", "p2", "p3", None]) for _ in range(n)],
        "backend": [rng.choice(["torch", "jax"]) for _ in range(n)],
        "device": [rng.choice(["cuda", "tpu", None]) for _ in range(n)],
        "file": [f"{rng.choice(['r', 'r/s', 'r-s'])}/{name}" for name in names],
    })
    environment_keys = [rng.choice(["e1", "e2"]) for _ in range(n)]
    older, newer = _run_order(df, environment_keys, names)
    expected_older, expected_newer = _older_newer_by_groupby(df, environment_keys, names)
    np.testing.assert_array_equal(older, expected_older)
    np.testing.assert_array_equal(newer, expected_newer)
    assert older.dtype == newer.dtype == np.int64
