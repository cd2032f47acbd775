"""The answer table (issue 40): measured, estimated and published options priced side by side per
workload and plan, each labelled by its source, and a verdict with the interval of its ratio; the
chips a workload names (`compare_on`, `report --on`), estimate records (`estimate --out`), and the
one chip-seconds-per-token definition the estimate shares with the measured cost."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers_cli import run_cli
from helpers_synthetic import write_results

import tpubench
from tpubench.estimate.calibration import observations, runs_left_out
from tpubench.estimate.chips import chip, parse_target
from tpubench.estimate.command import run_estimate
from tpubench.estimate.features import CLOSED_LOOP, prefill_one_s, roofline, sequences_that_fit
from tpubench.estimate.models import PointPrecision
from tpubench.estimate.predict import calibrate, estimate, latencies
from tpubench.estimate.records import read_records
from tpubench.measure.per_token import batch_chip_seconds_per_token
from tpubench.money.pricing import load_prices
from tpubench.output.answer.assemble import assemble, verdict
from tpubench.output.answer.options import ESTIMATE, MEASURED, PUBLISHED, option_row
from tpubench.output.answer.verdict import break_even, ratio_interval
from tpubench.output.published.store import shipped_published
from tpubench.workload_spec.service_level import Volume

WORKLOAD = Path("workloads/qwen3_moe.yaml")


# --- the verdict, by hand ------------------------------------------------------------------------------

def _option(option, source, usd, low=None, high=None, in_verdict=True, precision="bf16", launch_on="", plan="spot",
            price=1.0, family=""):
    return option_row(workload="w", plan=plan, source=source, option=option, accelerator=option, chips=8,
                      precision=precision, tokens_per_s_per_chip=1.0, usd_per_mtok=usd,
                      usd_per_mtok_low=usd if low is None else low, usd_per_mtok_high=usd if high is None else high,
                      in_verdict=in_verdict, why_not="" if in_verdict else "listed", launch_on=launch_on,
                      usd_per_chip_hour=price, region="r", price_as_of="2026-12-01", family=family)


def test_independent_errors_add_in_quadrature_in_log_space():
    # Cheapest 1.0 (x/÷ 1.25), runner-up 2.0 (x/÷ 1.5): independent, the log half-widths add in
    # quadrature: sqrt(ln 1.25^2 + ln 1.5^2), not ln 1.25 + ln 1.5 (the ends divided).
    best, runner = _option("A", MEASURED, 1.0, 0.8, 1.25), _option("B", ESTIMATE, 2.0, 2 / 1.5, 3.0)
    r = ratio_interval(best, runner)
    q = math.hypot(math.log(1.25), math.log(1.5))
    assert (r.value, r.low, r.high) == pytest.approx((2.0, 2 * math.exp(-q), 2 * math.exp(q)))
    assert "quadrature" in r.basis and r.low > 1.5 / 1.25


def test_two_estimates_share_their_errors_where_their_families_have_held_out_pairs():
    best, runner = _option("A", ESTIMATE, 1.0, 0.5, 2.0), _option("B", ESTIMATE, 2.0, 1.0, 4.0)
    r = ratio_interval(best, runner, (math.log(1.2), "40 held-out pairs of X and Y"))
    assert (r.low, r.high) == pytest.approx((2 / 1.2, 2 * 1.2)) and r.decided and "40 held-out pairs" in r.basis
    # A measured side errs on its own: the pairs do not apply.
    assert "quadrature" in ratio_interval({**best, "source": MEASURED}, runner, (0.1, "pairs")).basis


def test_break_even_prices_by_hand():
    # A: $1/Mtok at $2/chip-h (0.5 chip-h per Mtok); B: $3/Mtok at $1/chip-h (3 chip-h per Mtok).
    # A stays cheapest while P_A < 1 x 3 / 0.5 = $6; B would win below 2 x 0.5 / 3 = $0.333.
    even = break_even(_option("A", ESTIMATE, 1.0, price=2.0), _option("B", ESTIMATE, 3.0, price=1.0))
    assert (even.best_stays_below, even.runner_wins_below) == pytest.approx((6.0, 1 / 3))


def test_a_verdict_is_decided_only_when_its_interval_clears_one():
    apart = pd.DataFrame([_option("A", ESTIMATE, 1.0, 0.9, 1.1), _option("B", ESTIMATE, 2.0, 1.8, 2.2)])
    v = verdict(apart, "w.yaml")
    assert v["decided"] and v["cheapest"] == "A" and v["runner_up"] == "B"
    assert "2.00x cheaper" in v["text"] and "decided at this confidence" in v["text"] and not v["decide_command"]
    assert "stays cheapest while it costs under $2.00" in v["break_even"] and "would win below $0.5" in v["break_even"]
    overlapping = pd.DataFrame([_option("A", ESTIMATE, 1.0, 0.5, 2.0, launch_on="tpu-v6e-8"),
                                _option("B", ESTIMATE, 1.5, 1.2, 1.9, launch_on="H100:8")])
    v = verdict(overlapping, "w.yaml")
    assert not v["decided"] and "not decided at this confidence" in v["text"] and v["ratio_low"] < 1
    # What decides it: measure both, the widest interval (A: 4x) first.
    assert v["decide_command"] == "tpubench launch w.yaml --on tpu-v6e-8 --on H100:8"
    assert "A narrows the estimate most" in v["decide_why"] and "4.0x" in v["decide_why"]


def test_only_ranked_options_enter_a_verdict():
    options = pd.DataFrame([_option("CPU", MEASURED, 0.01, in_verdict=False),       # a smoke test: cheapest, listed
                            _option("Llama on B200", PUBLISHED, 0.02, in_verdict=False),   # another model
                            _option("TPU", ESTIMATE, 0.3, 0.2, 0.45)])
    v = verdict(options)
    assert v["cheapest"] == "TPU" and v["text"].startswith("only one chip") and math.isnan(v["ratio"])
    none = verdict(options[options["source"] != ESTIMATE])
    assert "no option meets the SLO" in none["text"]


def test_a_verdict_across_precisions_says_so_and_an_unknown_precision_does_not():
    mixed = pd.DataFrame([_option("A", ESTIMATE, 1.0, precision="w fp8 / a fp8 / kv bf16"), _option("B", ESTIMATE, 3.0)])
    assert "(crosses precisions)" in verdict(mixed)["text"]
    unknown = pd.DataFrame([_option("A", MEASURED, 1.0, precision=""), _option("B", ESTIMATE, 3.0)])
    assert "crosses" not in verdict(unknown)["text"]


def test_the_runner_up_is_on_another_chip_and_like_with_like_first():
    h100_fp8 = {**_option("H100 fp8", ESTIMATE, 1.0, precision="w fp8 / a fp8 / kv bf16"), "accelerator": "H100"}
    h100_bf16 = {**_option("H100 bf16", ESTIMATE, 1.5), "accelerator": "H100"}          # same chip: not a rival
    tpu_bf16 = {**_option("TPU bf16", ESTIMATE, 2.0), "accelerator": "TPU v6e"}
    tpu_fp8 = {**_option("TPU fp8", ESTIMATE, 3.0, precision="w fp8 / a fp8 / kv bf16"), "accelerator": "TPU v6e"}
    v = verdict(pd.DataFrame([h100_fp8, h100_bf16, tpu_bf16, tpu_fp8]))
    assert (v["cheapest"], v["runner_up"]) == ("H100 fp8", "TPU fp8") and "crosses" not in v["text"]
    v = verdict(pd.DataFrame([h100_fp8, h100_bf16, tpu_bf16]))
    assert v["runner_up"] == "TPU bf16" and "(crosses precisions)" in v["text"]
    assert verdict(pd.DataFrame([h100_fp8, h100_bf16]))["text"].startswith("only one chip")


def test_the_workload_measured_last_comes_first():
    options = [{**_option("A", ESTIMATE, 1.0), "workload": "old"}, {**_option("B", ESTIMATE, 1.0), "workload": "new"},
               {**_option("C", ESTIMATE, 1.0), "workload": "estimated only"}]
    answer = assemble(options, [], {}, {}, [], newest={"old": "2026-12-01T00:00:00", "new": "2026-12-06T00:00:00"})
    assert answer.workloads() == ["new", "old", "estimated only"]


def test_assemble_ranks_cheapest_first_then_the_unranked_and_one_verdict_per_plan():
    options = [_option("B", ESTIMATE, 2.0), _option("none", ESTIMATE, math.nan, in_verdict=False),
               _option("listed", PUBLISHED, 0.5, in_verdict=False), _option("A", ESTIMATE, 1.0),
               _option("C", ESTIMATE, 5.0, plan="on_demand"), _option("D", ESTIMATE, 4.0, plan="on_demand")]
    answer = assemble(options, [], {}, {}, [])
    rows, verdicts = answer.of("w")
    spot = rows[rows["plan"] == "spot"]
    assert list(spot["option"]) == ["A", "B", "listed", "none"]
    assert list(verdicts["plan"]) == ["on_demand", "spot"] and list(verdicts["cheapest"]) == ["D", "A"]
    assert answer.disagreement("w") == "The answer turns on the plan: D on on-demand; A on spot"


def test_a_volume_sizes_whole_instances_and_names_the_cheaper_fleet():
    # 1e9 tokens a day at peak 1: 11,574 tokens/s. A: $1/Mtok at $2/chip-h = 555.6 tokens/s per chip:
    # 20.8 chips, so 3 instances of 8 = 24 chips, 24 x $2 x 730 h. B: $2/Mtok at $1/chip-h: 138.9 tokens/s
    # per chip, 83.3 chips: 11 instances = 88 chips x $1 x 730 h.
    options = [_option("A", ESTIMATE, 1.0, price=2.0), _option("B", ESTIMATE, 2.0, price=1.0)]
    answer = assemble(options, [], {}, {}, [], volumes={"w": Volume(tokens_per_day=1e9)})
    rows, verdicts = answer.of("w")
    assert list(rows["chips_needed"]) == [24, 88]
    assert list(rows["usd_per_month"]) == pytest.approx([24 * 2 * 730, 88 * 730])
    assert verdicts.iloc[0]["fleet"].startswith("at the volume, A's fleet costs least: $35,040 a month for 24 chips")


# --- one chip-seconds definition; precision; your rows ------------------------------------------------

@pytest.fixture(scope="module")
def cal():
    return calibrate(shipped_published().assign(source="published"))


def _point(output_len: int = 2, quantization: str | None = None):
    from tpubench.estimate.points import point_precision, with_precision, workload_points

    base = workload_points(WORKLOAD).points[-1]
    from dataclasses import replace
    point = replace(base, chips=8, output_len=float(output_len))
    return with_precision(point, point_precision("bfloat16", quantization)) if quantization else point


def test_the_estimate_charges_the_measured_cost_s_chip_seconds(cal):
    # Two output tokens: prefill makes the first, one decode step the second. The estimate's
    # chip-seconds per token are batch_chip_seconds_per_token of its own TTFT and E2E: the
    # measured cost's definition, O - 1 decode steps (not O).
    target = parse_target("H100:8", load_prices())
    point = _point(output_len=2)
    est = estimate(cal, target, chip("H100", point.compute_precision), point)
    ttft, tpot = est.ttft_s[0], est.tpot_s[0]
    charged = batch_chip_seconds_per_token(ttft, ttft + tpot, 8, point.concurrency, point.input_len, 2)
    assert est.output_chip_s_per_token[0] == pytest.approx(float(charged.output))
    assert est.blended_chip_s_per_token[0] == pytest.approx(float(charged.blended))
    assert est.output_chip_s_per_token[0] == pytest.approx(tpot * 8 / (point.concurrency * 2))   # one step, two tokens


def test_a_target_quantisation_changes_the_bytes_and_the_peak(cal):
    prices = load_prices()
    bf16, fp8 = _point(256), _point(256, "fp8")
    assert (bf16.weight_bytes, fp8.weight_bytes, fp8.kv_bytes) == (2.0, 1.0, 2.0)
    assert fp8.precision == "w fp8 / a fp8 / kv bf16" and bf16.precision == "bf16"
    h100_bf16, h100_fp8 = chip("H100", bf16.compute_precision), chip("H100", fp8.compute_precision)
    assert h100_fp8.peak_flops == pytest.approx(2 * h100_bf16.peak_flops, rel=1e-3)   # 1,979 vs 989 TFLOP/s
    assert chip("TPU v6e", "int8").peak_flops > chip("TPU v6e", "bfloat16").peak_flops    # v6e's int8 units
    assert chip("TPU v6e", "float8e4m3fn").peak_flops == chip("TPU v6e", "bfloat16").peak_flops   # none for fp8
    target = parse_target("H100:8@fp8", prices)
    assert target.quantization == "fp8" and target.chips == 8
    slow = estimate(cal, target, h100_bf16, bf16).output_tokens_per_s_per_chip[0]
    fast = estimate(cal, target, h100_fp8, fp8).output_tokens_per_s_per_chip[0]
    assert fast > slow


def test_a_published_precision_reads_its_three_dtypes_before_its_summary():
    assert PointPrecision.of("int8", "bfloat16", "fp8", "bf16").label == "w int8 / a bf16 / kv fp8"
    assert PointPrecision.of(None, None, None, "int8 weights").compute == "bf16"     # weight-only: 16-bit matmuls
    assert PointPrecision.of(None, None, None, "nonsense") is None


def test_your_rows_pull_their_family_and_say_so(cal, tmp_path):
    # One of your rows on an H100 that ran twice as efficiently as the published fit predicts.
    rows = shipped_published().assign(source="published")
    target = parse_target("H100:8", load_prices())
    point = _point(256)
    spec = chip("H100", point.compute_precision)
    alone = estimate(cal, target, spec, point)
    from tpubench.estimate.features import observed_cycle_s, roofline
    eff = math.exp(cal.fit.predict(__import__("tpubench.estimate.features", fromlist=["terms"]).terms(
        point, roofline(point, spec.peak_flops, spec.peak_bytes_per_s)), "NVIDIA Hopper"))
    roof = roofline(point, spec.peak_flops, spec.peak_bytes_per_s)
    rate = point.concurrency * point.output_len / (roof.cycle_s / (2 * eff)) / 8
    assert observed_cycle_s(point, rate) == pytest.approx(roof.cycle_s / (2 * eff))
    mine = {"source": "measured", "publisher": "you", "model": "qwen3_moe", "shape": point.shape, "precision": "bf16",
            "accelerator": "H100", "chips": 8, "concurrency": point.concurrency, "input_length": point.input_len,
            "output_length": point.output_len, "output_tokens_per_s_per_chip": rate, "date": "2026-12-01",
            "reference": "r.json"}
    pulled = estimate(calibrate(pd.concat([rows, pd.DataFrame([mine])], ignore_index=True)), target, spec, point)
    # One row, a prior worth one row: half way to it in log efficiency, so sqrt(2) faster.
    assert pulled.output_tokens_per_s_per_chip[0] == pytest.approx(alone.output_tokens_per_s_per_chip[0] * math.sqrt(2))
    assert "calibrated on 1 of your rows" in pulled.notes and pulled.own_rows == 1


def test_only_a_configuration_s_newest_run_calibrates_and_a_repeat_counts_once():
    base = {"publisher": "P", "model": "m", "accelerator": "H200", "chips": 8, "concurrency": 8, "input_length": 1024,
            "output_length": 1024, "precision": "fp8", "output_tokens_per_s_per_chip": 100.0}
    rows = [{**base, "date": "2026-01-01"}, {**base, "date": "2026-03-01", "output_tokens_per_s_per_chip": 150.0},
            {**base, "date": "2026-03-01", "output_tokens_per_s_per_chip": 150.0, "published_model": "m-99.9"},
            {**base, "concurrency": 16, "date": "2025-01-01"}]
    assert runs_left_out(rows) == ["superseded by a newer run of the same configuration", None,
                                   "the same measurement listed twice", None]


# --- end to end: a report over results whose workload names its chips ------------------------------------

@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A results folder: one small-scale CPU point of a qwen3_moe workload whose file names
    compare_on [tpu-v6e-8, H100:8@fp8], as `tpubench run` writes it (workload_file)."""
    root = tmp_path_factory.mktemp("answer")
    spec = yaml.safe_load(WORKLOAD.read_text())
    spec["compare_on"] = ["tpu-v6e-8", "H100:8@fp8"]
    (root / "wl.yaml").write_text(yaml.safe_dump(spec))
    results = root / "results"
    path, = write_results(results, [dict(accelerator="AMD EPYC", device="cpu", chips=2, workload="qwen3_moe",
                                         scale="small", batch_size=8, input_length=128, output_length=32,
                                         ttft_s=0.3, e2e_s=1.5)])
    data = json.loads(path.read_text())
    data["workload_file"] = str(root / "wl.yaml")
    path.write_text(json.dumps(data))
    return results


