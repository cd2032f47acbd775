"""The physics gate (issue 47, item 4; DESIGN section 25): a row whose figures are not finite
positive numbers, or that claims more than its chip's roofline allows, is refused with one warning
naming its file and row wherever it would be imported, calibrate the estimate, enter an answer or a
budget, and never moves another row's estimate.

The tampered row is the issue's: one published row at 1e300 tokens/s (a unit slip in a scraped
file), which before the gate moved every family's estimate, won every verdict and topped
`budget --include-published` with 0 instances. It is tampered into real files: a copy of the shipped
SGLang-JAX CSV (tpubench/data/published/) and the real InferenceX excerpt (tests/fixtures/published/real/).
"""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers_cli import run_cli
from helpers_synthetic import make_result

from tpubench.estimate.calibration import observations
from tpubench.estimate.fit import fit_efficiency
from tpubench.estimate.gate import claimed_rates, efficiencies, gate, refusals
from tpubench.estimate.models import published_model
from tpubench.estimate.physics import (
    EFFICIENCY_LIMIT,
    PEAK_ROUNDING,
    UNSTATED_FACTOR,
    efficiency_refusal,
    figures_refusal,
    row_name,
)
from tpubench.output.published import store
from tpubench.output.published.store import SHIPPED_DIR, read_published, shipped_published
from tpubench.records.result import write_result

SLIP = 1e300
SGLANG = SHIPPED_DIR / "sglang-jax.csv"
INFERENCEX = Path(__file__).parent / "fixtures" / "published" / "real" / "inferencex" / "dsr1_1k1k_excerpt.json"


@pytest.fixture(scope="module")
def shipped() -> pd.DataFrame:
    return shipped_published()


# --- the rule, by hand ---------------------------------------------------------------------------------

def test_the_limit_is_the_roofline_s_known_overcount_and_peak_rounding():
    assert (UNSTATED_FACTOR, PEAK_ROUNDING) == (2.0, 0.05) and EFFICIENCY_LIMIT == pytest.approx(2.1)
    assert efficiency_refusal(2.1) is None and efficiency_refusal(0.01) is None
    for beyond in (2.1001, 4.7e297, math.inf, math.nan):
        assert "faster than its chip's roofline allows" in efficiency_refusal(beyond)
    named = efficiency_refusal(3.0, {"file": "r/published/x.csv", "file_row": 7})
    assert named.startswith("r/published/x.csv row 7: ")


@pytest.mark.parametrize("change, field", [
    ({"output_tokens_per_s_per_chip": -3.0}, "output_tokens_per_s_per_chip"),
    ({"output_tokens_per_s_per_chip": 0}, "output_tokens_per_s_per_chip"),
    ({"output_tokens_per_s_per_chip": math.inf}, "output_tokens_per_s_per_chip"),
    ({"output_tokens_per_s_per_chip": math.nan}, "output_tokens_per_s_per_chip"),      # required: blank is not enough
    ({"output_tokens_per_s_per_chip": "fast"}, "output_tokens_per_s_per_chip"),
    ({"output_tokens_per_s_per_chip": True}, "output_tokens_per_s_per_chip"),
    ({"chips": 0}, "chips"),
    ({"ttft_p50_s": -0.2}, "ttft_p50_s"),
    ({"total_tokens_per_s_per_chip": math.inf}, "total_tokens_per_s_per_chip"),
    ({"concurrency": 10 ** 400}, "concurrency"),
])
def test_a_stated_figure_must_be_a_finite_positive_number(change, field):
    good = {"output_tokens_per_s_per_chip": 100.0, "chips": 8, "ttft_p50_s": math.nan, "concurrency": None}
    assert figures_refusal(good) is None                         # blank optional figures are not stated
    why = figures_refusal({**good, **change})
    assert why.startswith(field) and "not a finite positive number" in why


def test_a_frame_s_figures_are_judged_as_each_row_alone(shipped):
    # refusals() reads number columns whole and asks figures_refusal only of the rows they make doubtful:
    # every mix of columns (floats, ints, text, bools, blanks, a column missing) says what each row alone says.
    assert refusals(shipped, roofline_too=False) == [figures_refusal(r) for r in shipped.to_dict("records")]
    cells = [1.0, 2, 0, -1, math.nan, math.inf, None, "", " ", "3", True, 10 ** 400]
    rng = np.random.default_rng(7)
    for _ in range(200):
        frame = pd.DataFrame(index=range(5))
        for name in ("output_tokens_per_s_per_chip", "chips", "concurrency", "ttft_p50_s", "tpot_p99_s"):
            kind = rng.integers(4)
            if kind == 1:
                frame[name] = rng.choice([1.5, 0.0, -2.0, math.nan, math.inf], size=5)
            elif kind == 2:
                frame[name] = rng.choice([1, 3, 0, -4], size=5).astype("int64")
            elif kind == 3:
                frame[name] = pd.Series([cells[i] for i in rng.integers(len(cells), size=5)], dtype=object)
        assert refusals(frame, roofline_too=False) == [figures_refusal(r) for r in frame.to_dict("records")]


