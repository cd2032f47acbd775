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


def figures(data) -> list[tuple[str, str, object, str]]:
    """(id, caption, Figure, kind): per model class (model_class; the FIGURE_MODELS with the most
    rows), one horizontal bar per configuration (the fastest row of each chip, stack, precision and
    lengths, at most FIGURE_BARS): output tokens/s per chip, coloured by chip family, labelled with
    the accelerator, model, lengths, load and publisher."""
    from tpubench.output.report.figures import built

    return built(drawings(data))


def drawings(data) -> list:
    """figures, not drawn yet: (id, caption, figure_cache.Drawing, kind)."""
    from tpubench.output.report.figure_cache import Drawing

    rows = listing(getattr(data, "published_list", None))
    if rows.empty:
        return []
    rows = rows[pd.to_numeric(rows["output_tokens_per_s_per_chip"], errors="coerce") > 0]
    rows = rows.assign(_class=[model_class(m) for m in rows["model"]])
    order = rows["_class"].value_counts().index[:FIGURE_MODELS]
    # A bar per configuration, not per row: the fastest row of each chip, stack, precision and
    # lengths (a publisher's concurrency sweep and its re-runs over months are one bar; the table
    # below lists them all), and at most FIGURE_BARS bars, the fastest, per figure.
    best = rows.sort_values("output_tokens_per_s_per_chip", ascending=False, kind="stable")
    best = best.drop_duplicates(["_class", "accelerator", "framework", "precision", "input_length", "output_length"])
    rows = best.groupby("_class", sort=False).head(FIGURE_BARS)
    # One stable sort with the class first puts each class's rows together, in the order a sort of
    # that class alone gives; then one conversion to records (a few pandas calls per figure cost
    # more than the rows themselves).
    rows = rows.sort_values(["_class", "family", "accelerator", "model"], kind="stable").reset_index(drop=True)
    recs = records(rows)
    at_of = rows.groupby("_class", sort=False).indices
    out = []
    for n, model in enumerate(order):
        at = at_of[model]
        labels = [f"{c[2]}  {str(r['model']).split('/')[-1]}  {c[6]}  {c[7]}  ({str(r['publisher']).split(' (')[0]})"
                  for c, r in ((cells(recs[i]), recs[i]) for i in at)]
        caption = (f"Published reference points, {model}: output tokens/s per chip as published "
                   "(not measured here; the fastest row of each chip, stack, precision and lengths; each bar "
                   "names its model, lengths in/out and load)")
        speed_and_family = rows.loc[at, ["output_tokens_per_s_per_chip", "family"]].reset_index(drop=True)
        out.append((f"published-ref-{n}", caption, Drawing(bars, (speed_and_family, labels, model)), "svg"))
    return out


def bars(group: pd.DataFrame, labels: list[str], model: str):
    """One model class's figure: a bar per row of `group` (its output tokens/s per chip and chip
    family), labelled `labels`."""
    from matplotlib.patches import Patch

    from tpubench.output.report.figures import fit_label, label_margin, log_axis, new_figure, set_title

    colours = {"TPU": "#1a73e8", "NVIDIA GPU": "#76b900", "AMD GPU": "#ed1c24", "Trainium": "#ff9900"}
    left = label_margin(labels, 7, 11, cap=0.5)
    labels = [fit_label(t, left * 11 - 0.3, 7) for t in labels]
    fig = new_figure(11, max(2.2, 1.3 + 0.22 * len(group)), left=left)     # room for the legend
    ax = fig.add_subplot()
    y = range(len(group))
    speed = group["output_tokens_per_s_per_chip"].astype(float)
    # Bars start at the decade below the slowest row (a log axis has no zero); over more than
    # three decades 1-2-5 ticks would crowd, so decades alone.
    low, high = 10 ** math.floor(math.log10(speed.min())), speed.max() * 1.6
    ax.barh(list(y), speed - low, left=low, color=[colours.get(f, "#888888") for f in group["family"]])
    ax.set_yticks(list(y), labels, fontsize=7)
    ax.set_ylim(len(group) - 0.5, -0.5)          # first row on top, no empty band
    log_axis(ax, "x", (1.0, 2.0, 5.0) if high / low <= 1e3 else (1.0,))
    ax.set_xlim(low, high)
    ax.set_xlabel("published output tokens/s per chip (log scale)")
    ax.legend(handles=[Patch(color=colour, label=fam) for fam, colour in colours.items()
                       if (group["family"] == fam).any()], fontsize=7, loc="lower right")
    ax.grid(alpha=0.3, axis="x", which="both")
    set_title(fig, ax, f"Published (not measured here), {model}: output tokens/s per chip", 9)
    return fig