@pytest.fixture(scope="module")
def options(folder) -> pd.DataFrame:
    return tpubench.answer(folder)


def test_the_answer_labels_every_row_and_never_ranks_the_smoke_test(options):
    assert set(options["source"]) == {MEASURED, ESTIMATE, PUBLISHED}
    measured = options[options["source"] == MEASURED]
    assert not measured["in_verdict"].any() and measured["why_not"].str.startswith("smoke test at the 'small' scale").all()
    estimates = options[options["source"] == ESTIMATE]
    assert {"TPU v6e ×8 (tpu-v6e-8) · bf16", "H100 ×8 (H100:8@fp8)"} == set(estimates["option"])
    assert set(estimates["interval"]) == {"90% prediction interval"}
    fp8 = estimates[estimates["option"] == "H100 ×8 (H100:8@fp8)"]
    assert (fp8["precision"] == "w fp8 / a fp8 / kv bf16").all() and (fp8["launch_on"] == "H100:8").all()
    priced = estimates[estimates["usd_per_mtok"].notna()]
    assert (priced["usd_per_mtok_low"] < priced["usd_per_mtok"]).all() and priced["price_basis"].str.startswith(
        "list price:").all()
    published = options[options["source"] == PUBLISHED]
    priced_published = published[published["usd_per_mtok"].notna()]
    assert priced_published["price_basis"].str.startswith("published throughput x list price").all()
    own_model = published["note"].str.startswith("qwen3-30b-a3b")
    assert not priced_published.loc[~own_model[priced_published.index], "in_verdict"].any()   # yardsticks
    # Qwen3-30B-A3B itself is published on TPU7x (SGLang-JAX, priced on demand: the public SKU) and on
    # Trainium and Trainium2 (optimum-neuron): a row of your own model is priced at its point nearest
    # the SLO and ranked only where it meets it, or says why it has no price.
    own = published[own_model]
    tpu7x = own[(own["plan"] == "on_demand") & (own["accelerator"] == "TPU7x")]
    assert len(tpu7x) == 1 and "as of 2026-06-14" in tpu7x["price_basis"].iloc[0]
    priced_own = own[own["usd_per_mtok"].notna()]
    assert (priced_own["in_verdict"] == (priced_own["status"] != "misses")).all()
    unpriced = own[own["usd_per_mtok"].isna()]
    assert len(unpriced) and unpriced["why_not"].str.startswith("no ").all() and not unpriced["in_verdict"].any()
    assert unpriced["why_not"].str.contains("TPU7x: no public TPU7x").any()
    # Every option says where it stands at the workload's SLO; the verdict ranks only what meets it,
    # never a smoke test.
    assert set(options["slo"]) == {"TTFT p99 ≤ 2 s, TPOT p99 ≤ 50 ms (20 tok/s per user)"}
    ranked = options[options["in_verdict"]]
    assert len(ranked) and (ranked["status"] != "misses").all()
    for _, group in options.groupby("plan"):
        assert group["verdict_cheapest"].iloc[0] in set(ranked["option"]) | {""}
        assert "smoke" not in group["verdict_text"].iloc[0]


