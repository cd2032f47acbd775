"""Points measured more than once: load_results keeps the latest run per point and environment (or
every run with keep="all"), and the report, the budget and export count each point once."""

from __future__ import annotations

import io
import shutil
import sys
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
from helpers_repeats import copy_as_later_run
from helpers_synthetic import make_result

import tpubench
from tpubench.budget import tokens as budget
from tpubench.cli import main
from tpubench.errors import UserError
from tpubench.money import pricing
from tpubench.output.frames import EXPORT_COLUMNS, load_results
from tpubench.output.report import build_report, render, render_report
from tpubench.records.result import write_result

TODAY = date(2026, 12, 2)
H100 = "NVIDIA H100 80GB HBM3"
NOTE = "older result(s) of points measured again were left out"


def _write(out_dir: Path, name: str, result) -> Path:
    """Like write_result, under a chosen name (the order of equal start times is the name's)."""
    path = out_dir / name
    path.write_text(result.model_dump_json(indent=1), encoding="utf-8")
    return path


def _result(seed: int, started_at: str, e2e_s: float = 2.0, **kwargs):
    return make_result(seed=seed, started_at=started_at, e2e_s=e2e_s, **kwargs)


@pytest.fixture
def repeated(tmp_path) -> Path:
    """Point A measured 3 times (its e2e tells the runs apart), once more with another backend and
    once more in another environment (each its own point); point B measured once."""
    _write(tmp_path, "a1.json", _result(1, "2026-12-01T10:00:00+00:00", e2e_s=2.1))
    _write(tmp_path, "a3.json", _result(1, "2026-12-01T12:00:00+00:00", e2e_s=2.3))   # the latest
    _write(tmp_path, "a2.json", _result(1, "2026-12-01T11:00:00+00:00", e2e_s=2.2))
    _write(tmp_path, "a-jax.json", _result(1, "2026-12-01T09:00:00+00:00", backend="jax", e2e_s=2.5))
    other_env = _result(1, "2026-12-01T08:00:00+00:00", e2e_s=2.6, torch_version="2.12.0")
    other_env.environment_key = "another-environment"
    _write(tmp_path, "a-env.json", other_env)
    _write(tmp_path, "b.json", _result(2, "2026-12-01T10:00:00+00:00", batch_size=16, e2e_s=3.0))
    return tmp_path


def _by_file(df: pd.DataFrame) -> dict[str, pd.Series]:
    return {Path(f).name: row for f, (_, row) in zip(df["file"], df.iterrows())}


def test_latest_run_per_point_and_environment_is_kept(repeated):
    df = load_results(repeated)
    rows = _by_file(df)
    assert sorted(rows) == ["a-env.json", "a-jax.json", "a3.json", "b.json"]
    assert rows["a3.json"]["e2e_mean_s"] == pytest.approx(2.3)
    assert {name: row["older_runs"] for name, row in rows.items()} == {
        "a-env.json": 0, "a-jax.json": 0, "a3.json": 2, "b.json": 0}
    assert df["older_runs"].dtype == "int64"
    assert df.attrs["older_runs_left_out"] == 2
    assert list(df.index) == list(range(len(df)))
    # The package-level entry point is the same function.
    assert len(tpubench.load_results(repeated)) == 4


def test_keep_all_keeps_every_run_and_numbers_them_oldest_first(repeated):
    df = load_results(repeated, keep="all")
    assert len(df) == 6
    assert df.attrs["older_runs_left_out"] == 0
    older = {Path(f).name: n for f, n in zip(df["file"], df["older_runs"])}
    assert older == {"a1.json": 0, "a2.json": 1, "a3.json": 2, "a-jax.json": 0, "a-env.json": 0, "b.json": 0}
    # The latest row of a point carries the same count under both settings.
    latest = load_results(repeated)
    assert dict(zip(latest["file"], latest["older_runs"])).items() <= dict(zip(df["file"], df["older_runs"])).items()


def test_start_times_compare_as_times_and_ties_go_to_the_file_name(tmp_path):
    # 10:00+02:00 is 08:00 UTC, before 09:00 UTC, although it sorts after it as text.
    _write(tmp_path, "z-early.json", _result(1, "2026-12-01T10:00:00+02:00", e2e_s=2.1))
    _write(tmp_path, "a-late.json", _result(1, "2026-12-01T09:00:00+00:00", e2e_s=2.2))
    # Same start time: the later file name wins. No start time: the oldest.
    _write(tmp_path, "tie-1.json", _result(2, "2026-12-01T09:00:00+00:00", e2e_s=3.1))
    _write(tmp_path, "tie-2.json", _result(2, "2026-12-01T09:00:00+00:00", e2e_s=3.2))
    _write(tmp_path, "tie-3.json", _result(2, "", e2e_s=3.3))
    df = load_results(tmp_path)
    assert sorted(Path(f).name for f in df["file"]) == ["a-late.json", "tie-2.json"]
    assert df.attrs["older_runs_left_out"] == 3
    order = load_results(tmp_path, keep="all")
    assert dict(zip((Path(f).name for f in order["file"]), order["older_runs"])) == {
        "z-early.json": 0, "a-late.json": 1, "tie-3.json": 0, "tie-1.json": 1, "tie-2.json": 2}


