"""The report as people look at it (issue 34), without a browser: figures whose rows and captions
read apart, and the summary at the top ("At a glance": report/headline.py) in markdown and HTML.
tests/test_report_browser.py renders the HTML in Chromium; tests/test_charts.py checks the charts'
specs."""

from __future__ import annotations

import math
import shutil
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
from helpers_synthetic import write_results

from tpubench.output.report import build_report, headline, published_list, render
from tpubench.output.report.figures import cost_by_platform, report_figures
from tpubench.output.report.html import render_html

ROOT = Path(__file__).resolve().parents[1]
TODAY = date(2026, 12, 2)
H100 = "NVIDIA H100 80GB HBM3"
# Long enough that an unwrapped figure title or heading would run off a 1280 px page.
LONG_WORKLOAD = "qwen3_moe_with_a_deliberately_long_workload_name_to_stress_titles_and_headings"


def wide_results(out: Path, committed: bool = True) -> Path:
    """A results folder for layout checks: synthetic points on H100 x8, TPU v6e and Trainium2 under a
    long workload name (long platform labels, long titles), with the committed examples/results/ beside them."""
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted((ROOT / "examples" / "results").glob("*.json")) if committed else ():
        shutil.copy(path, out / path.name)
    specs = []
    for batch, ttft, e2e in ((1, 0.05, 0.7), (8, 0.2, 1.5), (32, 0.8, 4.0)):
        specs += [
            dict(accelerator=H100, chips=8, batch_size=batch * 8, ttft_s=ttft, e2e_s=e2e, workload=LONG_WORKLOAD),
            dict(accelerator="TPU v6 lite", device="tpu", batch_size=batch, ttft_s=ttft * 1.5, e2e_s=e2e * 1.3,
                 workload=LONG_WORKLOAD),
            dict(accelerator="Trainium2", device="neuron", chips=16, batch_size=batch * 16, ttft_s=ttft * 1.2,
                 e2e_s=e2e * 1.1, workload=LONG_WORKLOAD),
        ]
    specs.append(dict(accelerator=H100, chips=8, batch_size=512, ttft_s=0.5, e2e_s=2.0, valid=False,
                      invalid_reasons=["recompiled during timing"], workload=LONG_WORKLOAD))
    write_results(out, specs)
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    # Without the committed results: one workload's figures are enough to check, and drawing is slow.
    return build_report(wide_results(tmp_path_factory.mktemp("wide"), committed=False), today=TODAY,
                        warn=lambda _: None)


def test_every_report_figure_reads_apart(data):
    figures = report_figures(data) + published_list.figures(data)
    ids = [chart.id for chart in figures]
    assert any(i.startswith("pareto") for i in ids) and any(i.startswith("published-ref") for i in ids)
    assert len(set(ids)) == len(ids) and len({chart.caption for chart in figures}) == len(figures)


def test_long_platform_labels_stay_whole_and_apart():
    row = {"blended_usd_per_mtok": 1.0, "blended_usd_per_mtok_ci95_low": 0.9, "blended_usd_per_mtok_ci95_high": 1.1,
           "valid": True, "plan": "on_demand", "priced_accelerator": "X" * 150, "cloud": "gcp",
           "instance_type": "an-instance-type-with-a-very-long-name", "region": "us-central1", "backend": "torch",
           "scenario_kind": "generate", "file": "a.json", "workload": LONG_WORKLOAD}
    chart = cost_by_platform(pd.DataFrame([row, {**row, "plan": "spot"}, {**row, "file": "b.json", "batch_size": 8}]),
                             "Cost per million tokens, " + LONG_WORKLOAD, "cost-0", "caption")
    labels = chart.tables["table"]["label"]
    assert len(set(labels)) == 3 and all(("X" * 150) in label for label in labels)   # the axis cuts, the tooltip has it all


# ----------------------------------------------------------------------------- the summary at the top


def _summary_row(workload, plan, platform, cost, verdict, valid=True, scale="small"):
    return {"workload": workload, "scale": scale, "plan": plan, "priced_accelerator": platform, "cloud": "gcp",
            "instance_type": "n2", "region": "us-central1", "backend": "torch", "valid": valid, "batch_size": 8,
            "blended_usd_per_mtok": cost, "blended_usd_per_mtok_ci95_low": cost * 0.9,
            "blended_usd_per_mtok_ci95_high": cost * 1.1, "vs_cheapest": verdict}


def test_cheapest_per_plan_picks_the_marked_row_and_counts_the_rest():
    summary = pd.DataFrame([
        _summary_row("a", "on_demand", "H100", 2.0, "cheapest"),
        _summary_row("a", "on_demand", "TPU v6e", 2.1, "tie within noise"),
        _summary_row("a", "on_demand", "B200", 4.0, "dearer"),
        _summary_row("a", "spot", "H100", 1.0, "cheapest"),
        _summary_row("b", "on_demand", "TPU v6e", 3.0, "cheapest", valid=False),
        # A result without a scale is a group of its own (a NaN key must still count).
        _summary_row("c", "on_demand", "H100", 5.0, "cheapest", scale=math.nan),
        _summary_row("c", "on_demand", "B200", 5.1, "tie within noise", scale=math.nan),
    ])
    best = headline.cheapest_per_plan(summary).assign(kind="Inference")
    assert list(zip(best["workload"], best["plan"], best["priced_accelerator"])) == [
        ("a", "on_demand", "H100"), ("a", "spot", "H100"), ("b", "on_demand", "TPU v6e"), ("c", "on_demand", "H100")]
    assert best["compared"].tolist() == [3, 1, 1, 2] and best["ties"].tolist() == [1, 0, 0, 1]
    cells = [headline.cells(r) for _, r in best.iterrows()]
    assert cells[0][3] == "2.00 (1.80–2.20)" and cells[0][4] == "3 (1 within noise)" and cells[0][5] == "B=8"
    assert cells[1][4] == "1" and cells[2][6] == "INVALID" and cells[3][0] == "c"
    assert headline.cheapest_per_plan(pd.DataFrame()).empty
    (title, headers, rows), = headline.tables(best)
    assert title.startswith("Inference") and headers[3] == "Blended $/Mtok (95% CI)" and len(rows) == 4


def test_the_report_opens_with_the_summary(data):
    assert len(data.headline) == data.summary.groupby(["workload", "scale", "plan"], dropna=False).ngroups
    assert (data.headline["vs_cheapest"] == "cheapest").all()
    md = render(data, "markdown")
    glance = md.index("## At a glance")
    assert glance < md.index("cheapest point per platform and plan")
    assert f"{data.counts['results']} measured" in md[glance:] and f"{data.published_rows} published" in md[glance:]
    assert data.published_rows >= 100 and "0 estimated" in md
    html = render_html(data, figures=False)
    assert html.index('id="at-a-glance"') < html.index("cheapest point per platform and plan")
    # The H100 x8 / TPU / Trainium2 workload's cheapest on-demand option, with its CI, is in both.
    row = data.headline[(data.headline["workload"] == LONG_WORKLOAD) & (data.headline["plan"] == "on_demand")].iloc[0]
    cost = headline.cells(row)[3]
    assert "(" in cost and cost in md and cost in html
    assert math.isfinite(row["blended_usd_per_mtok_ci95_low"])