def test_the_report_opens_with_the_answer_in_every_format(folder, monkeypatch, capsys):
    code, md, err = run_cli(monkeypatch, capsys, "report", str(folder))
    assert code == 0, err
    glance = md.split("## At a glance")[1]
    block = glance[glance.index("### qwen3_moe: the answer"):glance.index("- Measured: your result files")]
    assert "Service level: TTFT p99 ≤ 2 s, TPOT p99 ≤ 50 ms" in block and "- **spot: " in block
    assert "| TPU v6e ×8 · bf16 | estimate [" in block and "For reference (not ranked):" in block
    assert "measured (small scale: smoke test)" in block and "estimated (for the chips each workload is decided between" in md
    assert max(len(line) for line in block.splitlines()) <= 120           # a terminal's width
    code, html, _ = run_cli(monkeypatch, capsys, "report", str(folder), "--format", "html")
    assert '<figure class="chart" id="answer-0"' in html and "qwen3_moe: the answer" in html
    code, csv, _ = run_cli(monkeypatch, capsys, "report", str(folder), "--format", "csv", "--table", "answer")
    table = pd.read_csv(io.StringIO(csv))
    assert {"source", "usd_per_mtok", "load", "ttft_s", "tpot_s", "status", "verdict_text", "verdict_decided",
            "verdict_ratio_low", "verdict_cheapest_stays_below_usd_per_chip_hour", "slo"} <= set(table.columns)
    code, _, err = run_cli(monkeypatch, capsys, "report", str(folder), "--table", "nope")
    assert code == 2 and "--table" in err