def test_results_written_by_tpubench_are_repeats_of_each_other(tmp_path):
    first = write_result(_result(1, "2026-12-01T10:00:00+00:00"), tmp_path)
    again = write_result(_result(1, "2026-12-01T10:05:00+00:00"), tmp_path)
    df = load_results(tmp_path)
    assert list(df["file"]) == [str(again)] and df["older_runs"].tolist() == [1]
    assert first.exists()


@pytest.mark.parametrize("keep", ["first", "", None, "ALL"])
def test_an_unknown_keep_is_a_user_error_naming_the_field(repeated, keep):
    with pytest.raises(UserError) as info:
        load_results(repeated, keep=keep)
    assert info.value.field == "keep" and "'latest'" in str(info.value)
    with pytest.raises(UserError):
        tpubench.load_results(repeated, keep=keep)
    with pytest.raises(UserError):
        build_report(load_results(repeated), keep=keep, today=TODAY)


def test_an_empty_folder_has_the_column_and_the_count(tmp_path):
    df = load_results(tmp_path)
    assert df.empty and "older_runs" in df.columns
    assert df.attrs["older_runs_left_out"] == 0


def test_older_runs_is_appended_to_the_export_columns():
    # Appended after the schema-1 columns (newer columns only ever follow them).
    metrics_end = EXPORT_COLUMNS.index("decode_tokens_per_s_ci95_high")
    assert EXPORT_COLUMNS[metrics_end + 1:metrics_end + 3] == ["model_reused", "older_runs"]
    assert len(EXPORT_COLUMNS) == len(set(EXPORT_COLUMNS))


# --- report, budget, export -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def measured_twice(tmp_path_factory) -> tuple[Path, Path]:
    """(a folder where 3 of 6 priced points were measured again, 4 older runs in all; the same
    folder with only each point's latest file)."""
    latest_only = tmp_path_factory.mktemp("latest")
    specs = []
    for seed, (accelerator, device, batch, ttft, e2e) in enumerate((
            (H100, "cuda", 8, 0.2, 1.5), (H100, "cuda", 32, 0.8, 4.0), ("TPU v6 lite", "tpu", 8, 0.3, 2.0),
            ("TPU v6 lite", "tpu", 32, 1.2, 5.0), ("Trainium2", "neuron", 16, 0.25, 1.8),
            ("Trainium2", "neuron", 64, 0.9, 4.4))):
        specs.append(dict(accelerator=accelerator, device=device, batch_size=batch, ttft_s=ttft, e2e_s=e2e,
                          seed=seed))
    for n, spec in enumerate(specs):
        _write(latest_only, f"p{n}.json", make_result(started_at="2026-12-01T00:00:00+00:00", **spec))
    repeated = tmp_path_factory.mktemp("repeated")
    for f in latest_only.iterdir():
        shutil.copy2(f, repeated / f.name)
    # The older runs of points 0, 2 (twice) and 5 measured slower: counted, they would change costs.
    for n, runs in ((0, 1), (2, 2), (5, 1)):
        for k in range(runs):
            spec = dict(specs[n], e2e_s=specs[n]["e2e_s"] * (1.5 + k))
            _write(repeated, f"p{n}-old{k}.json", make_result(started_at=f"2026-11-2{k}T00:00:00+00:00", **spec))
    return repeated, latest_only


@pytest.fixture(scope="module")
def prices():
    return pricing.load_prices(today=TODAY)


def test_report_counts_each_point_once_and_says_what_was_left_out(measured_twice, prices):
    repeated, latest_only = measured_twice
    data = build_report(repeated, prices=prices, today=TODAY)
    assert len(data.results) == 6 and data.counts["results"] == 6
    assert data.results["file"].map(lambda f: "-old" not in f).all()
    notes = [w for w in data.warnings if NOTE in w]
    assert notes == [f"4 {NOTE} (the latest per point and environment is kept; --all-runs keeps them)"]

    md = render(data, "markdown")
    assert "6 result(s)" in md and f"4 {NOTE}" in md
    assert f"4 {NOTE}" in render(data, "html")
    table = pd.read_csv(io.StringIO(render(data, "csv")))
    assert table["file"].nunique() == 6
    assert not table["file"].str.contains("-old").any()

    # The same priced table as the folder holding only the latest runs.
    clean = build_report(latest_only, prices=prices, today=TODAY)
    assert not [w for w in clean.warnings if NOTE in w]
    key = ["instance_type", "plan", "batch_size"]
    got = data.summary.sort_values(key)["blended_usd_per_mtok"].to_numpy()
    assert got == pytest.approx(clean.summary.sort_values(key)["blended_usd_per_mtok"].to_numpy())


