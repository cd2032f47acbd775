"""The figures a budget owner wants (docs/commands.md#figures), each a `charts.Chart`: a Vega-Lite
spec and its tables, drawn by the browser in the HTML report and to images with `--figures`.

Per workload of the token unit: cost by platform and plan, throughput per chip against
interactivity, latency per run; the expert-load heat maps of MoE results, the profiled points'
time by category, training's cost against throughput, your points beside published fronts, and
the answer's options along their load sweeps. Every point's tooltip names its configuration, its
interval, its source (the result file, or the publisher) and its price's date where it was priced.
"""

from __future__ import annotations

import json
import math
from typing import Sequence

import numpy as np
import pandas as pd

from tpubench.money.cost import unit_rows
from tpubench.money.token_costs import interactivity_tokens_per_s
from tpubench.output.labels import precision_label
from tpubench.output.published.match import pareto_mask
from tpubench.output.report import charts as c
from tpubench.output.report.charts import Chart
from tpubench.output.report.format import kind_label, plan_label, platform_label, point_label, stack_label, workload_label
from tpubench.records.columns import records
from tpubench.records.usable import usable_mask
from tpubench.scenarios import registry
from tpubench.units import number, share
from tpubench.workload_spec.vocabulary import FULL_SCALE

MAX_BARS = 40
MAX_BOXES = 16
MAX_ISO_LINES = 4
MAX_WORKLOADS = 4
_ISO_COST_STEPS = (1, 2, 5)


def _same(frame: pd.DataFrame, column: str, value) -> pd.Series:
    """frame[column] == value, where a missing value (a result without a scale) matches missing."""
    if pd.isna(value):
        return frame[column].isna()
    return frame[column] == value


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name] if name in frame else pd.Series(np.nan, index=frame.index)


def precision_labels(frame: pd.DataFrame) -> list[str]:
    """Each row's precision as the answer names it ('bf16', 'w int8 / a fp32 / kv fp32'), computed
    once per distinct set of dtypes."""
    names = ["weight_dtype", "activation_dtype", "kv_cache_dtype", "dtype"]
    keys = list(zip(*(c.texts(_column(frame, n)) for n in names))) if len(frame) else []
    made = {key: precision_label(*key) for key in dict.fromkeys(keys)}
    return [made[k] for k in keys]


# What a point's configuration reads (configuration: stack_label, kind_label, point_label).
_CONFIG_COLUMNS = ["server_name", "server_version", "backend", "scenario_kind", "chips", "batch_size", "concurrency",
                   "request_rate", "input_length", "output_length", "dtype", "execution_mode", "quantization",
                   "weight_dtype", "activation_dtype", "kv_cache_dtype", "experts_implementation", "experts_kernel",
                   "decode_loop", "routing"]


def per_distinct(rows: pd.DataFrame, columns: Sequence[str], make) -> list:
    """make(row) of every row, called once per distinct combination of `columns` (NaN equal to NaN):
    thousands of points share a few dozen configurations."""
    present = [col for col in columns if col in rows]
    if not len(rows) or not present:
        return [make(r) for r in records(rows[present])] if present else [make({}) for _ in range(len(rows))]
    keyed = rows[present]
    codes = keyed.groupby(present, sort=False, dropna=False).ngroup().to_numpy()
    made = [make(r) for r in records(keyed.drop_duplicates())]
    return [made[k] for k in codes]


def _facts(rows: pd.DataFrame, chip: str = "priced_accelerator") -> dict[str, list]:
    """The columns every chart's main table carries for the page's filters and tooltips: workload,
    chip, plan, precision, the configuration in words and its source (the result file)."""
    return {"workload": per_distinct(rows, ["workload", "scale"], workload_label), "chip": c.texts(_column(rows, chip)),
            **({"plan": per_distinct(rows, ["plan"], lambda r: plan_label(str(r["plan"])))} if "plan" in rows else {}),
            "precision": precision_labels(rows),
            "config": per_distinct(rows, [chip, *_CONFIG_COLUMNS], lambda r: configuration(r, chip)),
            "source": c.texts(_column(rows, "file"))}


def configuration(row, chip: str = "priced_accelerator") -> str:
    """A point in words: 'torch on H100 ×8 (offline) B=8 I=1024 O=128 bfloat16'."""
    return f"{stack_label(row)} on {row.get(chip)} ×{number(row.get('chips'))} ({kind_label(row)}) {point_label(row)}"


# --- cost by platform ---------------------------------------------------------------------------------


