"""The report's "Published results (not measured here)" section: every published row the report
knows (the reference rows shipped with tpubench, data/published/, and those imported beside the
results), each labelled with its publisher, date and reference, as cells computed once for the
markdown and HTML renderers, and one figure per model of output tokens/s per chip by accelerator.

These rows are other people's measurements on their stacks: they sit in their own section, apart
from the measured rows, and are never priced here (`tpubench budget --include-published` sizes on
them when asked). Rows arrive in the stored columns (output/published/rows.py) or, from a DataFrame
that load_results(include_published=True) gave, in its columns (`started_at` for the date).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from tpubench.records.columns import records
from tpubench.units import MISSING, number, sig

HEADERS = ["Model", "Family", "Accelerator × chips", "Publisher (submitter)", "Stack", "Precision",
           "In/out tokens", "Load", "Out tok/s/chip", "Interactivity (tok/s/user)", "TTFT p50 (ms)",
           "TPOT p50 (ms)", "Setup", "Date", "Reference"]
NUMERIC = {8, 9, 10, 11}
WRAP = {14}
NOTE = ("Published: operating points measured and published by others (their stack, batch and precision), "
        "shipped with tpubench (data/published/SOURCES.md says where each figure was read) or imported with "
        "`tpubench import`. Output tokens/s per chip = the published system throughput / its chips. They are "
        "not measurements of your workload and are never priced in this report; `tpubench report --no-shipped` "
        "leaves the shipped ones out.")
FIGURE_MODELS = 8      # figures for the model classes with the most rows; the table has them all
FIGURE_BARS = 40       # bars per figure (the fastest configurations)


def family(accelerator) -> str:
    """TPU, NVIDIA GPU, AMD GPU or Trainium, from the canonical accelerator name (for grouping only)."""
    name = str(accelerator or "").lower()
    if name.startswith("tpu"):
        return "TPU"
    if "trainium" in name or "inferentia" in name or name.startswith("trn"):
        return "Trainium"
    if name.startswith("mi") or "instinct" in name:
        return "AMD GPU"
    return "NVIDIA GPU" if name else MISSING


def model_class(model) -> str:
    """What a figure groups by: Llama by size ('Llama 70B' holds Llama 2 70B, 3 70B and 3.3 70B, so
    TPU, GPU and Trainium rows of one size sit in one figure), DeepSeek-R1 by name, else the model."""
    name = str(model or "").split("/")[-1]
    low = name.lower()
    size = re.search(r"(\d+)b\b", low)
    if "llama" in low and size:
        return f"Llama {size.group(1)}B"
    if low.startswith("deepseek-r1"):
        return "DeepSeek-R1"
    return name or MISSING


def _value(row, *names):
    for name in names:
        value = row.get(name)
        if value is not None and not (isinstance(value, float) and math.isnan(value)) and str(value) != "":
            return value
    return None


def _ms(seconds) -> str:
    try:
        x = float(seconds)
    except (TypeError, ValueError):
        return MISSING
    return sig(x * 1e3) if math.isfinite(x) else MISSING


def listing(published: pd.DataFrame) -> pd.DataFrame:
    """The rows in table order (model, family, accelerator, lengths, load) with a `family` column."""
    if published is None or published.empty:
        return pd.DataFrame()
    out = published.copy()
    out["family"] = [family(a) for a in out["accelerator"]]
    load = pd.to_numeric(out["concurrency"], errors="coerce") if "concurrency" in out else math.nan
    keys = out.assign(_load=load)
    return keys.sort_values(["model", "family", "accelerator", "input_length", "output_length", "_load"],
                            kind="stable", na_position="last").drop(columns="_load").reset_index(drop=True)


def _setup(r) -> str:
    parts = []
    spec = _value(r, "spec_decoding")
    if spec and str(spec).lower() not in ("none", "false", "0"):
        parts.append(f"spec: {spec}")
    if str(_value(r, "disaggregated") or "").lower() == "true":
        parts.append("disaggregated")
    if str(_value(r, "multinode") or "").lower() == "true":
        parts.append("multi-node")
    return ", ".join(parts) or "single system"


def cells(r) -> list[str]:
    """One published row as the table shows it."""
    conc = _value(r, "concurrency")
    scenario = _value(r, "scenario")
    load = f"conc {number(conc)}" if conc is not None else str(scenario or MISSING)
    submitter = _value(r, "submitter")
    publisher = str(_value(r, "publisher") or MISSING) + (f" ({submitter})" if submitter else "")
    stack = " ".join(str(v) for v in (_value(r, "framework"), _value(r, "framework_version")) if v) or MISSING
    lengths = "/".join(MISSING if v is None else number(v) for v in (_value(r, "input_length"), _value(r, "output_length")))
    date = _value(r, "date", "started_at")
    return [str(_value(r, "model") or MISSING), family(r.get("accelerator")),
            f"{_value(r, 'accelerator') or MISSING} ×{number(_value(r, 'chips'))}", publisher, stack,
            str(_value(r, "precision") or MISSING), lengths, load,
            sig(_value(r, "output_tokens_per_s_per_chip")), sig(_value(r, "interactivity_tokens_per_s")),
            _ms(_value(r, "ttft_p50_s")), _ms(_value(r, "tpot_p50_s")), _setup(r), str(date or MISSING)[:10],
            str(_value(r, "reference") or MISSING)]


def counts(published: pd.DataFrame) -> str:
    """'TPU 10, NVIDIA GPU 42, ...': rows per family, for the section's first line."""
    if published is None or published.empty:
        return ""
    fam = pd.Series([family(a) for a in published["accelerator"]]).value_counts()
    return ", ".join(f"{name} {n}" for name, n in sorted(fam.items()))


