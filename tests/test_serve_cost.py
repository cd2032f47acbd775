"""Serve results priced, budgeted and reported beside generate ones, from the columns each kind
provides (a server's seconds per token; a batch's TTFT and E2E), checked against arithmetic done by
hand in the comments."""

from __future__ import annotations

import io
from datetime import date

import pandas as pd
import pytest
from helpers_synthetic import make_result, make_serve_result, write_results, write_serve_results
from helpers_synthetic import results_frame as frame

from tpubench.budget import tokens as budget
from tpubench.budget.render import render_budget
from tpubench.measure import per_token
from tpubench.money import cost, pricing
from tpubench.output.frames import load_results
from tpubench.output.report import build_report, render
from tpubench.output.report.charts import rows
from tpubench.output.report.figures import report_figures
from tpubench.scenarios.generate import cost as generate_cost

TODAY = date(2026, 12, 2)
H100 = "NVIDIA H100 80GB HBM3"
# One 4-GPU H100 box at 32 $/h: 8 $/chip-hour = 8/3600 $/chip-second.
PRICE_CSV = """cloud,region,instance_type,accelerator,chips_per_instance,on_demand,source,as_of
testcloud,r1,h100x4,H100,4,32.0,hand-made test price,2026-12-01
"""
USD_PER_CHIP_S = 8 / 3600

# The serve point of the brief: a 10 s window on 4 chips, 1000 prompt + 3000 completion tokens,
# 20% of the request time before the first token (the result's own request-time split, which
# pricing no longer uses: one point has no input/output split, only blended).
#   blended_s_per_token = 10 / 4000       = 0.0025     x 4 chips = 0.01     chip-s per token
SERVE = dict(accelerator=H100, chips=4, window_s=10.0, prompt_tokens=1000, completion_tokens=3000,
             share_in=0.2, requests=10, ttft_s=0.1, tpot_s=0.01, concurrency=8)
# A generate point on 1 chip: B=4, I=100, O=50, TTFT 2 s, E2E 7 s.
GENERATE = dict(accelerator=H100, chips=1, batch_size=4, input_length=100, output_length=50,
                ttft_s=2.0, e2e_s=7.0)


@pytest.fixture(scope="module")
def prices(tmp_path_factory):
    path = tmp_path_factory.mktemp("prices") / "prices.csv"
    path.write_text(PRICE_CSV, encoding="utf-8")
    return pricing.load_prices([path], shipped=False, today=TODAY)


def priced_by_kind(priced: pd.DataFrame, kind: str) -> pd.Series:
    rows = priced[priced["scenario_kind"] == kind]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_serve_row_prices_from_its_seconds_per_token(prices):
    priced, unpriced = cost.price_results(frame(make_serve_result(**SERVE)), prices, today=TODAY)
    assert unpriced.empty
    row = priced.iloc[0]
    assert row["scenario_kind"] == "serve" and row["server_name"] == "vllm"
    # One point at this server and load: no split, whatever sum TTFT / sum E2E says.
    assert row["split_method"] == "blended only" and "one point" in row["split_note"]
    assert pd.isna(row["input_chip_s_per_token"]) and pd.isna(row["output_chip_s_per_token"])
    assert pd.isna(row["input_usd_per_mtok"]) and pd.isna(row["output_usd_per_mtok"])
    assert row["blended_chip_s_per_token"] == pytest.approx(0.01)
    # $/Mtok blended = 0.01 chip-s per token * 8/3600 $/chip-s * 1e6 = 22.222, CI the column's +-2%.
    assert row["blended_usd_per_mtok"] == pytest.approx(22.2222, rel=1e-5)
    assert row["blended_usd_per_mtok_ci95_low"] == pytest.approx(22.2222 * 0.98, rel=1e-5)
    # Whole server: 3000 tokens / 10 s = 300 output tokens/s, 75 per chip.
    # InferenceX: 8 $/chip-h * 1e6 / (3600 * 75) = 29.630 $/Mtok; CI from the throughput's [0.98, 1.02].
    assert row["output_tokens_per_s_per_chip"] == pytest.approx(75)
    assert row["output_tokens_per_s_per_chip_ci95_low"] == pytest.approx(75 * 0.98)
    assert row["inferencex_usd_per_mtok"] == pytest.approx(29.6296, rel=1e-5)
    assert row["inferencex_usd_per_mtok_ci95_low"] == pytest.approx(29.6296 / 1.02, rel=1e-5)
    assert row["inferencex_usd_per_mtok_ci95_high"] == pytest.approx(29.6296 / 0.98, rel=1e-5)
    # Interactivity is the server's own figure (1 / median TPOT over requests = 100 tokens/s).
    assert row["interactivity_tokens_per_s_per_user"] == pytest.approx(100)
    assert row["requests_per_s"] == pytest.approx(1.0)
    assert pd.isna(row["batch_size"])                                      # a server has no batch size