def cost_by_platform(summary: pd.DataFrame, title: str, fig_id: str, caption: str) -> Chart:
    """Horizontal bars: blended $/Mtok per platform and plan (cheapest at the top), one colour per
    plan (the legend toggles them), 95% CI whiskers, invalid runs marked."""
    rows = summary.sort_values("blended_usd_per_mtok", ascending=False).tail(MAX_BARS)
    recs = records(rows)
    stacks = [f"{stack_label(r)} ({kind_label(r)})" for r in recs]
    labels = c.unique_labels([f"{platform_label(r)} · {plan_label(r['plan'])}" for r in recs], stacks,
                             [point_label(r) for r in recs], c.texts(rows["file"]))
    table = {**_facts(rows), "label": labels, "usd": c.numbers(rows["blended_usd_per_mtok"]),
             "low": c.numbers(rows["blended_usd_per_mtok_ci95_low"]),
             "high": c.numbers(rows["blended_usd_per_mtok_ci95_high"]),
             "price_as_of": c.texts(_column(rows, "price_as_of")), "invalid": c.flags(~usable_mask(rows))}
    filters = c.filters_of(table)
    y = {"field": "label", "type": "nominal", "title": None, "sort": {"field": "usd", "op": "min", "order": "ascending"}}
    tips = [c.tip("config", "configuration"), c.tip("usd", "blended $/Mtok", "$,.4~g"),
            c.tip("interval", "95% CI, $/Mtok"), c.tip("source", "source"), c.tip("price_as_of", "price as of")]
    body = {"data": {"name": c.MAIN}, "transform": c.filter_transform(filters) + [
                {"calculate": c.interval_expr("low", "high", "$"), "as": "interval"}],
            "encoding": {"y": y}, "layer": [
                {"mark": {"type": "bar", "tooltip": True}, "params": [c.legend_toggle("plan")],
                 "encoding": {"x": {"field": "usd", "type": "quantitative",
                                    "axis": c.axis("blended $ per million tokens (time-attributed), 95% CI")},
                              "color": {"field": "plan", "type": "nominal", "title": "plan"},
                              "opacity": c.toggled(), "tooltip": tips}},
                {"mark": {"type": "rule", "color": "black"},
                 "encoding": {"x": {"field": "low", "type": "quantitative"}, "x2": {"field": "high"},
                              "opacity": c.toggled()}},
                {"mark": {"type": "text", "align": "left", "dx": 4, "color": "crimson"},
                 "encoding": {"x": {"field": "usd", "type": "quantitative"},
                              "text": {"condition": {"test": "datum.invalid", "value": "invalid run"}, "value": ""}}}]}
    return Chart(fig_id, caption, c.spec(title, filters, body, height=None) | {"height": {"step": 22}},
                 {c.MAIN: table})


# --- throughput against interactivity ---------------------------------------------------------------


def _nearest_nice(value: float) -> float:
    """The 1-2-5 number nearest `value` on a log scale (value > 0)."""
    exp = math.floor(math.log10(value))
    candidates = [step * 10.0 ** e for e in (exp - 1, exp, exp + 1) for step in _ISO_COST_STEPS]
    return min(candidates, key=lambda v: abs(math.log(v / value)))


def iso_cost_lines(points: pd.DataFrame, prices: dict[str, tuple[float, str]],
                   price_names: dict[str, str]) -> list[dict]:
    """One InferenceX-style iso-cost line per accelerator and price (at most MAX_ISO_LINES, those
    with the fastest points first): at a chip-hour price p the cost is p*1e6/(3600*y) $/Mtok, the
    same all along y, drawn at the 1-2-5 cost nearest the accelerator's median point.
    `prices`: series label -> (price, as of); `price_names`: label -> the accelerator it is for."""
    y = points["output_tokens_per_s_per_chip"].to_numpy(float)
    x = points["interactivity_tokens_per_s_per_user"].to_numpy(float)
    labels = points["label"].to_numpy(dtype=object)
    finite = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lines: dict[tuple[str, float, str], np.ndarray] = {}
    first_series: dict[tuple[str, float, str], str] = {}
    for label in pd.unique(labels):
        if label in prices:
            key = (price_names.get(label) or str(label).split(" (")[0], *prices[label])
            lines[key] = lines.get(key, np.zeros(labels.size, dtype=bool)) | ((labels == label) & finite)
            first_series.setdefault(key, str(label))
    fastest = sorted(((float(np.max(y[m])), key) for key, m in lines.items() if m.any()), reverse=True)
    out = []
    for _, key in fastest[:MAX_ISO_LINES]:
        name, price, as_of = key
        median_y = float(np.median(y[lines[key]]))
        if price > 0 and median_y > 0:
            level = _nearest_nice(price * 1e6 / (3600 * median_y))
            out.append({"series": first_series[key], "y": price * 1e6 / (3600 * level),
                        "text": f"${level:g}/Mtok on {name} (${price:,.4g}/chip-h, as of {as_of})"})
    return out