def test_a_row_is_named_by_its_file_and_row_else_its_reference():
    assert row_name({"file": "a.csv", "file_row": 3, "reference": "x"}) == "a.csv row 3"
    assert row_name({"file": math.nan, "reference": "results/r.json"}) == "results/r.json"


# --- the efficiency is the estimate's own ------------------------------------------------------------------

def test_the_gate_reads_the_efficiency_the_calibration_fits(shipped):
    # A row alone in the calibration is its own configuration (nothing supersedes it): the efficiency
    # observations() fits it on is the one the gate judges it by, for chips of every family.
    known = np.array([bool(published_model(m)) for m in shipped["model"]])   # a model with a shape: a roofline
    picks = shipped[shipped["concurrency"].notna() & (shipped["spec_decoding"].astype(str) == "none")
                    & (shipped["disaggregated"] == False) & (shipped["multinode"] == False) & known]   # noqa: E712
    picks = picks.groupby("accelerator").head(1).reset_index(drop=True)
    assert len(picks) >= 8
    found, claimed = efficiencies(picks), claimed_rates(picks) / picks["output_tokens_per_s_per_chip"].to_numpy()
    for i, row in picks.iterrows():
        alone = float(observations(pd.DataFrame([row])).rows["efficiency"].iloc[0])
        # At the rate the row claims: its output rate, or its total's output share where higher.
        assert 1 <= claimed[i] < 1.15 and found[i] == pytest.approx(alone * claimed[i], rel=1e-9), row["accelerator"]


def test_a_system_the_roofline_does_not_model_is_held_to_the_compute_roofline(shipped):
    # A multi-node or speculative row reads far above the single-node roofline (attention spread over
    # nodes reads a fraction of the cache modelled), never above its FLOPs: it passes until its rate
    # claims arithmetic no chip does.
    other = shipped[(shipped["multinode"] == True) | (shipped["spec_decoding"].astype(str) == "mtp")]   # noqa: E712
    assert refusals(other) == [None] * len(other)
    row = other.iloc[[0]]
    assert refusals(row.assign(output_tokens_per_s_per_chip=SLIP))[0].endswith("(efficiency above 2.1)")


def test_a_row_without_a_load_is_held_at_the_largest_batch_that_fits(shipped):
    offline = shipped[shipped["concurrency"].isna()]
    found = efficiencies(offline)
    assert len(offline) and np.isfinite(found).all() and found.max() <= EFFICIENCY_LIMIT
    # Ten times the fastest rate any load allows on one node is refused, though the row names no load.
    one_node = (offline["multinode"] == False).to_numpy()   # noqa: E712
    fastest = offline[one_node].iloc[[int(np.argmax(found[one_node]))]]
    assert refusals(fastest.assign(output_tokens_per_s_per_chip=fastest["output_tokens_per_s_per_chip"] * 10))[0]


def test_a_row_of_a_model_unknown_to_the_estimate_is_held_to_its_figures(shipped):
    unknown = shipped.iloc[[0]].assign(model="nobody/unknown-model", published_model="unknown")
    assert np.isnan(efficiencies(unknown)).all()
    assert refusals(unknown.assign(output_tokens_per_s_per_chip=SLIP)) == [None]
    assert refusals(unknown.assign(output_tokens_per_s_per_chip=-1.0))[0].startswith("output_tokens_per_s_per_chip")


def test_a_server_priced_on_its_total_rate_is_held_to_it_too(shipped):
    row = shipped[shipped["total_tokens_per_s_per_chip"].notna() & shipped["concurrency"].notna()].iloc[[0]]
    assert refusals(row) == [None]
    assert refusals(row.assign(total_tokens_per_s_per_chip=SLIP))[0]


# --- a tampered row moves nothing --------------------------------------------------------------------

