"""Published results beside yours (issue 23 item 5): the InferenceX and MLPerf importers on small
fixtures written after the documented formats (tests/fixtures/published/), the store beside the
results, the matched comparison on hand-computed numbers, the report section, and published rows
kept out of the budget unless asked.

The fixture's H200 fp8 rows at 1024/1024 tokens, as (interactivity tokens/s per user, output
tokens/s per GPU): (20, 600), (25, 350), (30, 400), (50, 200), (80, 100 from median_tpot 0.0125).
(25, 350) is beaten by (30, 400), so the front is (20, 600), (30, 400), (50, 200), (80, 100).
A bf16 row (40, 1000) and a B200 row (40, 1500) must not join that front.

Measured points (make_result, 8 chips, O = 1024, TPOT = (E2E - TTFT) / (O - 1)):
  B=52, TTFT 0.425, E2E 26.0: TPOT 0.025 -> 40 tok/s/user; 52 * 1024 / 26 / 8 = 256 tok/s/chip.
      front at 40: 400 + (200 - 400) * (40 - 30) / (50 - 30) = 300; 256 / 300 - 1 = -14.67%.
  B=32, TTFT 0.54, E2E 21.0: TPOT 0.02 -> 50 tok/s/user; 32 * 1024 / 21 / 8 = 195.05 tok/s/chip.
      front at 50: 200; 195.05 / 200 - 1 = -2.48%.
  B=8, TTFT 0.1, E2E 5.215: TPOT 0.005 -> 200 tok/s/user, beyond the front's 80: no verdict.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers_cli import run_cli
from helpers_synthetic import write_results

import tpubench
from tpubench.errors import UserError
from tpubench.output.frames import load_results
from tpubench.output.published import (
    compare_published,
    import_inferencex,
    import_mlperf,
    interpolate_front,
    pareto_front,
    read_published,
    write_published,
)
from tpubench.output.published.match import verdict
from tpubench.output.report import build_report, render

FIXTURES = Path(__file__).parent / "fixtures" / "published"
INFERENCEX = FIXTURES / "inferencex_llama70b.json"
MODEL = "meta-llama/Llama-3.3-70B-Instruct"
POINT = dict(accelerator="NVIDIA H200", chips=8, workload="Llama-3.3-70B-Instruct", dtype="float8_e4m3fn",
             input_length=1024, output_length=1024)
B52 = 52 * 1024 / 26.0 / 8
B32 = 32 * 1024 / 21.0 / 8


@pytest.fixture
def results(tmp_path, monkeypatch, capsys) -> Path:
    """Three measured H200 points and the InferenceX fixture imported beside them."""
    out = tmp_path / "results"
    write_results(out, [dict(POINT, batch_size=52, ttft_s=0.425, e2e_s=26.0, seed=1),
                        dict(POINT, batch_size=32, ttft_s=0.54, e2e_s=21.0, seed=2),
                        dict(POINT, batch_size=8, ttft_s=0.1, e2e_s=0.1 + 1023 * 0.005, seed=3)])
    code, stdout, stderr = run_cli(monkeypatch, capsys, "import", "inferencex", str(INFERENCEX),
                                   "--into", str(out), "--model", MODEL)
    assert code == 0, stderr
    assert "imported 7 published row(s)" in stdout
    assert "agentic traces" in stderr
    return out


# ----------------------------------------------------------------------------- front, interpolation, verdict

def test_pareto_front_keeps_only_points_nothing_beats():
    x = [20, 25, 30, 50, 80, 30, math.nan]
    y = [600, 350, 400, 200, 100, 390, 900]
    assert pareto_front(x, y) == [(20, 600), (30, 400), (50, 200), (80, 100)]


@pytest.mark.parametrize("x, expected", [(40, 300.0), (65, 150.0), (20, 600.0), (80, 100.0), (30, 400.0),
                                         (19.9, math.nan), (80.1, math.nan)])
def test_front_interpolated_linearly_and_not_beyond_its_ends(x, expected):
    front = [(20.0, 600.0), (30.0, 400.0), (50.0, 200.0), (80.0, 100.0)]
    got = interpolate_front(front, x)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


def test_one_point_front_compares_only_at_its_own_interactivity():
    assert interpolate_front([(20.0, 3000.0)], 20.0) == 3000.0
    assert math.isnan(interpolate_front([(20.0, 3000.0)], 21.0))


def test_verdicts():
    assert verdict(256 / 300 - 1, 0.10) == "differs by -15%: check your stack"
    assert verdict(256 / 300 - 1, 0.20) == "agrees within 20%"
    assert verdict(-0.025, 0.10) == "agrees within 10%"
    assert verdict(0.10, 0.10) == "agrees within 10%"
    assert verdict(0.3, 0.10).startswith("differs by +30%: above the published front")


# ----------------------------------------------------------------------------- InferenceX

def test_inferencex_rows_mapped_with_seconds_chips_and_versions():
    rows, notes = import_inferencex(INFERENCEX, model=MODEL)
    assert len(rows) == 7 and notes == ["1 row(s) without fixed lengths and concurrency (agentic traces) left out"]
    assert set(rows["model"]) == {MODEL} and set(rows["published_model"]) == {"llama70b"}
    first = rows.iloc[0]
    assert (first["accelerator"], first["chips"], first["framework"], first["framework_version"]) == \
        ("h200", 8, "vllm", "v0.11.0")
    assert (first["output_tokens_per_s_per_chip"], first["total_tokens_per_s_per_chip"]) == (600.0, 1200.0)
    assert (first["ttft_p50_s"], first["tpot_p99_s"], first["interactivity_tokens_per_s"]) == (1.2, 0.08, 20.0)
    # No median_intvty: 1 / median_tpot. A disaggregated row: prefill + decode GPUs.
    assert rows[rows["concurrency"] == 8]["interactivity_tokens_per_s"].item() == pytest.approx(80.0)
    assert rows[rows["accelerator"] == "b200"]["chips"].item() == 12


@pytest.mark.parametrize("text, field", [
    ('[{"hardware": "h200", "model": "x", "isl": 1, "osl": 1, "conc": 1, "metrics": [1]}]', "[0].metrics"),
    ('[{"model": "x", "metrics": {}}]', "[0].hardware"),
    ('{"error": "Unknown model"}', "expected the JSON array"),
    ('[{"hardware": "h200",', "not JSON"),
])
def test_malformed_inferencex_file_is_one_line_exit_2(tmp_path, monkeypatch, capsys, text, field):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    code, _, stderr = run_cli(monkeypatch, capsys, "import", "inferencex", str(bad), "--into", str(tmp_path / "r"))
    assert code == 2
    assert len(stderr.strip().splitlines()) == 1 and str(bad) in stderr and field in stderr
    assert "Traceback" not in stderr
    assert not (tmp_path / "r").exists()


# ----------------------------------------------------------------------------- MLPerf

def test_mlperf_submission_tree_gives_rate_per_chip_latencies_and_system():
    rows, notes = import_mlperf(FIXTURES / "mlperf_tree", model=MODEL, input_length=1024, output_length=1024)
    assert list(rows["scenario"]) == ["Offline", "Server"]
    # This hand-made tree has no measurements/ folder: no precision; its Offline run has no TPOT.
    assert [n.split(" result(s)")[0] for n in notes] == ["1", "2"]
    assert "cannot be compared on interactivity" in notes[0] and "without a stated precision" in notes[1]
    offline, server = rows.iloc[0], rows.iloc[1]
    assert offline["output_tokens_per_s_per_chip"] == 32000 / 8 and math.isnan(offline["interactivity_tokens_per_s"])
    assert server["output_tokens_per_s_per_chip"] == 24000 / 8
    assert server["interactivity_tokens_per_s"] == pytest.approx(1 / 0.05)
    assert (server["ttft_p50_s"], server["ttft_p99_s"], server["tpot_mean_s"]) == pytest.approx((0.4, 1.5, 0.055))
    assert (server["submitter"], server["accelerator"], server["chips"]) == ("Nebius", "NVIDIA H200-SXM-141GB", 8)
    assert (server["framework"], server["framework_version"], server["valid"]) == ("TensorRT", "10.11", True)
    assert server["published_model"] == "llama2-70b-99.9" and server["model"] == MODEL


def test_mlperf_summary_csv_keeps_token_rates_only():
    rows, notes = import_mlperf(FIXTURES / "mlperf_summary")
    assert list(rows["submitter"]) == ["Nebius", "Vultr"]
    assert rows["output_tokens_per_s_per_chip"].tolist() == pytest.approx([32000 / 8, 30339.4 / 16])
    assert rows.iloc[1]["framework"] == "vLLM" and rows.iloc[1]["framework_version"] == "0.9.1"
    assert rows.iloc[0]["publisher"] == "MLPerf Inference v5.1"
    assert any("1 row(s) not in tokens/s" in n for n in notes)
    assert any("--input-length" in n for n in notes)


def test_malformed_mlperf_folder_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    code, _, stderr = run_cli(monkeypatch, capsys, "import", "mlperf", str(tmp_path), "--into", str(tmp_path / "r"))
    assert code == 2 and "no MLPerf results found" in stderr and len(stderr.strip().splitlines()) == 1
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES / "mlperf_tree", tree)
    system = tree / "closed/Nebius/systems/H200-SXM-141GBx8_TRT.json"
    system.write_text(system.read_text().replace('"accelerators_per_node": "8"', '"accelerators_per_node": "eight"'))
    code, _, stderr = run_cli(monkeypatch, capsys, "import", "mlperf", str(tree), "--into", str(tmp_path / "r"))
    assert code == 2 and f"{system}: accelerators_per_node: expected a positive whole number" in stderr
    assert len(stderr.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- store and DataFrame

def test_reimport_is_refused_unless_replaced(results, monkeypatch, capsys):
    args = ("import", "inferencex", str(INFERENCEX), "--into", str(results), "--model", MODEL)
    code, _, stderr = run_cli(monkeypatch, capsys, *args)
    assert code == 2 and "already imported; pass --replace" in stderr
    code, _, _ = run_cli(monkeypatch, capsys, *args, "--replace")
    assert code == 0 and len(read_published(results)) == 7


def test_stored_text_cannot_run_as_a_spreadsheet_formula(tmp_path):
    rows, _ = import_inferencex(INFERENCEX)
    rows.loc[0, "framework"] = "=HYPERLINK(\"x\")"
    path = write_published(rows, tmp_path, "x.csv")
    assert "'=HYPERLINK" in path.read_text()


def test_published_rows_join_load_results_only_when_asked(results):
    measured = load_results(results)
    assert len(measured) == 3 and set(measured["source"]) == {"measured"}
    both = tpubench.load_results(results, include_published=True)
    published = both[both["source"] == "published"]
    assert len(both) == 10 and len(published) == 7
    assert set(published["publisher"]) == {"InferenceX"}
    row = published.iloc[0]
    assert (row["accelerator"], row["chips"], row["output_tokens_per_s"], row["server_name"]) == ("h200", 8, 4800, "vllm")
    assert (row["input_length"], row["output_length"], row["concurrency"], row["dtype"]) == (1024, 1024, 256, "fp8")


def test_budget_leaves_published_rows_out_unless_asked(results, monkeypatch, capsys):
    from tpubench.budget import tokens as budget

    seen = []

    def fake_plan_budget(df, *args, **kwargs):
        seen.append(df)
        raise UserError("stop here")

    monkeypatch.setattr(budget, "plan_budget", fake_plan_budget)
    run_cli(monkeypatch, capsys, "budget", "tokens", str(results), "--tokens-per-day", "1e9")
    run_cli(monkeypatch, capsys, "budget", "tokens", str(results), "--tokens-per-day", "1e9", "--include-published")
    # With --include-published: the 7 imported rows, and the reference rows shipped with tpubench.
    from tpubench.output.published import shipped_published
    assert [len(df) for df in seen] == [3, 10 + len(shipped_published())]
    assert set(seen[0]["source"]) == {"measured"}


def test_budget_sizes_on_published_rows_when_asked(results, monkeypatch, capsys):
    code, mine, _ = run_cli(monkeypatch, capsys, "budget", "tokens", str(results), "--tokens-per-day", "1e9")
    assert code == 0 and "published: InferenceX" not in mine
    # The imported rows alone (--no-shipped): the shipped rows' own models would fill the table's first
    # 50 lines (tests/test_published_shipped.py sizes on those).
    code, both, _ = run_cli(monkeypatch, capsys, "budget", "tokens", str(results), "--tokens-per-day", "1e9",
                            "--include-published", "--no-shipped")
    # InferenceX rows price as servers: 1 / (tput_per_gpu x GPUs) seconds of the system per token.
    assert code == 0 and f"{MODEL} (published: InferenceX)" in both


# ----------------------------------------------------------------------------- comparison and report

def test_matched_comparison_on_hand_computed_fixture(results):
    table = tpubench.compare_published(results).sort_values("interactivity_tokens_per_s").reset_index(drop=True)
    assert len(table) == 3 and set(table["front_points"]) == {4}     # bf16 and B200 rows stayed out
    assert table["interactivity_tokens_per_s"].tolist() == pytest.approx([40.0, 50.0, 200.0])
    assert table["output_tokens_per_s_per_chip"].tolist()[:2] == pytest.approx([B52, B32])
    assert table["published_tokens_per_s_per_chip"].tolist()[:2] == pytest.approx([300.0, 200.0])
    assert table["deviation"].tolist()[:2] == pytest.approx([B52 / 300 - 1, B32 / 200 - 1])
    assert table["verdict"].tolist()[:2] == ["differs by -15%: check your stack", "agrees within 10%"]
    assert table["verdict"].iloc[2].startswith("outside the published interactivity range (20–80")
    assert table["published_frameworks"].iloc[0] == "sglang, vllm"
    loose = tpubench.compare_published(results, tolerance=0.20).sort_values("interactivity_tokens_per_s")
    assert loose["verdict"].iloc[0] == "agrees within 20%"


def test_no_match_at_other_lengths_model_or_accelerator(results):
    measured, published = load_results(results), read_published(results)
    assert len(compare_published(measured.assign(input_length=2048), published)) == 0
    assert len(compare_published(measured.assign(workload="Qwen3-8B"), published)) == 0
    assert len(compare_published(measured.assign(accelerator="NVIDIA H100 80GB HBM3"), published)) == 0
    assert len(compare_published(measured.assign(dtype="bfloat16"), published)) == 3   # the bf16 row's front
    bf16 = compare_published(measured.assign(dtype="bfloat16"), published)
    assert set(bf16["front_points"]) == {1}


def test_report_shows_published_beside_yours_and_never_prices_them(results):
    data = build_report(results, published_tolerance=0.10, include_shipped=False)
    assert data.published_rows == 7 and len(data.published) == 3
    assert len(data.results) == 3 and data.priced["file"].str.endswith(".json").all()
    markdown = render(data, "markdown")
    assert "## Published results beside yours" in markdown
    assert "| -14.7% | differs by -15%: check your stack |" in markdown
    assert "| -2.5% | agrees within 10% |" in markdown
    html = render(data, "html")
    assert "<h2>Published results beside yours</h2>" in html and "differs by -15%: check your stack" in html
    assert '<figure class="chart" id="published-0"' in html      # your points drawn over the published front
    # A DataFrame loaded with the published rows gives the same comparison, and prices only yours.
    framed = build_report(load_results(results, include_published=True), include_shipped=False)
    assert len(framed.results) == 3 and len(framed.published) == 3


def test_report_cli_tolerance_flag(results, monkeypatch, capsys):
    code, stdout, _ = run_cli(monkeypatch, capsys, "report", str(results), "--published-tolerance", "20")
    assert code == 0 and "| -14.7% | agrees within 20% |" in stdout


def test_mlperf_server_result_compared_at_stated_lengths(tmp_path, monkeypatch, capsys):
    out = tmp_path / "results"
    # TPOT 0.05 -> 20 tok/s/user, MLPerf's Server point; 240 * 1024 / 51.3 / 8 = 598.8 tok/s/chip.
    write_results(out, [dict(POINT, accelerator="NVIDIA H200", batch_size=240, ttft_s=0.15,
                             e2e_s=0.15 + 1023 * 0.05, seed=4)])
    code, _, stderr = run_cli(monkeypatch, capsys, "import", "mlperf", str(FIXTURES / "mlperf_tree"), "--into", str(out),
                              "--model", MODEL, "--input-length", "1024", "--output-length", "1024")
    assert code == 0, stderr
    table = tpubench.compare_published(out)
    assert len(table) == 1 and table["published_tokens_per_s_per_chip"].item() == pytest.approx(3000.0)
    assert table["deviation"].item() == pytest.approx(240 * 1024 / (0.15 + 1023 * 0.05) / 8 / 3000 - 1)
    assert table["verdict"].item().endswith("check your stack")
    assert pd.notna(table["front_interactivity_low"].item())


def test_report_says_when_nothing_published_matches(tmp_path, monkeypatch, capsys):
    out = tmp_path / "results"
    write_results(out, [dict(POINT, batch_size=52, ttft_s=0.425, e2e_s=26.0, seed=1)])
    # Without --model the rows keep InferenceX's own name, "llama70b": no measured point matches it.
    code, _, _ = run_cli(monkeypatch, capsys, "import", "inferencex", str(INFERENCEX), "--into", str(out))
    assert code == 0
    text = render(build_report(out, include_shipped=False), "markdown")
    assert "## Published results beside yours" in text
    assert "7 published row(s)" in text and "none at the model, lengths, accelerator and precision" in text


# ----------------------------------------------------------------------------- real public excerpts
# tests/fixtures/published/real/ (origin, commit and date in its SOURCES.md): InferenceX API rows for
# DeepSeek-R1-0528 at 1024/1024 and an MLPerf Inference v5.1 excerpt (Google, Dell, AMD folders and
# GigaComputing's summary.csv). The figures below are the files' own.

REAL = FIXTURES / "real"
REAL_IX = REAL / "inferencex" / "dsr1_1k1k_excerpt.json"
REAL_TREE = REAL / "mlperf_v5.1_tree"
REAL_CSV = REAL / "mlperf_v5.1_summary"
DSR1 = "deepseek-ai/DeepSeek-R1-0528"


def _real_ix():
    rows, notes = import_inferencex(REAL_IX, model=DSR1)
    assert notes == [] and len(rows) == 21
    return rows


def test_real_inferencex_disaggregated_output_is_over_all_chips():
    rows = _real_ix()
    # GB200 dynamo-trt, 8 prefill + 16 decode GPUs, conc 2048 (run 2025-12-19): InferenceX's
    # output_tput_per_gpu 4553.711885931449 is per DECODE GPU; per chip of the 24 it is 2/3 of that.
    row = rows[(rows["accelerator"] == "gb200") & (rows["concurrency"] == 2048)].iloc[0]
    assert (row["chips"], row["decode_chips"]) == (24, 16)
    assert row["output_tokens_per_s_per_chip"] == pytest.approx(4553.711885931449 * 16 / 24)
    assert row["total_tokens_per_s_per_chip"] == pytest.approx(6069.894176273722)
    assert (row["disaggregated"], row["multinode"], row["spec_decoding"]) == (True, True, "none")
    # At 1024 in / 1024 out every request adds as many input as output tokens, so output per chip
    # is half the total per chip on every row, disaggregated or not (the old reading gave 0.75).
    share = rows["output_tokens_per_s_per_chip"] / rows["total_tokens_per_s_per_chip"]
    assert share.between(0.49, 0.51).all(), share.tolist()


def test_real_inferencex_chip_counts():
    rows = _real_ix()
    # Single node, tp 8 ep 8: the API's num_*_gpu says 64 (tp x ep); one 8-GPU node ran it.
    b200 = rows[(rows["accelerator"] == "b200") & (rows["concurrency"] == 1)].iloc[0]
    assert b200["chips"] == 8 and math.isnan(b200["decode_chips"]) and b200["multinode"] is False
    # Older-schema disaggregated GB200 rows repeat the total (36) in both GPU fields; the split is
    # solved from tput 32.667 = (146.43 x P + 18.447 x (36 - P)) / 36 -> P = 4, D = 32.
    legacy = rows[(rows["accelerator"] == "gb200") & (rows["concurrency"] == 4)].iloc[0]
    assert (legacy["chips"], legacy["decode_chips"]) == (36, 32)
    assert legacy["output_tokens_per_s_per_chip"] == pytest.approx(18.44701834407234 * 32 / 36)
    assert legacy["multinode"] is None          # not recorded by that schema
    h200 = rows[(rows["accelerator"] == "h200") & rows["disaggregated"].astype(bool)]
    assert set(h200["chips"]) == {80} and set(h200["decode_chips"]) == {72}
    assert set(rows[rows["spec_decoding"] == "mtp"]["accelerator"]) == {"h200", "gb200"}


def _replay(row, **extra) -> pd.DataFrame:
    """A measured point that replays a published row exactly: same chips, total output tokens/s
    (output per chip x chips) and interactivity."""
    return pd.DataFrame([dict(source="measured", status="ok", workload="DeepSeek-R1-0528", dtype="nvfp4",
                              accelerator="NVIDIA GB200", chips=row["chips"], input_length=1024,
                              output_length=1024,
                              output_tokens_per_s=row["output_tokens_per_s_per_chip"] * row["chips"],
                              interactivity_tokens_per_s=row["interactivity_tokens_per_s"], file="replay.json",
                              **extra)])


def test_exact_replay_of_inferencex_gb200_run_agrees():
    rows = _real_ix()
    published = rows[(rows["accelerator"] == "gb200") & (rows["concurrency"] == 2048)].iloc[0]
    # The run itself: 4553.71 output tok/s per decode GPU x 16 decode GPUs over 24 GB200s.
    measured = _replay(dict(chips=24, output_tokens_per_s_per_chip=4553.711885931449 * 16 / 24,
                            interactivity_tokens_per_s=published["interactivity_tokens_per_s"]))
    table = compare_published(measured, rows)
    same = table[table["published_setup"] == "disaggregated, multi-node, no speculative decoding"]
    assert len(same) == 1
    assert same["deviation"].item() == pytest.approx(0.0, abs=1e-9)
    assert same["verdict"].item() == "agrees within 10%"      # was "differs by -33%"
    # Speculative decoding and the older-schema rows are fronts of their own, never mixed in.
    assert set(table["published_setup"]) == {"disaggregated, multi-node, no speculative decoding",
                                             "disaggregated, multi-node, speculative decoding (mtp)",
                                             "disaggregated, no speculative decoding"}


def test_published_fronts_grouped_by_setup():
    rows = _real_ix()
    point = pd.DataFrame([dict(source="measured", status="ok", workload="DeepSeek-R1-0528", dtype="float8_e4m3fn",
                               accelerator="NVIDIA H200", chips=8, input_length=1024, output_length=1024,
                               output_tokens_per_s=8 * 150.0, interactivity_tokens_per_s=50.0, file="x.json")])
    table = compare_published(point, rows).set_index("published_setup")
    # H200 fp8: single-node sglang (conc 4, 8), single-node sglang with MTP (conc 16, 32, 64) and
    # disaggregated multi-node dynamo-trt (8 prefill + 72 decode): three fronts.
    assert table["front_points"].to_dict() == {
        "aggregated, single-node, no speculative decoding": 2,
        "aggregated, single-node, speculative decoding (mtp)": 3,
        "disaggregated, multi-node, no speculative decoding": 3}
    mtp = table.loc["aggregated, single-node, speculative decoding (mtp)"]
    # MTP front at 50 tok/s/user: between (44.7267, 177.2696) and (60.8413, 119.7600).
    x1, y1, x2, y2 = 44.72670042, 177.26958780707358, 60.84125044, 119.76000991759896
    assert mtp["published_tokens_per_s_per_chip"] == pytest.approx(y1 + (y2 - y1) * (50 - x1) / (x2 - x1), rel=1e-6)


def test_real_mlperf_tree_skips_non_llm_and_reads_precision(tmp_path, monkeypatch, capsys):
    rows, notes = import_mlperf(REAL_TREE, input_length=1024, output_length=1024)
    assert notes[0] == ("4 result(s) of benchmarks that are not LLMs skipped (retinanet, rgat, "
                        "stable-diffusion-xl, whisper)")
    assert "3 result(s) without a time per output token (Offline runs)" in notes[1] and len(notes) == 2
    by = rows.set_index(["submitter", "published_model", "scenario"])
    assert len(rows) == 7
    # Google B200 deepseek-r1 Server: 'Completed tokens per second: 14630.74', TTFT p50 508547445 ns,
    # TPOT p50 62252335 ns; measurements/.../B200-SXM-180GBx8_TRT_Server.json: weight_data_types fp4.
    r1 = by.loc[("Google", "deepseek-r1", "Server")]
    assert r1["output_tokens_per_s_per_chip"] == pytest.approx(14630.74 / 8)
    assert (r1["ttft_p50_s"], r1["tpot_p50_s"]) == pytest.approx((0.508547445, 0.062252335))
    assert r1["interactivity_tokens_per_s"] == pytest.approx(1 / 0.062252335)
    assert (r1["precision"], r1["multinode"], r1["disaggregated"]) == ("fp4", False, None)
    assert by.loc[("Google", "llama2-70b-99", "Interactive"), "output_tokens_per_s_per_chip"] == \
        pytest.approx(52140.68 / 8)                    # LoadGen calls it Server; the folder says Interactive
    assert by.loc[("Google", "llama2-70b-99", "Offline"), "precision"] == "fp8"       # the H200 system
    assert by.loc[("AMD", "llama2-70b-99", "Offline"), "precision"] == "mxfp4"
    assert by.loc[("AMD", "llama2-70b-99", "Offline"), "output_tokens_per_s_per_chip"] == pytest.approx(93045.8 / 8)
    assert by.loc[("Dell", "llama2-70b-99", "Server"), "precision"] == "fp8"
    from tpubench.output.published.match import accelerator_key
    assert sorted(set(rows["accelerator"].map(accelerator_key))) == ["B200", "H200", "H200 NVL", "MI355X"]
    code, stdout, stderr = run_cli(monkeypatch, capsys, "import", "mlperf", str(REAL_TREE), "--into", str(tmp_path))
    assert code == 0 and "imported 7 published row(s)" in stdout and "not LLMs skipped" in stderr


def test_real_mlperf_summary_csv_says_it_cannot_be_compared(tmp_path, monkeypatch, capsys):
    rows, notes = import_mlperf(REAL_CSV)
    assert len(rows) == 13 and set(rows["precision"]) == {"fp4"} and rows["interactivity_tokens_per_s"].isna().all()
    # GigaComputing G894-SD1, 8x B200, deepseek-r1 Offline: Result 30873.9 Tokens/s.
    first = rows.iloc[0]
    assert (first["published_model"], first["scenario"]) == ("deepseek-r1", "Offline")
    assert first["output_tokens_per_s_per_chip"] == pytest.approx(30873.9 / 8)
    # rgat, stable-diffusion-xl (x2), whisper are not LLMs; llama3.1-8b Interactive is in Queries/s.
    assert "5 row(s) not in tokens/s, not an LLM or without accelerators left out" in notes[0]
    code, stdout, stderr = run_cli(monkeypatch, capsys, "import", "mlperf", str(REAL_CSV), "--into", str(tmp_path))
    assert code == 0
    assert "13 summary.csv row(s) give throughput only, no TTFT or TPOT: they cannot be placed" in stderr


@pytest.mark.parametrize("name, canonical", [
    ("NVIDIA H200 NVL", "H200 NVL"), ("NVIDIA H200-NVL-141GB", "H200 NVL"), ("NVIDIA H200-SXM-141GB", "H200"),
    ("h200", "H200"), ("NVIDIA GH200 144GB HBM3e", None), ("gb200", "GB200"), ("NVIDIA GB200", "GB200"),
    ("b200", "B200"), ("b300", "B300"), ("mi300x", "MI300X"), ("mi325x", "MI325X"), ("mi355x", "MI355X"),
    ("AMD Instinct MI300X 192GB HBM3", "MI300X"), ("AMD Instinct MI325X 256GB HBM3e", "MI325X"),
    ("AMD Instinct MI355X 288GB HBM3e", "MI355X"),
    ("AMD Instinct MI300X 192GB HBM3 (x32), AMD Instinct MI325X 256GB HBM3e (x16)", None),   # two chips
])
def test_published_accelerator_names_normalised(name, canonical):
    from tpubench.hardware.accelerators import chip_peaks, normalize_accelerator
    assert normalize_accelerator(name, "cuda") == canonical
    if canonical:
        assert chip_peaks(canonical) is not None, f"no spec row for {canonical}"


def test_h200_nvl_and_sxm_are_different_chips():
    from tpubench.hardware.accelerators import _specs, chip_peaks
    nvl, sxm = chip_peaks("H200 NVL"), chip_peaks("H200")
    assert nvl["peak_bf16_flops"] == 835.5e12 and sxm["peak_bf16_flops"] == 989e12
    assert (_specs()["H200 NVL"]["tdp_w"], _specs()["H200"]["tdp_w"]) == ("600", "700")