def throughput_vs_interactivity(points: pd.DataFrame, iso: list[dict], price_label: str, title: str,
                                fig_id: str, caption: str) -> Chart:
    """Output tokens/s per chip against interactivity (tokens/s per user), one colour per `label`
    (the legend toggles them), the Pareto front (not beaten in both) ringed and joined, and dashed
    InferenceX-style iso-cost lines (`iso_cost_lines`) at the cheapest `price_label` price."""
    x = points["interactivity_tokens_per_s_per_user"].to_numpy(float)
    y = points["output_tokens_per_s_per_chip"].to_numpy(float)
    chips = pd.to_numeric(points["chips"], errors="coerce").to_numpy(float)
    table = {**_facts(points, "canonical"), "series": c.texts(points["label"]), "x": c.numbers(x), "y": c.numbers(y),
             "low": c.numbers(pd.to_numeric(_column(points, "output_tokens_per_s_ci95_low"), errors="coerce") / chips),
             "high": c.numbers(pd.to_numeric(_column(points, "output_tokens_per_s_ci95_high"), errors="coerce") / chips),
             "price": c.texts(points["price"]), "front": c.flags(pareto_mask(x, y))}
    filters = c.filters_of(table)
    tips = [c.tip("config", "configuration"), c.tip("y", "output tokens/s per chip", ",.4~g"),
            c.tip("interval", "95% CI, tokens/s per chip"), c.tip("x", "tokens/s per user", ",.4~g"),
            c.tip("source", "source"), c.tip("price", "price (iso-cost lines)")]
    xy = {"x": {"field": "x", "type": "quantitative", "scale": c.log_scale(),
                "axis": c.axis("interactivity: 1 / median TPOT (tokens/s per user)")},
          "y": {"field": "y", "type": "quantitative", "scale": c.log_scale(),
                "axis": c.axis("output tokens/s per chip")}}
    mine = {"data": {"name": c.MAIN}, "transform": c.filter_transform(filters)}
    iso_layers = [
        # Grey, each named: coloured by series, they would merge into the legend and take its toggle.
        {"data": {"name": "iso"}, "mark": {"type": "rule", "strokeDash": [5, 4], "color": "#777777"},
         "encoding": {"y": {"field": "y", "type": "quantitative"}}},
        {"data": {"name": "iso"}, "mark": {"type": "text", "align": "left", "baseline": "bottom", "x": 4,
                                           "color": "#555555"},
         "encoding": {"y": {"field": "y", "type": "quantitative"}, "text": {"field": "text"}}}]
    layers = (iso_layers if iso else []) + [
        {**mine, "mark": {"type": "point", "filled": True, "size": 28, "tooltip": True},
         "params": [c.legend_toggle("series")],
         "transform": mine["transform"] + [{"calculate": c.interval_expr("low", "high"), "as": "interval"}],
         "encoding": {**xy, "color": {"field": "series", "type": "nominal", "title": None},
                      "opacity": c.toggled(0.85), "tooltip": tips}},
        {**mine, "transform": mine["transform"] + [{"filter": "datum.front"}],
         "mark": {"type": "line", "color": "black", "strokeWidth": 1}, "encoding": {**xy, "order": {"field": "x"}}},
        {**mine, "transform": mine["transform"] + [{"filter": "datum.front"}],
         "mark": {"type": "point", "filled": False, "size": 110, "color": "black"}, "encoding": xy},
    ]
    full_title = [title, f"black: the Pareto front; dashed: InferenceX-style iso-cost at the cheapest {price_label} "
                         "chip-hour price in the price table (list unless --prices / --discount)"]
    return Chart(fig_id, caption, c.spec(full_title, filters, {"layer": layers}, height=380),
                 {c.MAIN: table, "iso": {k: [line[k] for line in iso] for k in ("series", "y", "text")}})


# --- latency per run ----------------------------------------------------------------------------------

_LATENCY = (("ttft", "TTFT (ms)"), ("tpot", "TPOT (ms)"))


def _ms(rows: pd.DataFrame, column: str) -> list:
    return c.numbers(pd.to_numeric(_column(rows, column), errors="coerce") * 1e3)


def latency_distributions(rows: pd.DataFrame, title: str, fig_id: str, caption: str) -> Chart:
    """Per run, TTFT and TPOT as boxes from the summary percentiles: box p50–p90, whiskers min–p99,
    a dot at the max (no raw samples needed). A row per run, each named apart."""
    rows = rows.head(MAX_BOXES)
    facts = _facts(rows, "priced_accelerator" if "priced_accelerator" in rows else "canonical")
    labels = c.unique_labels(facts["config"], c.texts(rows["file"]))
    table: dict[str, list] = {k: [] for k in (*facts, "label", "metric", "p50", "p90", "p99", "min", "max")}
    for metric, name in _LATENCY:
        for k, v in facts.items():
            table[k] += v
        table["label"] += labels
        table["metric"] += [name] * len(rows)
        for stat in ("p50", "p90", "p99", "min", "max"):
            table[stat] += _ms(rows, f"{metric}_{stat}_s")
    if "price_as_of" in rows:
        table["price_as_of"] = c.texts(rows["price_as_of"]) * len(_LATENCY)
    filters = c.filters_of(table)
    tips = [c.tip("config", "configuration"), c.tip("metric", "latency"), c.tip("p50", "p50 ms", ",.4~g"),
            c.tip("p90", "p90 ms", ",.4~g"), c.tip("p99", "p99 ms", ",.4~g"), c.tip("max", "max ms", ",.4~g"),
            c.tip("source", "source")] + ([c.tip("price_as_of", "price as of")] if "price_as_of" in table else [])
    panels = []
    for n, (_metric, name) in enumerate(_LATENCY):
        values = [v for m, lo, hi in zip(table["metric"], table["min"], table["max"]) if m == name
                  for v in (lo, hi) if v]
        log = bool(values) and min(values) > 0 and max(values) / min(values) > 20
        x = {"type": "quantitative", "axis": c.axis(name), **({"scale": c.log_scale()} if log else {})}
        y = {"field": "label", "type": "nominal", "sort": None, "title": None,
             **({"axis": None} if n else {"axis": {"labelLimit": 420}})}
        panels.append({"width": 300, "height": {"step": 24}, "data": {"name": c.MAIN},
                       "transform": c.filter_transform(filters) + [{"filter": f"datum.metric === '{name}'"}],
                       "encoding": {"y": y}, "layer": [
                           {"mark": "rule", "encoding": {"x": {**x, "field": "min"}, "x2": {"field": "p99"}}},
                           {"mark": {"type": "bar", "size": 14, "tooltip": True},
                            "encoding": {"x": {**x, "field": "p50"}, "x2": {"field": "p90"}, "tooltip": tips}},
                           {"mark": {"type": "tick", "color": "black", "thickness": 2},
                            "encoding": {"x": {**x, "field": "p50"}}},
                           {"mark": {"type": "point", "filled": True, "color": "black", "size": 18},
                            "encoding": {"x": {**x, "field": "max"}, "tooltip": tips}}]})
    return Chart(fig_id, caption, c.spec(title, filters, {"hconcat": panels}), {c.MAIN: table})


