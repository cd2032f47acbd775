"""Reports: markdown, CSV and one self-contained HTML file, whose figures a headless Chromium must
actually draw."""

from __future__ import annotations

import io
import os
import re
import subprocess
from datetime import date

import numpy as np
import pandas as pd
import pytest
from helpers_browser import chromium_path
from helpers_synthetic import write_results

from tpubench.budget import tokens as budget
from tpubench.budget.render import render_budget
from tpubench.errors import UserError
from tpubench.money import pricing
from tpubench.output.published.match import pareto_mask
from tpubench.output.report import build_report, render, render_report
from tpubench.output.report import format as fmt

TODAY = date(2026, 12, 2)
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    specs = []
    for batch, ttft, e2e in ((1, 0.05, 0.7), (8, 0.2, 1.5), (32, 0.8, 4.0)):
        specs += [
            dict(accelerator=H100, chips=8, batch_size=batch * 8, ttft_s=ttft, e2e_s=e2e),
            dict(accelerator="TPU v6 lite", device="tpu", batch_size=batch, ttft_s=ttft * 1.5, e2e_s=e2e * 1.3),
            dict(accelerator="Trainium2", device="neuron", chips=16, batch_size=batch * 16, ttft_s=ttft * 1.2,
                 e2e_s=e2e * 1.1),
        ]
    specs += [
        dict(accelerator=H100, chips=8, batch_size=512, ttft_s=0.5, e2e_s=2.0, valid=False,
             invalid_reasons=["recompiled during timing"]),
        dict(status="failed", error="CUDA out of memory"),
        dict(accelerator="TPU7x", device="tpu"),
    ]
    write_results(out, specs)
    (out / "corrupt.json").write_text('{"point": ', encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def data(results_dir):
    warnings = []
    d = build_report(results_dir, today=TODAY, warn=warnings.append)
    assert len(warnings) == 1 and "corrupt.json" in warnings[0]
    return d


@pytest.fixture(scope="module")
def html(data):
    return render(data, "html")


def test_summary_has_one_cheapest_point_per_platform_and_plan(data):
    s = data.summary
    assert not s.duplicated(["workload", "scale", "cloud", "region", "instance_type", "plan"]).any()
    # The invalid B=512 H100 run is cheaper, but a valid point is preferred where one exists.
    assert s[s.priced_accelerator == "H100"]["valid"].all()
    for _, group in s.groupby("plan"):
        assert (group["vs_cheapest"] == "cheapest").sum() == 1
        assert set(group["vs_cheapest"]) <= {"cheapest", "dearer", "tie within noise", "cheaper"}
    # TPU7x is priced on demand (the public SKU); the failed run is the one result left unpriced.
    assert data.counts == {"results": 12, "ok": 11, "failed": 1, "invalid": 1, "noisy": 0, "priced": 11,
                           "unpriced": 1}


def test_markdown_names_prices_hardware_software_and_marks_invalid_runs(data):
    md = render(data, "markdown")
    assert md.startswith("# tpubench cost report")
    assert "InferenceX $/Mtok†" in md and "whole chip-hour charged to output tokens" in md
    assert "time-attributed" in md
    assert f"{H100} ×8" in md                                          # hardware of each number
    assert "torch:cuda torch 2.11.0 transformers 5.0.0" in md           # and its software
    assert "INVALID: recompiled during timing" in md
    assert "run failed: CUDA out of memory" in md
    assert "TPU7x running in Americas" in md                            # the source of TPU7x's price
    assert "skypilot-org/skypilot-catalog catalogs/v9/aws/vms.csv" in md and "2026-01-22" in md
    assert "are 314 days old" in md                                     # stale price warning
    # Latencies render in ms: the 8-chip H100 B=64 run has TTFT p50 200 ms, p99 212 ms.
    assert "200 / 212" in md


def test_csv_keeps_every_result(data, results_dir):
    table = pd.read_csv(io.StringIO(render(data, "csv")))
    assert set(table["file"]) == {str(p) for p in results_dir.glob("*.json") if p.name != "corrupt.json"}
    unpriced = table[~table["priced"]]
    assert len(unpriced) == 1 and unpriced["unpriced_reason"].str.len().gt(0).all()
    assert {"blended_usd_per_mtok", "inferencex_usd_per_mtok", "price_source", "price_as_of"} <= set(table)


def _outside_scripts(html: str) -> str:
    return re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)