def _newest_superseding_row(rows: pd.DataFrame) -> int:
    """A row whose configuration has an older run: tampering it is the hard case (a fit that dropped
    it after counting out its older run as superseded would lose that run too)."""
    key = ["publisher", "model", "accelerator", "chips", "precision", "framework", "input_length", "output_length",
           "concurrency"]
    dated = rows.dropna(subset=["concurrency"]).sort_values("date")
    runs = dated.groupby(key, dropna=False)["date"].transform("nunique")
    return int(dated[runs > 1].index[-1])


def test_a_tampered_row_is_refused_and_never_moves_another_row_s_estimate(shipped):
    tampered_at = _newest_superseding_row(shipped)
    tampered = shipped.copy()
    tampered.loc[tampered_at, ["output_tokens_per_s_per_chip", "total_tokens_per_s_per_chip"]] = SLIP
    without = shipped.drop(index=tampered_at).reset_index(drop=True)
    seen: list[str] = []
    kept = gate(tampered, seen.append)
    assert len(seen) == 1 and seen[0].startswith(f"{tampered.loc[tampered_at, 'file']} row "
                                                  f"{tampered.loc[tampered_at, 'file_row']}: 1e+300 output tokens/s")
    # (pandas rebuilds the column index of a frame assigned to by .loc: its text storage may differ)
    pd.testing.assert_frame_equal(kept, without, check_column_type=False)
    # What the fit sees is exactly what it sees without the row: every family's terms, efficiencies, fit.
    mine, theirs = observations(kept), observations(without)
    np.testing.assert_array_equal(mine.y, theirs.y)
    assert mine.left_out == theirs.left_out
    a = fit_efficiency(mine.X, mine.y, mine.families)
    b = fit_efficiency(theirs.X, theirs.y, theirs.families)
    np.testing.assert_array_equal(a.pooled, b.pooled)
    # The calibration on its own (a row that reaches it unread: your own result, a library caller's
    # frame) leaves it out too, naming it, rather than fitting an efficiency of 1e297; but it meets
    # the row after counting its older run out as superseded, and so loses that run as well: why
    # published rows are gated before they reach it.
    alone = observations(tampered)
    assert (alone.y <= math.log(EFFICIENCY_LIMIT)).all() and len(alone.y) == len(theirs.y) - 1
    named = [why for why in alone.left_out if why.startswith(row_name(tampered.loc[tampered_at]))]
    assert len(named) == 1 and named[0].endswith("(efficiency above 2.1)")


def _tampered_copy(source: Path, into: Path, pick) -> tuple[Path, int]:
    """`source` copied to `into` with the row `pick(frame)` chooses at 1e300 tokens/s (output and
    total); (the copy, the row's number: 1 is the first row below the header)."""
    df = pd.read_csv(source)
    at = pick(df)
    df.loc[at, ["output_tokens_per_s_per_chip", "total_tokens_per_s_per_chip"]] = SLIP
    into.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(into, index=False)
    return into, at + 1


def _qwen3_8b_nearest(df: pd.DataFrame) -> int:
    """The Qwen3-8B row an answer for workloads/qwen3_dense.yaml (1,024 in, 256 out) shows."""
    mine = df[(df["model"] == "Qwen/Qwen3-8B") & (df["accelerator"] == "TPU v6e")]
    return int((np.log(mine["input_length"] / 1024).abs() + np.log(mine["output_length"] / 256).abs()).idxmin())


def test_a_tampered_import_file_is_refused_on_read_with_one_warning(tmp_path):
    path, line = _tampered_copy(SGLANG, tmp_path / "results" / "published" / "sglang-copy.csv", _qwen3_8b_nearest)
    seen: list[str] = []
    rows = read_published(tmp_path / "results", warn=seen.append)
    assert seen == [f"{path} row {line}: 1e+300 output tokens/s per chip on 4 x TPU v6e is faster than its chip's "
                    f"roofline allows (efficiency above 2.1); left out"]
    assert len(rows) == len(pd.read_csv(SGLANG)) - 1 and line not in set(rows["file_row"])


def test_a_tampered_shipped_copy_is_refused_where_it_would_count(tmp_path, monkeypatch):
    shipped_dir = tmp_path / "shipped"
    shutil.copytree(SHIPPED_DIR, shipped_dir)
    _, line = _tampered_copy(SGLANG, shipped_dir / SGLANG.name, _qwen3_8b_nearest)
    monkeypatch.setattr(store, "SHIPPED_DIR", shipped_dir)
    seen: list[str] = []
    listed = shipped_published(warn=seen.append)                 # listed: figures only (module notes)
    assert seen == [] and (listed["output_tokens_per_s_per_chip"] == SLIP).sum() == 1
    checked = shipped_published(warn=seen.append, checked=True)  # an estimate's or a budget's
    assert len(seen) == 1 and f"sglang-jax.csv row {line}: 1e+300" in seen[0]
    assert len(checked) == len(listed) - 1 and (checked["output_tokens_per_s_per_chip"] < SLIP).all()