# --- the token unit's figures -------------------------------------------------------------------------


def _canonical_accelerators(results: pd.DataFrame, known: Sequence[str]) -> pd.Series:
    from tpubench.money.accelerator_map import map_accelerators

    canonical = map_accelerators(results["accelerator"], results["device"], known)
    return canonical.where(canonical.notna(), results["accelerator"].astype(str))


def point_group_label(row, accelerator: str) -> str:
    """The Pareto figure's series: 'vllm 0.11.0 on H100 (serve)', 'torch on H100 (offline)'."""
    return f"{stack_label(row)} on {accelerator} ({kind_label(row)})"


# What report_figures reads of the results (the rest of 10,000 results' columns is left behind).
_INPUT_COLUMNS = list(dict.fromkeys([
                  "file", "workload", "scale", "accelerator", "device", "chips", "server_name", "server_version",
                  "backend", "scenario_kind", "output_tokens_per_s", "output_tokens_per_s_ci95_low",
                  "output_tokens_per_s_ci95_high", "tpot_p50_s", "interactivity_tokens_per_s", "batch_size",
                  "concurrency", "request_rate", "input_length", "output_length", "dtype", "execution_mode",
                  "quantization", "weight_dtype", "activation_dtype", "kv_cache_dtype", "experts_implementation",
                  "experts_kernel", "decode_loop", "routing", "status", "valid",
                  *(f"{m}_{s}_s" for m in ("ttft", "tpot") for s in ("p50", "p90", "p99", "min", "max"))]))


def _points(data, results: pd.DataFrame, use: pd.Series) -> tuple[pd.DataFrame, dict, dict]:
    """(the usable points of the token unit with their series label, interactivity, throughput per
    chip and iso-cost price; {label: (price, as of)}; {label: accelerator})."""
    ok = results.loc[use, [col for col in _INPUT_COLUMNS if col in results]]
    prices = data.priced_rows.used_prices()        # the price rows used, each once
    known = list(prices["priced_accelerator"].dropna().unique()) if len(prices) else []
    ok["canonical"] = _canonical_accelerators(ok, known)
    # Thousands of points share a few labels: each distinct one is made once.
    label_columns = [col for col in ("server_name", "server_version", "backend", "scenario_kind") if col in ok]
    keyed = ok[label_columns].assign(_canonical=ok["canonical"])
    group_of = keyed.groupby(list(keyed.columns), sort=False, dropna=False).ngroup().to_numpy()
    first = keyed.drop_duplicates()
    names = [point_group_label(r, a) for r, a in zip(records(first[label_columns]),
                                                     first["_canonical"].to_numpy(dtype=object))]
    ok["label"] = np.array(names, dtype=object)[group_of].tolist()
    chips = pd.to_numeric(ok["chips"], errors="coerce")
    ok["output_tokens_per_s_per_chip"] = pd.to_numeric(ok.get("output_tokens_per_s"), errors="coerce") / chips
    ok["interactivity_tokens_per_s_per_user"] = interactivity_tokens_per_s(ok)
    label_prices: dict[str, tuple[float, str]] = {}
    names_of = dict(zip(ok["label"].to_numpy(dtype=object), ok["canonical"].to_numpy(dtype=object)))
    primary = data.primary_plan
    if len(prices) and primary and not data.what_if_instance:
        priced = prices.loc[prices["plan"] == primary, ["priced_accelerator", "usd_per_chip_hour", "price_as_of"]]
        cheapest = priced.sort_values("usd_per_chip_hour", kind="stable").drop_duplicates("priced_accelerator")
        by_chip = {a: (float(p), str(d)) for a, p, d in cheapest.itertuples(index=False, name=None)}
        label_prices = {label: by_chip[chip] for label, chip in names_of.items() if chip in by_chip}
    words = {label: f"${p:,.4g}/chip-h {plan_label(primary or '')}, as of {d}" for label, (p, d) in label_prices.items()}
    ok["price"] = [words.get(label, "not priced") for label in ok["label"]]
    return ok, label_prices, names_of