def test_server_interactivity_column_wins_over_tpot(prices):
    point = make_serve_result(**{**SERVE, "interactivity_tokens_per_s": 42.0})
    priced, _ = cost.price_results(frame(point), prices, today=TODAY)
    assert priced.iloc[0]["interactivity_tokens_per_s_per_user"] == pytest.approx(42.0)


def test_generate_row_prices_exactly_as_before(prices):
    priced, _ = cost.price_results(frame(make_result(**GENERATE)), prices, today=TODAY)
    row = priced.iloc[0]
    assert row["scenario_kind"] == "generate"
    # input   = TTFT * chips / (B * I)         = 2 / 400 = 0.005  chip-s/token -> 0.005 * 8/3600 * 1e6 = 11.111
    # output  = (E2E - TTFT) * chips / (B * O) = 5 / 200 = 0.025                -> 55.556
    # blended = E2E * chips / (B * (I + O))    = 7 / 600 = 0.011667             -> 25.926
    assert row["input_chip_s_per_token"] == pytest.approx(0.005)
    assert row["output_chip_s_per_token"] == pytest.approx(0.025)
    assert row["blended_chip_s_per_token"] == pytest.approx(7 / 600)
    assert row["input_usd_per_mtok"] == pytest.approx(2 * USD_PER_CHIP_S / 400 * 1e6)
    assert row["output_usd_per_mtok"] == pytest.approx(5 * USD_PER_CHIP_S / 200 * 1e6)
    assert row["blended_usd_per_mtok"] == pytest.approx(7 * USD_PER_CHIP_S / 600 * 1e6)
    # The same numbers as the pure function of the offline formulas, CIs from TTFT/TPOT/E2E (+-2%).
    ref = generate_cost.time_attributed_costs(2.0, 7.0, 1, 4, 100, 50, USD_PER_CHIP_S)
    assert row["input_usd_per_mtok"] == pytest.approx(ref.input_usd_per_mtok, rel=1e-12)
    assert row["output_usd_per_mtok"] == pytest.approx(ref.output_usd_per_mtok, rel=1e-12)
    assert row["blended_usd_per_mtok"] == pytest.approx(ref.blended_usd_per_mtok, rel=1e-12)
    assert row["input_usd_per_mtok_ci95_low"] == pytest.approx(ref.input_usd_per_mtok * 0.98)
    assert row["output_usd_per_mtok_ci95_high"] == pytest.approx(ref.output_usd_per_mtok * 1.02)
    assert row["blended_usd_per_mtok_ci95_high"] == pytest.approx(ref.blended_usd_per_mtok * 1.02)
    # 1/median TPOT: TPOT = 5 / 49 s.
    assert row["interactivity_tokens_per_s_per_user"] == pytest.approx(49 / 5)


def test_results_that_predate_scenario_kind_price_as_generate(prices):
    old = frame(make_result(**GENERATE)).drop(columns=["scenario_kind"])
    priced, _ = cost.price_results(old, prices, today=TODAY)
    assert priced.iloc[0]["scenario_kind"] == "generate"
    assert priced.iloc[0]["input_usd_per_mtok"] == pytest.approx(2 * USD_PER_CHIP_S / 400 * 1e6)