def test_report_keeps_every_run_when_asked(measured_twice, prices):
    repeated, _ = measured_twice
    data = build_report(repeated, prices=prices, today=TODAY, keep="all")
    assert len(data.results) == 10 and not [w for w in data.warnings if NOTE in w]
    table = pd.read_csv(io.StringIO(render_report(repeated, "csv", prices=prices, today=TODAY, keep="all")))
    assert table["file"].nunique() == 10
    md = render_report(repeated, "markdown", prices=prices, today=TODAY)
    assert f"4 {NOTE}" in md


def _files(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(file=df["file"].map(lambda f: Path(f).name)).reset_index(drop=True)


def test_budget_over_repeated_points_equals_the_budget_over_the_latest_runs(measured_twice, prices):
    repeated, latest_only = measured_twice
    kwargs = dict(tokens_per_day=2e9, output_share=0.25, peak_factor=2, slo_ttft_s=2.0, slo_tpot_s=0.1,
                  today=TODAY)
    got = budget.plan_budget(load_results(repeated), prices, **kwargs)
    want = budget.plan_budget(load_results(latest_only), prices, **kwargs)
    assert len(want.options)
    pd.testing.assert_frame_equal(_files(got.options), _files(want.options))
    pd.testing.assert_frame_equal(_files(got.infeasible.rename(columns={"closest_file": "file"})),
                                  _files(want.infeasible.rename(columns={"closest_file": "file"})))
    assert got.notes == want.notes


def _cli(monkeypatch, capsys, *args) -> tuple[str, str]:
    monkeypatch.setattr(sys, "argv", ["tpubench", *args])
    main()
    out = capsys.readouterr()
    return out.out, " ".join(out.err.split())


def test_budget_cli_notes_the_left_out_runs_and_accepts_all_runs(measured_twice, monkeypatch, capsys):
    repeated, _ = measured_twice
    args = ["budget", "tokens", str(repeated), "--tokens-per-day", "2e9", "--format", "csv"]
    out, err = _cli(monkeypatch, capsys, *args)
    assert f"4 {NOTE}" in err
    latest = pd.read_csv(io.StringIO(out))
    out, err = _cli(monkeypatch, capsys, *args, "--all-runs")
    assert NOTE not in err
    assert len(pd.read_csv(io.StringIO(out))) == len(latest)


def test_report_cli_accepts_all_runs(measured_twice, monkeypatch, capsys):
    repeated, _ = measured_twice
    out, err = _cli(monkeypatch, capsys, "report", str(repeated), "--format", "csv")
    assert f"4 {NOTE}" in err and pd.read_csv(io.StringIO(out))["file"].nunique() == 6
    out, err = _cli(monkeypatch, capsys, "report", str(repeated), "--format", "csv", "--all-runs")
    assert NOTE not in err and pd.read_csv(io.StringIO(out))["file"].nunique() == 10


def test_export_writes_one_row_per_point_unless_all_runs(measured_twice, tmp_path, monkeypatch, capsys):
    repeated, _ = measured_twice
    target = tmp_path / "latest.csv"
    out, err = _cli(monkeypatch, capsys, "export", str(repeated), "--out", str(target))
    assert "wrote 6 row(s)" in out and f"4 {NOTE}" in err
    table = pd.read_csv(target)
    assert len(table) == 6 and list(table.columns[:len(EXPORT_COLUMNS)]) == EXPORT_COLUMNS
    assert sorted(table["older_runs"]) == [0, 0, 0, 1, 1, 2]

    target = tmp_path / "all.csv"
    out, err = _cli(monkeypatch, capsys, "export", str(repeated), "--out", str(target), "--all-runs")
    assert "wrote 10 row(s)" in out and NOTE not in err
    table = pd.read_csv(target)
    assert len(table) == 10 and table["file"].nunique() == 10
    assert sorted(table["older_runs"]) == [0] * 6 + [1] * 3 + [2]


def test_copies_of_a_result_file_are_repeats(tmp_path):
    src = _write(tmp_path, "x.json", _result(1, "2026-12-01T10:00:00+00:00"))
    copy = copy_as_later_run(src, tmp_path, hours=3)
    df = load_results(tmp_path)
    assert list(df["file"]) == [str(copy)] and df.attrs["older_runs_left_out"] == 1
    assert df["started_at"].iloc[0] == "2026-12-01T13:00:00+00:00"