def test_report_on_adds_a_chip_for_every_workload(folder, monkeypatch, capsys):
    code, csv, err = run_cli(monkeypatch, capsys, "report", str(folder), "--format", "csv", "--table", "answer",
                             "--on", "trn2")
    assert code == 0, err
    assert "Trainium2 ×16 (trn2) · bf16" in set(pd.read_csv(io.StringIO(csv))["option"])
    code, _, err = run_cli(monkeypatch, capsys, "report", str(folder), "--on", "H100:8@fp9")
    assert code == 2 and err.count("\n") == 1 and "--on" in err and "fp9" in err


def test_an_unknown_chip_in_compare_on_names_the_file_and_field(tmp_path, monkeypatch, capsys):
    spec = yaml.safe_load(WORKLOAD.read_text())
    spec["compare_on"] = ["tpu-v9z-8"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(spec))
    code, _, err = run_cli(monkeypatch, capsys, "estimate", str(bad))
    assert code == 2 and err.count("\n") == 1 and str(bad) in err and "compare_on" in err


def test_estimate_records_reach_the_answer_and_nothing_else(tmp_path, monkeypatch, capsys):
    out = tmp_path / "results"
    code, _, err = run_cli(monkeypatch, capsys, "estimate", str(WORKLOAD), "--on", "trn2", "--out", str(out),
                           "--format", "json")
    assert code == 0, err and "wrote estimate record" in err
    record, = (out / "estimates").glob("*.json")
    rows = read_records(out)
    assert set(rows["source"]) == {"estimate"} and set(rows["workload"]) == {"qwen3_moe"}
    assert json.loads(record.read_text())["workload_file"] == str(WORKLOAD)
    assert tpubench.load_results(out).empty                     # not a result
    options = tpubench.answer(out)
    assert set(options["source"]) >= {ESTIMATE} and "Trainium2 ×16 (trn2) · bf16" in set(options["option"])
    (out / "estimates" / "foreign.json").write_text('{"not": "a record"}')
    seen = []
    assert len(read_records(out, warn=seen.append)) == len(rows) and "foreign.json" in seen[0]