def test_a_mixed_folder_prices_both_kinds(prices, tmp_path):
    write_results(tmp_path, [GENERATE])
    write_serve_results(tmp_path, [SERVE])
    results = load_results(tmp_path)
    assert sorted(results["scenario_kind"]) == ["generate", "serve"]
    priced, unpriced = cost.price_results(results, prices, today=TODAY)
    assert unpriced.empty and len(priced) == 2
    serve, generate = priced_by_kind(priced, "serve"), priced_by_kind(priced, "generate")
    assert serve["blended_usd_per_mtok"] == pytest.approx(22.2222, rel=1e-5)
    assert generate["blended_usd_per_mtok"] == pytest.approx(7 * USD_PER_CHIP_S / 600 * 1e6)
    assert pd.isna(serve["output_usd_per_mtok"]) and serve["split_method"] == "blended only"
    assert generate["split_method"] == "time-attributed"
    assert generate["output_usd_per_mtok"] == pytest.approx(5 * USD_PER_CHIP_S / 200 * 1e6)
    assert pd.isna(generate["server_name"]) and serve["server_version"] == "0.11.0"


# ----------------------------------------------------------------------------- budget

# Both on the 4-chip box, traffic 75% output (both points' own mix); sized on blended tokens:
#   serve:    blended 0.01 chip-s/token: 100 tokens/s/chip
#   generate: B=8, I=100, O=300 on 4 chips, TTFT 0.5 s, E2E 5 s:
#             blended = 5*4/3200 = 0.00625 chip-s/token: 160 tokens/s/chip (with --split the same:
#             c_in = 0.5*4/800 = 0.0025, c_out = 4.5*4/2400 = 0.0075 -> 0.25*0.0025 + 0.75*0.0075)
#             TPOT = 4.5/299 = 15.05 ms, p99 = mean * 1.06 = 15.95 ms
#   serve TPOT p99 12 ms. So with no TPOT SLO generate wins; under 14 ms only serve meets it.
BUDGET_SERVE = {**SERVE, "tpot_p99_s": 0.012, "ttft_p99_s": 0.2}
BUDGET_GENERATE = dict(accelerator=H100, chips=4, batch_size=8, input_length=100, output_length=300,
                       ttft_s=0.5, e2e_s=5.0)
# 3 serve replicas of 4 chips at 100 tokens/s/chip: 1200 tokens/s.
TOKENS_PER_DAY = 1200 * 86400


@pytest.fixture(scope="module")
def both_kinds():
    return frame(make_result(**BUDGET_GENERATE), make_serve_result(**BUDGET_SERVE))


def plan(results, prices, **kwargs):
    return budget.plan_budget(results, prices, tokens_per_day=TOKENS_PER_DAY, output_share=0.75,
                              today=TODAY, **kwargs)


def test_budget_mix_rate_from_a_servers_chip_seconds():
    assert per_token.mix_rate(0.008, 0.04 / 3.75, 0.75) == pytest.approx(100)
    assert budget.blended_rate(0.01) == pytest.approx(100)
    assert per_token.mix_rate(0.0025, 0.0075, 0.75) == pytest.approx(160)
    # The offline entry point is the same arithmetic from TTFT and E2E.
    assert generate_cost.mix_tokens_per_s_per_chip(0.5, 5.0, 4, 8, 100, 300, 0.75) == pytest.approx(160)


def test_budget_picks_the_faster_point_and_says_its_kind(both_kinds, prices):
    result = plan(both_kinds, prices)
    best = result.options.iloc[0]
    assert len(result.options) == 1
    assert best["scenario_kind"] == "generate" and pd.isna(best["server_name"])
    assert best["tokens_per_s_per_chip"] == pytest.approx(160)


def test_budget_picks_the_server_when_only_it_meets_the_slo(both_kinds, prices):
    result = plan(both_kinds, prices, slo_tpot_s=0.014)
    assert len(result.options) == 1
    best = result.options.iloc[0]
    assert best["scenario_kind"] == "serve" and best["server_name"] == "vllm"
    assert best["server_version"] == "0.11.0" and best["concurrency"] == 8
    assert best["tokens_per_s_per_chip"] == pytest.approx(100)
    # 1200 tokens/s / (100 tokens/s/chip * 4 chips) = 3 replicas = 3 boxes at 32 $/h for 730 h.
    assert best["replicas"] == 3 and best["instances"] == 3
    assert best["monthly_usd"] == pytest.approx(3 * 32 * 730)
    md = render_budget(result, "markdown")
    assert "vllm 0.11.0 (serve)" in md and "C=8" in md and "B=None" not in md and "nan" not in md
    table = pd.read_csv(io.StringIO(render_budget(result, "csv")))
    assert table.loc[0, "scenario_kind"] == "serve" and table.loc[0, "server_name"] == "vllm"