def report_figures(data, unit=None) -> list[Chart]:
    """Per workload (at most MAX_WORKLOADS) of the token unit (the first registered one: other
    units have their own sections): cost by platform, throughput against interactivity and latency
    per run; then the expert-load heat maps and the profiled points. Every scenario kind is drawn
    alike from its columns: a server's points sit beside the offline runs, labelled with its stack."""
    results = data.results
    if results.empty or "status" not in results:
        return []
    measured = unit_rows(results, unit or registry.units()[0]) & (results["status"] == "ok")
    use = measured & usable_mask(results)
    if not use.any():
        use = measured
    if not use.any():
        return []
    ok, prices, names_of = _points(data, results, use)
    primary = data.primary_plan
    price_words = plan_label(primary or "on_demand")
    figures = []
    pairs = list(ok[["workload", "scale"]].drop_duplicates().itertuples(index=False, name=None))[:MAX_WORKLOADS]
    for n, (workload, scale) in enumerate(pairs):
        tag = workload_label({"workload": workload, "scale": scale})
        summary = data.summary
        summary = summary[_same(summary, "workload", workload) & _same(summary, "scale", scale)] if len(summary) else summary
        if len(summary):
            figures.append(cost_by_platform(summary, f"Cost per million tokens, {tag}", f"cost-{n}",
                                            f"Blended $/Mtok by platform and plan, {tag}"))
        points = ok[_same(ok, "workload", workload) & _same(ok, "scale", scale)]
        figures.append(throughput_vs_interactivity(points, iso_cost_lines(points, prices, names_of), price_words,
                                                   f"Throughput per chip vs interactivity, {tag}", f"pareto-{n}",
                                                   f"Throughput per chip vs interactivity, {tag}"))
        if len(summary):
            rows = (summary.assign(_other=summary["plan"] != primary)
                    .sort_values(["_other", "blended_usd_per_mtok"], kind="stable").drop_duplicates("file"))
        else:
            rows = points.sort_values("output_tokens_per_s_per_chip", ascending=False)
        figures.append(latency_distributions(rows.head(MAX_BOXES), "Latency per run: box p50–p90, whiskers "
                                             "min–p99, dot = max", f"latency-{n}", f"Latency distributions, {tag}"))
    for chart in figures:
        chart.facets = {"workload": chart.tables[c.MAIN]["workload"][0]} if chart.tables[c.MAIN]["workload"] else {}
    return figures + moe_figures(data) + profile_figures(data)


# --- expert load ----------------------------------------------------------------------------------------


def expert_load_heatmap(load: Sequence[Sequence[float]], title: str, fig_id: str, caption: str) -> Chart:
    """Per-layer heat map of expert load (models/routing.py expert_load): a row per MoE layer, a
    column per expert, colour = the expert's share of its layer's load over the mean (1 = balanced)."""
    counts = np.asarray(load, dtype=float)
    mean = counts.mean(axis=1, keepdims=True)
    ratio = np.divide(counts, mean, out=np.zeros_like(counts), where=mean > 0)
    layers, experts = ratio.shape
    table = {"layer": np.repeat(np.arange(layers), experts).tolist(), "expert": np.tile(np.arange(experts), layers).tolist(),
             "ratio": c.numbers(ratio.ravel(), 3)}
    tips = [c.tip("layer", "MoE layer"), c.tip("expert", "expert"), c.tip("ratio", "load / mean load", ".3~g")]
    body = {"data": {"name": c.MAIN}, "mark": {"type": "rect", "tooltip": True},
            "encoding": {"x": {"field": "expert", "type": "ordinal", "axis": {"title": "expert", "labelOverlap": True}},
                         "y": {"field": "layer", "type": "ordinal", "axis": {"title": "MoE layer"}},
                         "color": {"field": "ratio", "type": "quantitative", "title": "load / mean load",
                                   "scale": {"scheme": "magma", "domain": [0, max(2.0, float(ratio.max(initial=0)))]}},
                         "tooltip": tips}}
    return Chart(fig_id, caption, c.spec(title, [], body, height=min(520, 40 + 12 * layers)), {c.MAIN: table})


def _is_load(text) -> bool:
    """Whether a result's expert_load_json is a load to draw: layers of expert counts, at least one of each."""
    try:
        load = np.asarray(json.loads(text), dtype=float)
    except (TypeError, ValueError):
        return False
    return load.ndim == 2 and load.size > 0


def moe_figures(data) -> list[Chart]:
    """The expert-load heat map of each distinct load an MoE result recorded (at most MAX_BOXES):
    results that recorded the very same load (two arms of one kernel A/B route alike) share one map,
    whose caption names them all, so no two maps or captions are the same."""
    results = data.results
    if results.empty or "expert_load_json" not in results:
        return []
    rows = results[results["expert_load_json"].notna() & (results["status"] == "ok")]
    shared: dict[str, list[dict]] = {}
    for r in records(rows):
        if _is_load(r["expert_load_json"]):
            shared.setdefault(str(r["expert_load_json"]), []).append(r)
    figures = []
    for n, (load, group) in enumerate(list(shared.items())[:MAX_BOXES]):
        first = group[0]
        routing = first.get("routing") if isinstance(first.get("routing"), str) else "natural"
        imbalance = first.get("expert_load_imbalance")
        words = [f"{r['backend']}:{r['device']} ×{number(r.get('chips'))} {point_label(r)}" for r in group]
        tag = (f"{workload_label(first)} routing {routing}"
               + (f", max/mean {imbalance:.2f}" if isinstance(imbalance, float) and math.isfinite(imbalance) else ""))
        caption = f"Expert load per layer, {tag}: " + "; ".join(dict.fromkeys(words))
        if len(group) > 1:
            caption += f" ({len(group)} results with this same load)"
        figure = expert_load_heatmap(json.loads(load), tag, f"expert-load-{n}", caption)
        figure.facets = {"workload": sorted({workload_label(r) for r in group})}
        figures.append(figure)
    captions = c.unique_labels([f.caption for f in figures], [str(g[0].get("file")) for g in shared.values()])
    for figure, caption in zip(figures, captions):
        figure.caption = caption
    return figures