def test_run_estimate_takes_compare_on_and_on_once_each():
    prices = load_prices()
    report = run_estimate(WORKLOAD, ["tpu-v6e-8", "trn2"], prices=prices, published=shipped_published())
    targets = list(dict.fromkeys(e.target for e in report.estimates))
    assert targets == ["tpu-v6e-8", "H100:8", "trn2"]          # qwen3_moe.yaml's compare_on, then --on's new one
    obs = observations(shipped_published().assign(source="published"))
    assert len(obs.y) >= 500                                   # issue 40's calibration set


# --- what could run: the sequences that fit, and a step past the ridge ---------------------------------

def test_sequences_that_fit_are_the_memory_beside_the_weights_over_one_sequence_s_cache():
    from dataclasses import replace

    from tpubench.estimate.features import MEMORY_UTILIZATION, TERMS, Point, roofline, sequences_that_fit, terms
    from tpubench.estimate.models import published_model

    shape = published_model("meta-llama/Llama-3.3-70B-Instruct")[1]
    point = Point(shape=shape, weight_bytes=2.0, kv_bytes=2.0, compute_precision="bf16", chips=8, concurrency=64,
                  input_len=1000, output_len=1000)
    h100 = chip("H100", "bf16")
    free = 8 * h100.memory_bytes * MEMORY_UTILIZATION - shape.total_params * 2
    per_sequence = 80 * 2 * 8 * 128 * 2 * 2000        # 80 layers, K and V, 8 KV heads of 128, 2 bytes, 2,000 tokens
    assert sequences_that_fit(point, h100.memory_bytes) == pytest.approx(free / per_sequence)
    assert sequences_that_fit(point, None) == math.inf
    # A calibration row whose client sent more: it calibrates on what fit (the rest queued).
    row = {"publisher": "P", "model": "meta-llama/Llama-3.3-70B-Instruct", "accelerator": "H100", "chips": 8,
           "concurrency": 100000, "input_length": 1000, "output_length": 1000, "precision": "bf16",
           "output_tokens_per_s_per_chip": 500.0, "date": "2026-01-01", "reference": "r"}
    obs = observations(pd.DataFrame([row]))
    assert obs.points[0].concurrency == math.floor(free / per_sequence)
    # The decode step's excess past the ridge, the fit's last term.
    short = replace(point, concurrency=4096, input_len=16, output_len=2)     # a tiny cache: the weights dominate
    roof = roofline(short, h100.peak_flops, h100.peak_bytes_per_s)
    assert roof.decode_bound == "compute"
    excess = TERMS.index("decode_compute_excess")
    assert terms(short, roof)[excess] == pytest.approx(math.log(roof.decode_compute_s / roof.decode_memory_s))
    assert terms(short, roof)[excess] > 0
    memory_bound = roofline(point, h100.peak_flops, h100.peak_bytes_per_s)
    assert terms(point, memory_bound)[excess] == 0.0