def test_budget_keeps_only_the_scenarios_asked_for(both_kinds, prices):
    result = plan(both_kinds, prices, scenarios=["serve"])
    assert list(result.options["scenario_kind"]) == ["serve"]
    assert any("other scenario kinds left out" in n for n in result.notes)
    assert list(plan(both_kinds, prices, scenarios="generate").options["scenario_kind"]) == ["generate"]


def test_budget_names_a_servers_closest_point_when_none_meets_the_slos(prices):
    result = plan(frame(make_serve_result(**BUDGET_SERVE)), prices, slo_tpot_s=0.005)
    assert result.options.empty and len(result.infeasible) == 1
    closest = result.infeasible.iloc[0]
    assert closest["scenario_kind"] == "serve" and closest["concurrency"] == 8
    md = render_budget(result, "markdown")
    assert "C=8 I=1024 O=128 ×4 (vllm 0.11.0, serve)" in md and "TPOT p99 12.0 ms > 5.0 ms" in md


# ----------------------------------------------------------------------------- report


@pytest.fixture(scope="module")
def report_data(tmp_path_factory, prices):
    out = tmp_path_factory.mktemp("mixed")
    write_results(out, [dict(accelerator=H100, chips=4, batch_size=b, input_length=100, output_length=300,
                             ttft_s=0.1 * b, e2e_s=0.5 + b * 0.3) for b in (1, 8, 32)])
    write_serve_results(out, [
        {**SERVE, "concurrency": 8, "interactivity_tokens_per_s": 100.0},
        {**SERVE, "concurrency": 32, "window_s": 6.0, "tpot_s": 0.02, "interactivity_tokens_per_s": 50.0},
        {**SERVE, "server_name": "sglang", "server_version": "0.5.2", "concurrency": None, "request_rate": 4.0},
        # A serve workload of its own with no scale, lengths drawn (not fixed).
        {**SERVE, "workload": "chat_traffic", "scale": None, "input_length": None, "output_length": None},
    ])
    return build_report(out, prices=prices, today=TODAY)


def test_report_summary_has_a_row_per_stack(report_data):
    s = report_data.summary
    synthetic = s[s["workload"] == "synthetic"]
    assert sorted(synthetic["server_name"].fillna("-")) == ["-", "sglang", "vllm"]
    assert set(s["scenario_kind"]) == {"generate", "serve"}
    assert (s[s["workload"] == "chat_traffic"]["scenario_kind"] == "serve").all()


def test_markdown_report_shows_both_kinds_readably(report_data):
    md = render(report_data, "markdown")
    assert "## synthetic (full): cheapest point per platform and plan" in md
    assert "## chat_traffic: cheapest point per platform and plan" in md
    assert "vllm 0.11.0 (serve)" in md and "sglang 0.5.2 (serve)" in md
    assert "torch:cuda torch 2.11.0" in md                                 # the offline rows as before
    assert "C=8 I=1024 O=128" in md and "4 req/s I=1024 O=128" in md and "B=8 I=100 O=300" in md
    for junk in ("B=None", "B=nan", "I=None", "(None)", "nan"):
        assert junk not in md


def test_csv_report_labels_each_rows_stack(report_data):
    table = pd.read_csv(io.StringIO(render(report_data, "csv")))
    priced = table[table["priced"]]
    assert {"vllm 0.11.0", "sglang 0.5.2", "torch"} == set(priced["stack"])
    assert set(priced["scenario_kind"]) == {"generate", "serve"}
    assert priced["blended_chip_s_per_token"].notna().all()


def test_html_report_renders_both_kinds(report_data):
    html = render(report_data, "html")
    assert html.startswith("<!DOCTYPE html>") and "vllm 0.11.0 (serve)" in html
    # Two workloads, each with cost, Pareto and latency figures.
    assert html.count('<figure class="chart" id="pareto-') == 2