# --- profiles -----------------------------------------------------------------------------------------


def profile_breakdown(labels: Sequence[str], profiles: Sequence[dict], files: Sequence[str], title: str,
                      fig_id: str, caption: str) -> Chart:
    """One horizontal stacked bar per profiled point (run --profile, measure/profile.py): the
    milliseconds of its profiled pass by category, in report/profile.py's order and names."""
    from tpubench.output.report.profile import LABELS

    labels = c.unique_labels(list(labels), list(files))
    table: dict[str, list] = {"label": [], "category": [], "order": [], "ms": [], "source": []}
    for label, profile, file in zip(labels, profiles, files):
        for n, (category, name) in enumerate(LABELS.items()):
            table["label"].append(label)
            table["category"].append(name)
            table["order"].append(n)
            table["ms"].append(c.numbers([(profile.get("categories") or {}).get(category, 0.0) * 1e3])[0])
            table["source"].append(file)
    tips = [c.tip("label", "point"), c.tip("category", "category"), c.tip("ms", "ms", ",.4~g"), c.tip("source", "source")]
    body = {"data": {"name": c.MAIN}, "mark": {"type": "bar", "tooltip": True}, "params": [c.legend_toggle("category")],
            "encoding": {"y": {"field": "label", "type": "nominal", "sort": None, "title": None},
                         "x": {"field": "ms", "type": "quantitative", "stack": True,
                               "axis": c.axis("ms in the profiled pass (one iteration)")},
                         "color": {"field": "category", "type": "nominal", "sort": list(LABELS.values()),
                                   "title": None},
                         "order": {"field": "order"}, "opacity": c.toggled(), "tooltip": tips}}
    return Chart(fig_id, caption, c.spec(title, [], body, height=None) | {"height": {"step": 26}}, {c.MAIN: table})


def profile_figures(data) -> list[Chart]:
    """The stacked bars of the profiled points, if any."""
    from tpubench.output.report.profile import profiled

    rows = profiled(data.results)
    if rows.empty:
        return []
    caption = "Where the time goes: the profiled pass of each point by category (run --profile)"
    labels = [f"{r['profile_label']} {r['backend']}:{r['device']}" for r in records(rows)]
    return [profile_breakdown(labels, list(rows["profile"]), c.texts(_column(rows, "file")), caption, "profile", caption)]


# --- training -----------------------------------------------------------------------------------------


def training_cost_vs_throughput(rows: pd.DataFrame, title: str, fig_id: str, caption: str) -> Chart:
    """Training tokens/s per chip (x) against $ per million training tokens (y), a point per
    platform and plan with 95% CI whiskers on both, a colour per platform (the legend toggles
    them), a shape per plan, MFU beside each point. On one price a platform's points lie on
    y = p*1e6/(3600*x): faster per chip is cheaper."""
    rows = rows.head(MAX_BARS)
    recs = records(rows)
    table = {**_facts(rows), "series": [platform_label(r) for r in recs],
             "x": c.numbers(rows["train_tokens_per_s_per_chip"]), "y": c.numbers(rows["train_usd_per_mtok"]),
             "x_low": c.numbers(rows["train_tokens_per_s_per_chip_ci95_low"]),
             "x_high": c.numbers(rows["train_tokens_per_s_per_chip_ci95_high"]),
             "low": c.numbers(rows["train_usd_per_mtok_ci95_low"]), "high": c.numbers(rows["train_usd_per_mtok_ci95_high"]),
             "mfu": [f"MFU {share(v)}" if v is not None and math.isfinite(float(v)) else ""
                     for v in pd.to_numeric(_column(rows, "mfu"), errors="coerce")],
             "price_as_of": c.texts(_column(rows, "price_as_of"))}
    filters = c.filters_of(table)
    x = {"field": "x", "type": "quantitative", "scale": c.log_scale(), "axis": c.axis("training tokens/s per chip, 95% CI")}
    y = {"field": "y", "type": "quantitative", "scale": c.log_scale(), "axis": c.axis("$ per million training tokens, 95% CI")}
    colour = {"field": "series", "type": "nominal", "title": None}
    tips = [c.tip("config", "configuration"), c.tip("plan", "plan"), c.tip("y", "$/M training tokens", "$,.4~g"),
            c.tip("interval", "95% CI, $/M training tokens"), c.tip("x", "tokens/s per chip", ",.4~g"),
            c.tip("source", "source"), c.tip("price_as_of", "price as of")]
    layers = [
        {"mark": "rule", "encoding": {"x": {**x, "field": "x_low"}, "x2": {"field": "x_high"}, "y": y, "color": colour,
                                      "opacity": c.toggled()}},
        {"mark": "rule", "encoding": {"x": x, "y": {**y, "field": "low"}, "y2": {"field": "high"}, "color": colour,
                                      "opacity": c.toggled()}},
        {"mark": {"type": "point", "filled": True, "size": 70, "tooltip": True}, "params": [c.legend_toggle("series")],
         "encoding": {"x": x, "y": y, "color": colour, "shape": {"field": "plan", "type": "nominal"},
                      "opacity": c.toggled(), "tooltip": tips}},
        {"mark": {"type": "text", "align": "left", "dx": 6, "dy": -6, "fontSize": 10},
         "encoding": {"x": x, "y": y, "text": {"field": "mfu"}, "color": colour}},
    ]
    body = {"data": {"name": c.MAIN}, "transform": c.filter_transform(filters) + [
        {"calculate": c.interval_expr("low", "high", "$"), "as": "interval"}], "layer": layers}
    return Chart(fig_id, caption, c.spec(title, filters, body, height=380), {c.MAIN: table})