def test_html_is_one_self_contained_file(html, data):
    assert html.startswith("<!DOCTYPE html>")
    # Scripts: the vendored charting library and ours, inline, and each figure's data; none fetched.
    assert re.findall(r"<script[^>]*>", html).count("<script>") == 2
    assert not re.search(r"<script[^>]*\ssrc=", html)
    page = _outside_scripts(html)
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:)""", page)   # nothing to fetch
    assert "url(" not in page and "@import" not in page
    charts = re.findall(r'<figure class="chart" id="([a-z-]+)-\d+"', html)
    shipped, answers = charts.count("published-ref"), charts.count("answer")
    assert answers == 1                                                # the answer table's options, by plan
    assert len(charts) - shipped - answers == 3                        # cost, Pareto, latency
    assert shipped            # and the published reference rows shipped with tpubench (report/published_list.py)
    assert 'id="chart-filters"' in html and '<select name="chip">' in html
    assert 'class="invalid"' in html and "INVALID: recompiled during timing" in html
    assert "2026-01-22" in html and "skypilot-org/skypilot-catalog" in html
    assert "torch:neuron torch 2.11.0 transformers 5.0.0" in html


def test_html_without_figures_carries_no_script(data):
    from tpubench.output.report.html import render_html

    html = render_html(data, figures=False)
    assert "<script" not in html and "id=\"chart-filters\"" not in html


@pytest.mark.slow
def test_html_figures_are_drawn_in_headless_chromium(html, tmp_path):
    browser = chromium_path()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no chromium is installed (apt-get install -y chromium)")
        pytest.skip("chromium is not installed")
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--dump-dom",
           page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    dom = proc.stdout
    assert 'data-charts="drawn"' in dom, f"chromium drew no figure (rc={proc.returncode}): {proc.stderr[-2000:]}"
    figures = re.findall(r'<figure class="chart" id="[^"]+".*?</figure>', dom, re.S)
    assert len(figures) == html.count('<figure class="chart"') >= 3
    for figure in figures:      # each drawn: an SVG of many marks (the small report's are all SVG)
        assert "could not be drawn" not in figure and figure.count("<path") + figure.count("<text") > 10, figure[:300]


def test_render_report_from_paths_or_a_frame(results_dir, data):
    from_paths = render_report(results_dir, "md", today=TODAY, warn=lambda _: None)
    from_frame = render_report(data.results, "markdown", today=TODAY)
    strip = lambda text: re.sub(r"Generated \S+", "", text)  # noqa: E731
    assert strip(from_paths) == strip(from_frame)
    filtered = render_report(data.results, "csv", plans=["spot"], cloud="aws", today=TODAY)
    table = pd.read_csv(io.StringIO(filtered))
    assert set(table.loc[table["priced"], "plan"]) == {"spot"}
    with pytest.raises(UserError, match="--format"):
        render_report(data.results, "pdf", today=TODAY)


def test_pareto_front_keeps_points_not_beaten_in_both():
    # (interactivity, throughput): (1, 10) and (10, 1) trade off; (5, 5) too; (4, 4) is beaten by
    # (5, 5); (10, 0.5) by (10, 1); NaN never counts.
    x = [1, 10, 5, 4, 10, np.nan]
    y = [10, 1, 5, 4, 0.5, 100]
    assert pareto_mask(x, y).tolist() == [True, True, True, False, False, False]


def test_units_are_chosen_when_rendering():
    assert fmt.ms(0.2) == "200" and fmt.ms(0.0123) == "12.3"
    assert fmt.sig(1234.5) == "1,234" and fmt.sig(0.012345) == "0.0123"
    assert fmt.with_ci(1.0, 0.9, 1.1) == "1.00 (0.900–1.10)"
    assert fmt.with_ci(2.0, float("nan"), float("nan")) == "2.00"
    assert fmt.usd(6.88) == "$6.88" and fmt.usd_whole(80358.4) == "$80,358"


def test_budget_renders_as_markdown_and_csv(data):
    result = budget.plan_budget(data.results, pricing.load_prices(today=TODAY), tokens_per_day=2e9,
                                output_share=0.1, peak_factor=2, slo_ttft_s=0.5, slo_tpot_s=0.05,
                                current="aws/us-east-1/p5.48xlarge", today=TODAY)
    md = render_budget(result, "markdown")
    assert "# tpubench budget" in md and "Options, cheapest first" in md
    assert "current" in md and "/month" in md
    table = pd.read_csv(io.StringIO(render_budget(result, "csv")))
    assert len(table) == len(result.options) and "monthly_usd" in table


# ----------------------------------------------------------------------------- flagged prices (issue 17 item 3)

FLAG = "⚠ flagged price"


def test_a_flagged_price_is_not_shown_by_default_and_is_marked_wherever_it_competes(results_dir):
    # The shipped table's GCP a3-highgpu-8g us-central1 row (5.38 $/GPU-h, spot above on-demand)
    # is set aside for unflagged H100 rows, and a warning says so.
    data = build_report(results_dir, today=TODAY)
    h100 = data.priced[data.priced["priced_accelerator"] == "H100"]
    assert not h100["price_flagged"].any()
    assert not ((h100["instance_type"] == "a3-highgpu-8g") & (h100["region"] == "us-central1")).any()
    assert any("set aside" in w and "gcp/us-central1/a3-highgpu-8g" in w for w in data.warnings)
    md = render(data, "markdown")
    assert "H100 · gcp a3-highgpu-8g (us-central1)" not in md
    # Trainium2's only price is a flagged spot row: it is used, and marked.
    assert f"Trainium2 · aws trn2.48xlarge (us-east-2) {FLAG}" in md
    assert f"{FLAG}: aws trn2.48xlarge (us-east-2), spot: on-demand Price empty in catalog" in md

    flagged = build_report(results_dir, today=TODAY, include_flagged=True)
    h100 = flagged.summary[(flagged.summary["priced_accelerator"] == "H100")
                           & (flagged.summary["plan"] == "on_demand")]
    cheapest = h100.sort_values("blended_usd_per_mtok").iloc[0]
    assert cheapest["instance_type"] == "a3-highgpu-8g" and cheapest["region"] == "us-central1"
    assert cheapest["price_flagged"]                                      # 5.38 $/GPU-h wins among H100s
    md = render(flagged, "markdown")
    assert f"H100 · gcp a3-highgpu-8g (us-central1) {FLAG}" in md
    assert f"{FLAG}: gcp a3-highgpu-8g (us-central1), on-demand: GPU SKU mismatch suspected" in md
    assert f"gcp a3-highgpu-8g (us-central1) {FLAG}" in render(flagged, "html")
    table = pd.read_csv(io.StringIO(render(flagged, "csv")))
    marked = table[table["price_flagged"].fillna(False).astype(bool)]
    assert set(marked["instance_type"]) >= {"a3-highgpu-8g"} and marked["price_flag_reason"].notna().all()


def test_budget_passes_over_a_flagged_price_unless_included_and_then_marks_it(results_dir):
    from tpubench.output.frames import load_results

    results = load_results(results_dir)
    prices = pricing.load_prices(today=TODAY)
    kwargs = dict(tokens_per_day=1e9, output_share=0.1, plans=["on_demand"], today=TODAY)
    plain = budget.plan_budget(results, prices, **kwargs)
    assert not plain.options["price_flagged"].any()
    h100 = plain.options[plain.options["priced_accelerator"] == "H100"]
    assert h100.iloc[0]["instance_type"] == "p5.48xlarge"                 # 6.88 $/GPU-h, the honest cheapest
    assert any("set aside" in n for n in plain.notes)

    opted = budget.plan_budget(results, prices, include_flagged=True, **kwargs)
    h100 = opted.options[opted.options["priced_accelerator"] == "H100"]
    first = h100.iloc[0]
    assert (first["instance_type"], first["region"], bool(first["price_flagged"])) == (
        "a3-highgpu-8g", "us-central1", True)
    md = render_budget(opted, "markdown")
    assert f"H100 · gcp a3-highgpu-8g (us-central1) {FLAG}" in md and "GPU SKU mismatch suspected" in md
    csv_table = pd.read_csv(io.StringIO(render_budget(opted, "csv")))
    assert csv_table["price_flagged"].astype(bool).any()