def figures(data) -> list:
    """Per model class (model_class; the FIGURE_MODELS with the most rows) a charts.Chart of one
    horizontal bar per configuration (the fastest row of each chip, stack, precision and lengths,
    at most FIGURE_BARS): output tokens/s per chip, coloured by chip family, labelled with the
    accelerator, model, lengths, load and publisher."""
    rows = listing(getattr(data, "published_list", None))
    if rows.empty:
        return []
    speed = pd.to_numeric(rows["output_tokens_per_s_per_chip"], errors="coerce")
    rows = rows[(speed > 0) & np.isfinite(speed)]   # a bar on a log axis, from a finite speed
    rows = rows.assign(_class=[model_class(m) for m in rows["model"]])
    order = rows["_class"].value_counts().index[:FIGURE_MODELS]
    # A bar per configuration, not per row: the fastest row of each chip, stack, precision and
    # lengths (a publisher's concurrency sweep and its re-runs over months are one bar; the table
    # below lists them all), and at most FIGURE_BARS bars, the fastest, per figure.
    best = rows.sort_values("output_tokens_per_s_per_chip", ascending=False, kind="stable")
    best = best.drop_duplicates(["_class", "accelerator", "framework", "precision", "input_length", "output_length"])
    rows = best.groupby("_class", sort=False).head(FIGURE_BARS)
    # One stable sort with the class first puts each class's rows together, in the order a sort of
    # that class alone gives; then one conversion to records.
    rows = rows.sort_values(["_class", "family", "accelerator", "model"], kind="stable").reset_index(drop=True)
    recs = records(rows)
    at_of = rows.groupby("_class", sort=False).indices
    out = []
    for n, model in enumerate(order):
        caption = (f"Published reference points, {model}: output tokens/s per chip as published "
                   "(not measured here; the fastest row of each chip, stack, precision and lengths; each bar "
                   "names its model, lengths in/out and load)")
        out.append(bars([recs[i] for i in at_of[model]], model, f"published-ref-{n}", caption))
    return out


COLOURS = {"TPU": "#1a73e8", "NVIDIA GPU": "#76b900", "AMD GPU": "#ed1c24", "Trainium": "#ff9900"}


def bars(recs: list[dict], model: str, fig_id: str, caption: str):
    """One model class's chart: a bar per published row (its output tokens/s per chip on a log
    axis, coloured by chip family; the legend toggles families), each labelled and with a tooltip
    naming its configuration, publisher, reference and date."""
    from tpubench.estimate.models import row_precision
    from tpubench.output.report import charts as c

    cells_of = [cells(r) for r in recs]
    # Precision as the answer and the other charts name it ('fp8', 'w fp4 / a fp4 / kv bf16'), so one
    # filter value picks a precision everywhere; the publisher's own word where it says too little.
    precision = [(p.label if p else x[5]) for p, x in zip(map(row_precision, recs), cells_of)]
    labels = [f"{x[2]}  {str(r['model']).split('/')[-1]}  {x[6]}  {x[7]}  ({str(r['publisher']).split(' (')[0]})"
              for x, r in zip(cells_of, recs)]
    table = {"label": c.unique_labels(labels, [x[3] for x in cells_of], [x[13] for x in cells_of]),
             "speed": c.numbers([r["output_tokens_per_s_per_chip"] for r in recs]),
             "family": [str(r["family"]) for r in recs], "chip": [str(_value(r, "accelerator") or MISSING) for r in recs],
             "precision": precision, "config": [f"{x[2]} {x[4]} {x[5]}, {x[6]} in/out, {x[7]}"
                                                               for x in cells_of],
             "publisher": [x[3] for x in cells_of], "source": [x[14] for x in cells_of], "date": [x[13] for x in cells_of]}
    low = 10 ** math.floor(math.log10(min(v for v in table["speed"] if v)))
    families = [f for f in COLOURS if f in set(table["family"])] + sorted(set(table["family"]) - set(COLOURS))
    colour = {"field": "family", "type": "nominal", "title": None,
              "scale": {"domain": families, "range": [COLOURS.get(f, "#888888") for f in families]}}
    tips = [c.tip("config", "configuration"), c.tip("speed", "output tokens/s per chip", ",.4~g"),
            c.tip("publisher", "publisher"), c.tip("source", "source"), c.tip("date", "published")]
    filters = ["chip", "precision"]
    body = {"data": {"name": c.MAIN}, "transform": c.filter_transform(filters),
            "mark": {"type": "bar", "tooltip": True}, "params": [c.legend_toggle("family")],
            "encoding": {"y": {"field": "label", "type": "nominal", "sort": None, "title": None,
                               "axis": {"labelFontSize": 10}},
                         "x": {"field": "speed", "type": "quantitative", "scale": {"type": "log", "domainMin": low},
                               "axis": c.axis("published output tokens/s per chip (log scale)")},
                         "x2": {"datum": low}, "color": colour, "opacity": c.toggled(), "tooltip": tips}}
    title = f"Published (not measured here), {model}: output tokens/s per chip"
    return c.Chart(fig_id, caption, c.spec(title, filters, body, height=None) | {"height": {"step": 18}}, {c.MAIN: table})