def training_figures(training: pd.DataFrame) -> list[Chart]:
    """One per workload of a training summary (report/training.py)."""
    if training is None or training.empty:
        return []
    figures = []
    pairs = list(training[["workload", "scale"]].drop_duplicates().itertuples(index=False, name=None))
    for n, (workload, scale) in enumerate(pairs[:MAX_WORKLOADS]):
        tag = workload_label({"workload": workload, "scale": scale})
        rows = training[_same(training, "workload", workload) & _same(training, "scale", scale)]
        figure = training_cost_vs_throughput(rows, f"Training: throughput per chip vs cost, {tag}", f"train-{n}",
                                             f"Training tokens/s per chip vs $ per million training tokens, {tag}")
        figure.facets = {"workload": tag}
        figures.append(figure)
    return figures


# --- published ----------------------------------------------------------------------------------------


def published_beside_yours(rows: pd.DataFrame, title: str, fig_id: str, caption: str) -> Chart:
    """Your points (black, each labelled with its deviation from the front) over the published
    Pareto fronts they were compared with: a dashed line per publisher, accelerator and precision."""
    fronts = rows.drop_duplicates(["publisher", "published_accelerator", "published_precision"])
    front: dict[str, list] = {"series": [], "x": [], "y": [], "chip": [], "precision": []}
    for r in records(fronts):
        name = (f"{r['publisher']} {r['published_accelerator']} {r['published_precision']} "
                f"({r['published_frameworks']})")
        for fx, fy in r["front"]:
            front["series"].append(name)
            front["x"] += c.numbers([fx])
            front["y"] += c.numbers([fy])
            front["chip"].append(str(r["published_accelerator"]))
            front["precision"].append(str(r["published_precision"]))
    points = rows.drop_duplicates("file")
    deviation = pd.to_numeric(points["deviation"], errors="coerce")
    mine = {"x": c.numbers(points["interactivity_tokens_per_s"]), "y": c.numbers(points["output_tokens_per_s_per_chip"]),
            "deviation": [f"{d:+.0%}" if math.isfinite(d) else "" for d in deviation],
            "config": [configuration(r, "accelerator") for r in records(points)], "source": c.texts(points["file"])}
    x = {"field": "x", "type": "quantitative", "scale": c.log_scale(),
         "axis": c.axis("interactivity: 1 / median TPOT (tokens/s per user)")}
    y = {"field": "y", "type": "quantitative", "scale": c.log_scale(), "axis": c.axis("output tokens/s per chip")}
    filters = ["chip", "precision"]
    layers = [
        {"data": {"name": c.MAIN}, "transform": c.filter_transform(filters),
         "mark": {"type": "line", "strokeDash": [5, 3], "point": {"shape": "square", "size": 30}, "tooltip": True},
         "params": [c.legend_toggle("series")],
         "encoding": {"x": x, "y": y, "color": {"field": "series", "type": "nominal", "title": None},
                      "opacity": c.toggled(), "tooltip": [c.tip("series", "published front"), c.tip("x", "tokens/s per user",
                                                                                                  ",.4~g"),
                                                          c.tip("y", "tokens/s per chip", ",.4~g")]}},
        {"data": {"name": "yours"}, "mark": {"type": "point", "filled": True, "color": "black", "size": 60,
                                             "tooltip": True},
         "encoding": {"x": x, "y": y, "tooltip": [c.tip("config", "configuration"), c.tip("deviation", "vs the front"),
                                                  c.tip("source", "source")]}},
        {"data": {"name": "yours"}, "mark": {"type": "text", "dx": 8, "dy": -8, "align": "left"},
         "encoding": {"x": x, "y": y, "text": {"field": "deviation"}}},
    ]
    return Chart(fig_id, caption, c.spec(title, filters, {"layer": layers}, height=360), {c.MAIN: front, "yours": mine})


def published_figures(data) -> list[Chart]:
    """Per workload with a published comparison (ReportData.published)."""
    rows = data.published
    if rows is None or rows.empty:
        return []
    out = []
    for n, ((workload, scale), group) in enumerate(rows.groupby(["workload", "scale"], sort=False, dropna=False)):
        if n >= MAX_WORKLOADS:
            break
        tag = workload_label({"workload": workload, "scale": scale})
        caption = f"Yours beside published results, {tag}"
        figure = published_beside_yours(group, caption, f"published-{n}", caption)
        figure.facets = {"workload": tag}
        out.append(figure)
    return out


# --- the answer ---------------------------------------------------------------------------------------

ANSWER_PLANS = 2       # panels: the first two plans (the table has them all)