def test_pareto_figure_plots_servers_beside_offline_runs(report_data):
    charts = {chart.caption: chart for chart in report_figures(report_data)}
    chart = charts["Throughput per chip vs interactivity, synthetic (full)"]
    points = rows(chart.tables["table"])
    assert {"torch on H100 (offline)", "vllm 0.11.0 on H100 (serve)", "sglang 0.5.2 on H100 (serve)"} <= {
        p["series"] for p in points}
    # The server's interactivity is its own column (100 and 50 tokens/s per user), its throughput
    # per chip the window's: 3000/10/4 = 75 and 3000/6/4 = 125 output tokens/s per chip.
    vllm = sorted((p["x"], p["y"]) for p in points if p["series"] == "vllm 0.11.0 on H100 (serve)")
    assert vllm == [pytest.approx((50, 125)), pytest.approx((100, 75))]
    # One iso-cost line for the one accelerator, however many stacks ran on it.
    iso = chart.tables["iso"]["text"]
    assert len(iso) == 1 and " on H100 (" in iso[0]


# ----------------------------------------------------------------------------- probe-fitted split (issue 17 item 5)

# Two probe points of one vLLM at concurrency 8 on 4 chips, 10 s windows:
#   input-heavy:  10000 prompt + 1000 completion tokens -> 1000 input, 100 output tokens/s
#   output-heavy:  2000 prompt + 3000 completion tokens ->  200 input, 300 output tokens/s
# chips = c_in * r_in + c_out * r_out at both: 1000 c_in + 100 c_out = 4, 200 c_in + 300 c_out = 4
#   -> c_in = 2/700, c_out = 8/700 chip-s per token (test_cost.test_probe_fit_solves_two_points_exactly)
#   $/Mtok at 8/3600 $/chip-s: input 2/700 * 8/3600 * 1e6 = 6.3492, output 8/700 * 8/3600 * 1e6 = 25.397
# A third point at concurrency 16 is another load: one point, no split.
PROBES = [
    {**SERVE, "prompt_tokens": 10000, "completion_tokens": 1000, "input_length": 1000, "output_length": 100,
     "share_in": 0.9, "seed": 1},
    {**SERVE, "prompt_tokens": 2000, "completion_tokens": 3000, "input_length": 100, "output_length": 150,
     "share_in": 0.1, "seed": 2},
    {**SERVE, "concurrency": 16, "seed": 3},
]


def test_serve_split_comes_from_probe_points_at_the_same_load(prices):
    priced, _ = cost.price_results(frame(*[make_serve_result(**p) for p in PROBES]), prices, today=TODAY)
    by_load = priced.set_index(["concurrency", "input_length"])
    for key in ((8, 1000), (8, 100)):
        row = by_load.loc[key]
        assert row["split_method"] == "probe fit over 2 points"
        assert row["input_chip_s_per_token"] == pytest.approx(2 / 700)
        assert row["output_chip_s_per_token"] == pytest.approx(8 / 700)
        assert row["input_usd_per_mtok"] == pytest.approx(6.3492, rel=1e-4)
        assert row["output_usd_per_mtok"] == pytest.approx(25.397, rel=1e-4)
        # CI: the widest relative CI of the group's blended figures (+-2% here).
        assert row["output_usd_per_mtok_ci95_high"] == pytest.approx(25.397 * 1.02, rel=1e-4)
    # Blended is as before: the window's chip-seconds over all its tokens, 10 * 4 / 11000.
    assert by_load.loc[(8, 1000)]["blended_chip_s_per_token"] == pytest.approx(40 / 11000)
    other = by_load.loc[(16, 1024)]
    assert other["split_method"] == "blended only" and pd.isna(other["input_usd_per_mtok"])


def test_an_invalid_point_takes_no_part_in_a_probe_fit(prices):
    points = [make_serve_result(**PROBES[0]), make_serve_result(**PROBES[1], valid=False, invalid_reasons=["lag"])]
    priced, _ = cost.price_results(frame(*points), prices, today=TODAY)
    assert (priced["split_method"] == "blended only").all()
    assert set(priced["split_note"]) == {"invalid point: left out of any probe fit",
                                         "one point at this server and load: no input-heavy and output-heavy "
                                         "probe points"}