def test_an_estimate_past_the_memory_is_refused_for_a_batch_and_capped_for_a_server(cal):
    from dataclasses import replace

    target = parse_target("H100:8", load_prices())
    point = replace(_point(256), concurrency=1e6)
    spec = chip("H100", point.compute_precision)
    batch = estimate(cal, target, spec, point)
    assert batch.refused and "do not fit beside the weights" in batch.refused
    server = estimate(cal, target, spec, point, arrival=CLOSED_LOOP)
    assert server.refused is None and any(n.startswith("only ") and "fit at once" in n for n in server.notes)
    # The clients that do not fit wait for a slot: by Little's law, (clients - running) x cycle / running,
    # on top of the TTFT of a request that found one.
    fits = sequences_that_fit(point, spec.memory_bytes)
    running = replace(point, concurrency=float(math.floor(fits)))
    roof = roofline(running, spec.peak_flops, spec.peak_bytes_per_s)
    cycle = roof.cycle_s / server.efficiency
    _, tpot = latencies(cal.latency, server.family, running, roof,
                        prefill_one_s(running, spec.peak_flops, spec.peak_bytes_per_s), server.efficiency, CLOSED_LOOP,
                        running.concurrency)
    admitted = cycle - tpot * (running.output_len - 1)
    wait = (1e6 - running.concurrency) * cycle / running.concurrency
    assert server.ttft_s[0] == pytest.approx(wait + admitted, rel=1e-9)
    assert server.tpot_s[0] == pytest.approx(tpot, rel=1e-12)