def answer_tradeoff(sweeps: pd.DataFrame, options: pd.DataFrame, tpot_bound_s: float | None, title: str,
                    fig_id: str, caption: str) -> Chart:
    """One workload's options along their sweeps: blended $/Mtok against output tokens/s per user
    (both log scales), a panel per plan (the first two), a line per option through its loads (the
    legend toggles them), its operating point at the SLO ringed; the TPOT bound drawn as the
    per-user speed the SLO asks for (points left of it miss it)."""
    plans = list(pd.unique(sweeps["plan"]))[:ANSWER_PLANS]
    sweeps = sweeps[sweeps["plan"].isin(plans)]
    keys = ["workload", "plan", "option"]
    facts = options.drop_duplicates(keys).set_index(keys)
    at = pd.MultiIndex.from_frame(sweeps[keys])
    fact = facts.reindex(at)
    sources = sweeps["source"].astype(str).to_numpy()
    table = {"plan": [plan_label(str(p)) for p in sweeps["plan"]], "option": c.texts(sweeps["option"]),
             "series": [f"{o} ({s})" for o, s in zip(sweeps["option"], sources)], "source": c.texts(sources),
             "chip": c.texts(fact["accelerator"]), "precision": c.texts(fact["precision"]),
             "x": c.numbers(sweeps["tokens_per_s_per_user"]), "y": c.numbers(sweeps["usd_per_mtok"]),
             "load": c.numbers(sweeps["load"]), "chosen": c.flags(sweeps["chosen"].astype(bool)),
             "low": c.numbers(fact["usd_per_mtok_low"]), "high": c.numbers(fact["usd_per_mtok_high"]),
             "interval_kind": c.texts(fact["interval"]), "price_as_of": c.texts(fact["price_as_of"]),
             "reference": c.texts(fact["reference"])}
    filters = ["plan", "chip", "precision"]
    x = {"field": "x", "type": "quantitative", "scale": c.log_scale(), "axis": c.axis("output tokens/s per user (1 / TPOT)")}
    y = {"field": "y", "type": "quantitative", "scale": c.log_scale(), "axis": c.axis("blended $ per million tokens")}
    colour = {"field": "series", "type": "nominal", "title": None}
    tips = [c.tip("series", "option"), c.tip("load", "load", ",~g"), c.tip("y", "$/Mtok", "$,.4~g"),
            c.tip("x", "tokens/s per user", ",.4~g"), c.tip("interval", "interval at its operating point"),
            c.tip("reference", "source"), c.tip("price_as_of", "price as of")]
    layers = [
        {"transform": [{"filter": "!datum.chosen"}], "mark": {"type": "line", "point": True, "tooltip": True},
         "params": [c.legend_toggle("series")],
         "encoding": {"x": x, "y": y, "color": colour, "order": {"field": "load"}, "opacity": c.toggled(),
                      "tooltip": tips}},
        {"transform": [{"filter": "datum.chosen"}],
         "mark": {"type": "point", "filled": False, "size": 160, "strokeWidth": 2, "tooltip": True},
         "encoding": {"x": x, "y": y, "color": colour, "opacity": c.toggled(), "tooltip": tips}},
    ]
    if tpot_bound_s:
        layers.append({"mark": {"type": "rule", "strokeDash": [4, 3], "color": "black"},
                       "encoding": {"x": {"datum": 1 / tpot_bound_s, "type": "quantitative"}}})
        layers.append({"mark": {"type": "text", "align": "left", "baseline": "top", "dx": 3, "y": 2, "text": "SLO"},
                       "encoding": {"x": {"datum": 1 / tpot_bound_s, "type": "quantitative"}}})
    interval = ("datum.chosen ? (" + c.interval_expr("low", "high", "$") + ") + ' (' + datum.interval_kind + ')'"
                " : 'at its operating point only'")
    body = {"data": {"name": c.MAIN},
            "transform": c.filter_transform(filters) + [{"calculate": interval, "as": "interval"}],
            "facet": {"column": {"field": "plan", "type": "nominal", "title": None, "sort": [plan_label(p) for p in plans]}},
            "spec": {"width": 360, "height": 300, "layer": layers}, "resolve": {"scale": {"y": "shared"}}}
    return Chart(fig_id, caption, c.spec(title, filters, body), {c.MAIN: table})


def answer_figures(data) -> dict[str, Chart]:
    """The answer's figure of each workload (at most MAX_WORKLOADS) with a sweep to draw, by workload."""
    sweeps = data.answer.sweeps
    if sweeps.empty:
        return {}
    results = data.results
    labels = ({} if "workload" not in results else
              {w: sorted(set(map(workload_label, records(rows[[c for c in ("workload", "scale") if c in rows]]))))
               for w, rows in results.groupby("workload", sort=False)})
    out = {}
    for n, (workload, rows) in enumerate(sweeps.groupby("workload", sort=False)):
        rows = rows[np.isfinite(rows["usd_per_mtok"].astype(float)) & np.isfinite(rows["tokens_per_s_per_user"].astype(float))]
        if rows.empty or n >= MAX_WORKLOADS:
            continue
        slo = data.answer.slos.get(workload)
        caption = (f"{workload}: $/Mtok against tokens/s per user along each option's loads, its operating point "
                   f"at the SLO ringed")
        chart = answer_tradeoff(rows.reset_index(drop=True), data.answer.options, slo.tpot_s if slo else None, caption,
                                f"answer-{n}", caption)
        # The answer weighs the workload at every scale (a smoke test is listed beside the full
        # architecture's options): the figure stays under any of the workload's labels.
        chart.facets = {"workload": [workload_label({"workload": workload, "scale": FULL_SCALE}),
                                     *labels.get(workload, [])]}
        out[workload] = chart
    return out