def test_every_shipped_rows_split_is_its_own_groups_fit_whatever_the_row_order():
    """serve_split writes each group's fit by position: over the ~2,700 published rows shipped
    (hundreds of groups), shuffled under a non-range index, each row has what probe_split gives its
    own group of valid points, computed here group by group."""
    from tpubench.output.published.rows import as_result_rows
    from tpubench.output.published.store import shipped_published
    from tpubench.records.columns import numeric_column
    from tpubench.scenarios.serve.cost import PROBE_GROUP_COLUMNS, probe_split, serve_split

    published = shipped_published()
    rows = as_result_rows(published, files=published["file"]).sample(frac=1, random_state=3)
    rows.index = rows.index * 7 + 11
    split = serve_split(rows)
    assert split.index.equals(rows.index)
    server = numeric_column(rows, "blended_s_per_token").notna() & rows["valid"].astype(bool) & rows["status"].eq("ok")
    keys = [c for c in PROBE_GROUP_COLUMNS if c in rows]
    groups = rows[server].groupby(keys, dropna=False, sort=False).indices.values()
    assert len(groups) > 100 and (split.loc[~server, "split_method"].isin(["", "blended only"])).all()
    served, mine = rows[server], split[server]
    numbers = {c: numeric_column(served, c).to_numpy() for c in ("chips", "input_tokens_per_s", "output_tokens_per_s")}
    for at in groups:
        expected = probe_split(*(numbers[c][at] for c in ("chips", "input_tokens_per_s", "output_tokens_per_s")))
        assert set(mine["split_method"].iloc[at]) == {expected.method} and set(mine["split_note"].iloc[at]) == {expected.note}
        for kind, value in (("input", expected.input), ("output", expected.output)):
            column = mine[f"probe_{kind}_chip_s_per_token"].iloc[at]
            assert (column.isna().all() if pd.isna(value) else (column == value).all())


def test_budget_sizes_on_blended_unless_asked_for_the_split(prices):
    results = frame(*[make_serve_result(**p) for p in PROBES])
    # Blended: the input-heavy point serves 11000 tokens / (10 s * 4 chips) = 275 tokens/s/chip at its
    # own 9% output; the output-heavy one 5000 / 40 = 125; the c=16 point 4000 / 40 = 100.
    blended = budget.plan_budget(results, prices, tokens_per_day=TOKENS_PER_DAY, output_share=0.5, today=TODAY)
    best = blended.options.iloc[0]
    assert blended.sizing == "blended" and best["sizing_basis"] == "blended"
    assert best["tokens_per_s_per_chip"] == pytest.approx(275)
    assert best["point_output_share"] == pytest.approx(100 / 1100)
    assert any(n.startswith("sized on blended tokens") for n in blended.notes)
    md = render_budget(blended, "markdown")
    assert "Sized on blended tokens" in md and "Tokens/s/chip (blended)" in md and "275 at 9.09% output" in md
    # --split: this traffic's 50% output at c_in = 2/700, c_out = 8/700: 1 / (0.5 * 10/700) = 140
    # tokens/s/chip for either probe point; the c=16 point has no split and is left out, with a note.
    split = budget.plan_budget(results, prices, tokens_per_day=TOKENS_PER_DAY, output_share=0.5, today=TODAY,
                               split=True)
    assert split.sizing == "split" and set(split.options["sizing_basis"]) == {"split"}
    assert split.options.iloc[0]["tokens_per_s_per_chip"] == pytest.approx(140)
    assert split.options.iloc[0]["split_method"] == "probe fit over 2 points"
    assert any("1 server point(s) without an input/output split left out" in n for n in split.notes)
    assert "Tokens/s/chip (split)" in render_budget(split, "markdown")


def test_report_names_the_split_method_in_tables_and_csv(prices):
    data = build_report(frame(*[make_serve_result(**p) for p in PROBES]), prices=prices, today=TODAY)
    md = render(data, "markdown")
    assert "Input/output split" in md and "probe fit over 2 points" in md
    assert "blended only: one point at this server and load" in md
    table = pd.read_csv(io.StringIO(render(data, "csv")))
    assert set(table["split_method"]) == {"probe fit over 2 points", "blended only"}
    assert "probe fit over 2 points" in render(data, "html")
