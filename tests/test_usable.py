"""One definition of a usable point (records/usable.py), and every consumer calling it: run's cost
table, the report's counts and summary, the answer, the budget and compare agree that a noisy point
is used (marked with its CV) and an invalid one is not; older files invalid for high CV read as noisy."""

from __future__ import annotations

import io
import json
from datetime import date
from pathlib import Path

import pytest
from helpers_synthetic import make_result
from helpers_synthetic import results_frame as frame
from rich.console import Console

from tpubench.budget import tokens as budget
from tpubench.console import render_run_cost
from tpubench.money import pricing
from tpubench.output.answer.options import measured_options
from tpubench.output.answer.service_level import Slo
from tpubench.output.compare import compare_results
from tpubench.output.frames import flatten
from tpubench.output.report.data import build_report
from tpubench.records import usable
from tpubench.records.result import RunResult, Validity, read_result, write_result

REPO = Path(__file__).resolve().parent.parent
TODAY = date(2026, 12, 10)
# Written by tpubench before issue 50 on a 2-vCPU host (2026-12-02): invalid for "throughput CV 11.6%".
OLD_NOISY = REPO / "examples" / "results" / "qwen3_moe_small_cpu_b8-i128-o32_20261202T180615703183Z.json"


def test_an_older_file_invalid_for_high_cv_reads_as_noisy():
    stored = json.loads(OLD_NOISY.read_text())["validity"]
    assert stored == {"valid": False, "reasons": ["throughput CV 11.6% above max_cv=10%"]}
    r = read_result(OLD_NOISY)
    assert r.validity.valid and r.validity.reasons == [] and r.validity.noise == stored["reasons"]
    assert r.validity.cv == pytest.approx(0.116)
    row = flatten(r, str(OLD_NOISY))
    assert row["valid"] and row["noisy"] and usable.noise_label(row) == "noisy: CV 11.6%"
    # Noise beside something wrong: still invalid for that, the noise kept apart.
    both = Validity.model_validate({"valid": False, "reasons": [
        "only 2 timed iterations, fewer than min_iterations=5 (max_seconds=300 reached)",
        "generated 31 tokens, expected 32", "throughput CV 25.4% above max_cv=10%"]})
    assert not both.valid and both.reasons == ["generated 31 tokens, expected 32"] and len(both.noise) == 2
    assert both.cv == pytest.approx(0.254)
    # A file written now is read as written.
    now = Validity.model_validate({"valid": True, "reasons": [], "noise": ["x"], "cv": 0.3})
    assert (now.valid, now.noise, now.cv) == (True, ["x"], 0.3)


def test_the_rule():
    assert usable.is_usable("ok", True) and usable.is_usable(None, None) and usable.is_usable("ok", float("nan"))
    assert not usable.is_usable("failed", True) and not usable.is_usable("ok", False)
    rows = frame(make_result(), make_result(noisy_cv=0.3, seed=1), make_result(valid=False, seed=2,
                                                                               invalid_reasons=["x"]),
                 make_result(status="failed", error="boom", seed=3))
    assert usable.usable_mask(rows).tolist() == [True, True, False, False]
    kept, left_out = usable.usable_rows(rows)
    assert len(kept) == 2 and left_out == 2
    assert [usable.noise_label(r) for _, r in rows.iterrows()] == ["", "noisy: CV 30.0%", "", ""]


def _three_points():
    """One H100 point each: quiet and fast, noisy (CV 25%) and fastest, invalid (recompiled) and cheapest."""
    quiet = make_result(batch_size=8, e2e_s=2.0, seed=0)
    noisy = make_result(batch_size=16, e2e_s=2.0, noisy_cv=0.25, rel_half_width=0.2, seed=1)
    wrong = make_result(batch_size=32, e2e_s=2.0, valid=False, invalid_reasons=["1 recompilation(s) during the "
                                                                                "timed phase"], seed=2)
    return quiet, noisy, wrong


def test_every_consumer_calls_the_one_definition(tmp_path):
    quiet, noisy, wrong = _three_points()
    paths = [write_result(r, tmp_path) for r in (quiet, noisy, wrong)]
    prices = pricing.load_prices()

    # run: every point priced; the noisy one marked with its CV, the invalid one for reference only.
    buf = io.StringIO()
    render_run_cost(Console(file=buf, width=400), paths)
    out = buf.getvalue()
    assert "b16 in1024 out128 cuda (noisy: CV 25.0%)" in out
    assert "b32 in1024 out128 cuda (INVALID: reference only)" in out
    assert "invalid b32 in1024 out128 cuda: 1 recompilation(s) during the timed phase; its cost is for reference" in out

    # report: counted once each; the summary's cheapest usable point is the noisy one (b32 is invalid)
    data = build_report(tmp_path, prices=prices, today=TODAY, warn=lambda _: None, include_shipped=False)
    assert (data.counts["invalid"], data.counts["noisy"], data.counts["ok"]) == (1, 1, 3)
    assert any("1 run(s) are noisy" in w for w in data.warnings)
    best = data.summary[data.summary["plan"] == "on_demand"].iloc[0]
    assert best["batch_size"] == 16

    # answer: the option is taken on its usable points only: the noisy b16 (marked with its CV) is its
    # cheapest, the invalid b32 never enters its sweep
    points = data.priced_rows.frame().assign(scale="full")
    options, _ = measured_options(points, "blended_usd_per_mtok", "output_tokens_per_s", {}, Slo(None, None))
    on_demand, = [o for o in options if o["plan"] == "on_demand"]
    assert on_demand["in_verdict"] and on_demand["load"] == 16 and on_demand["note"] == "noisy: CV 25.0%"

    # budget: sized on the usable points (the noisy b16 is the fastest per chip), the invalid one left out
    result = budget.plan_budget(frame(quiet, noisy, wrong), prices, tokens_per_day=1e9, output_share=0.2,
                                today=TODAY)
    assert "1 invalid run(s) left out of the budget" in result.notes
    assert set(result.options["batch_size"]) == {16}

    # compare: the invalid point is listed, never judged; the noisy one is compared and says so
    comparisons, unmatched = compare_results([("a.json", quiet)], [("b.json", _same_point(noisy, quiet))])
    assert len(comparisons) == 1 and "(B noisy: CV 25.0%)" in comparisons[0].label
    comparisons, unmatched = compare_results([("a.json", quiet)], [("b.json", _same_point(wrong, quiet))])
    assert comparisons == [] and any(u.startswith("not compared, invalid in B: b.json") for u in unmatched)


def _same_point(result: RunResult, like: RunResult) -> RunResult:
    """`result`'s figures and validity at `like`'s point (what compare pairs on)."""
    return result.model_copy(update={"point": like.point, "point_key": like.point_key})