def test_import_leaves_a_row_beyond_physics_out_with_a_note_naming_it(tmp_path, monkeypatch, capsys):
    data = json.loads(INFERENCEX.read_text())
    data[3]["metrics"]["output_tput_per_gpu"] = SLIP
    bad = tmp_path / "dsr1.json"
    bad.write_text(json.dumps(data))
    into = tmp_path / "results"
    code, _, good_err = run_cli(monkeypatch, capsys, "import", "inferencex", str(INFERENCEX), "--into", str(into))
    assert code == 0, good_err
    honest = read_published(into)
    code, out, err = run_cli(monkeypatch, capsys, "import", "inferencex", str(bad), "--into", str(tmp_path / "other"))
    assert code == 0 and "Traceback" not in err
    extra = [line for line in err.splitlines() if line not in good_err.splitlines()]
    assert len(extra) == 1 and f"{bad} [3]: 1e+300 output tokens/s per chip" in extra[0], err
    assert len(read_published(tmp_path / "other")) == len(honest) - 1


# --- through the commands: every estimate, verdict and budget as without the row -----------------------

@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A results folder: a small-scale CPU point of workloads/qwen3_dense.yaml (Qwen3-8B, compare_on
    tpu-v6e-1, H100:1, L4:1), whose published rows on TPU v6e are priced, so one enters the verdict."""
    root = tmp_path_factory.mktemp("physics")
    shutil.copy("workloads/qwen3_dense.yaml", root / "wl.yaml")
    point = make_result(accelerator="AMD EPYC", device="cpu", chips=2, workload="qwen3_dense", scale="small",
                        batch_size=8, input_length=128, output_length=32, ttft_s=0.3, e2e_s=1.5)
    write_result(point.model_copy(update={"workload_file": str(root / "wl.yaml")}), root / "results")
    return root


def _commands(monkeypatch, capsys, root: Path) -> dict[str, tuple[str, list[str]]]:
    """Per command (the report's answer table, the estimate, the budget): (stdout, stderr lines)."""
    results = str(root / "results")
    runs = {"answer": ("report", results, "--format", "csv", "--table", "answer"),
            "estimate": ("estimate", str(root / "wl.yaml"), "--results", results, "--format", "json"),
            "budget": ("budget", "tokens", results, "--tokens-per-day", "1e9", "--include-published", "--format", "csv")}
    done = {}
    for name, args in runs.items():
        code, out, err = run_cli(monkeypatch, capsys, *args)
        assert code == 0 and "Traceback" not in err and "internal error" not in err, (name, err)
        done[name] = (out, err.splitlines())
    return done


@pytest.mark.slow
@pytest.mark.parametrize("where", ["import", "shipped"])
def test_a_tampered_row_changes_no_estimate_verdict_or_budget(folder, tmp_path, monkeypatch, capsys, where):
    if where == "import":
        target = folder / "results" / "published" / "sglang-jax-copy.csv"
    else:
        shipped_dir = tmp_path / "shipped"
        shutil.copytree(SHIPPED_DIR, shipped_dir)
        monkeypatch.setattr(store, "SHIPPED_DIR", shipped_dir)
        target = shipped_dir / SGLANG.name
    try:
        _, line = _tampered_copy(SGLANG, target, _qwen3_8b_nearest)
        tampered = _commands(monkeypatch, capsys, folder)
        df = pd.read_csv(target)
        df.drop(index=line - 1).to_csv(target, index=False)
        without = _commands(monkeypatch, capsys, folder)
    finally:
        target.unlink(missing_ok=True)
    for name, (out, err) in tampered.items():
        warned = [e for e in err if e not in without[name][1]]
        assert len(warned) == 1 and f"{target} row {line}: 1e+300 output tokens/s per chip" in warned[0], (name, err)
        assert out == without[name][0], name
    # The verdict is the estimates' and the honest rows', not a row at $0.
    answer = pd.read_csv(io.StringIO(tampered["answer"][0]))
    assert (answer["usd_per_mtok"].dropna() > 1e-6).all() and "e+" not in " ".join(answer["verdict_text"])
