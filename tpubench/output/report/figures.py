"""Figures a budget owner wants (docs/commands.md#reports), drawn with matplotlib's Agg canvas.

matplotlib is imported inside the functions (it is slow to import and only reports need it), and
through `matplotlib.figure.Figure` + the Agg canvas rather than pyplot, so drawing never changes
the backend of a notebook that imported us.
"""

from __future__ import annotations

import io
import math
from typing import Sequence

import numpy as np
import pandas as pd

from tpubench.money.cost import unit_rows
from tpubench.money.token_costs import interactivity_tokens_per_s
from tpubench.output.published.match import pareto_mask
from tpubench.output.report.figure_cache import Drawing
from tpubench.output.report.format import kind_label, load_label, plan_label, platform_label, stack_label, workload_label
from tpubench.records.columns import records
from tpubench.records.usable import usable_mask
from tpubench.scenarios import registry
from tpubench.units import number, share

MAX_BARS = 40
MAX_BOXES = 16
MAX_ISO_LINES = 4
_ISO_COST_STEPS = (1, 2, 5)


def pareto_front(x: Sequence[float], y: Sequence[float]) -> np.ndarray:
    """Mask of points not dominated in both x and y (higher is better in both); the one rule the
    published comparison uses too (output/published/match.pareto_mask)."""
    return pareto_mask(x, y)


def new_figure(width: float, height: float, left: float = 0.1, bottom_in: float = 0.6, top_in: float = 0.45):
    """A figure with fixed margins (inches at top and bottom): constrained layout draws every
    figure twice, which doubled report time for no visible gain here."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    fig.subplots_adjust(left=left, right=0.97, bottom=bottom_in / height, top=1 - top_in / height)
    return fig


# Titles are wrapped and margins sized from the text's estimated width before drawing, since
# measuring it needs a draw (constrained layout or bbox_inches="tight" would draw every figure twice).
# Advances of DejaVu Sans (matplotlib's default font) in ems, rounded up per class of character;
# texts_outside() checks the result against the drawn figure in the tests.
_NARROW = frozenset(" .,:;'|!()[]/-ilIjftr")
_WIDE = frozenset("ABCDEFGHJKLNOPQRSTUVXYZ")
_WIDEST = frozenset("MWmw×%@")
_EM_NARROW, _EM_WIDE, _EM_WIDEST, _EM = 0.4, 0.8, 1.0, 0.64


def _ems(text: str) -> float:
    return sum(_EM_NARROW if c in _NARROW else _EM_WIDE if c in _WIDE else _EM_WIDEST if c in _WIDEST else _EM
               for c in text)


def text_width_in(text: str, fontsize: float) -> float:
    """Estimated width in inches of one line of `text` at `fontsize` points."""
    return _ems(text) * fontsize / 72


def wrap_text(text: str, width_in: float, fontsize: float) -> str:
    """`text` broken at spaces into lines no wider than `width_in` inches (text_width_in)."""
    lines: list[str] = []
    for word in text.split():
        if lines and text_width_in(f"{lines[-1]} {word}", fontsize) <= width_in:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return "\n".join(lines) or text


def fit_label(text: str, width_in: float, fontsize: float) -> str:
    """`text` cut short with '…' where it would be wider than `width_in` inches (a tick label)."""
    width_in += 1e-6       # a margin from label_margin is this width up to rounding
    if text_width_in(text, fontsize) <= width_in:
        return text
    while text and text_width_in(text + "…", fontsize) > width_in:
        text = text[:-1]
    return text.rstrip() + "…"


def label_margin(labels: Sequence[str], fontsize: float, width_in: float, cap: float = 0.55) -> float:
    """The left margin (figure fraction) that holds the longest of `labels` (y tick labels at
    `fontsize`), at most `cap`; fit_label shortens any label still too long for it."""
    longest = max((text_width_in(t, fontsize) for t in labels), default=0.0)
    return min(cap, max(0.08, (longest + 0.3) / width_in))


# A title's height in axes coordinates, given, not left to matplotlib: left to it, every draw
# measures all the y tick labels to see whether an offset text ('1e6') reaches the title, which
# none of these axes have (fixed or function-formatted ticks), and the title stays at 1.0 anyway
# (no tick labels at the top). A third of a bar chart's layout time, for the same picture.
TITLE_Y = 1.0


def set_title(fig, ax, text: str, fontsize: float = 10) -> None:
    """`ax`'s title, centred over the axes where it fits on one line there (twice the distance from
    the axes' centre to the nearer edge of the figure), else centred on the figure and wrapped to
    its width; the top margin grows to hold its lines."""
    width, height = fig.get_size_inches()
    box = ax.get_position()
    centre = (box.x0 + box.x1) / 2
    x = 0.5
    if text_width_in(text, fontsize) > 2 * min(centre, 1 - centre) * width - 0.3:
        x = (0.5 - box.x0) / (box.x1 - box.x0)        # the figure's centre, in axes coordinates
    wrapped = wrap_text(text, width - 0.4, fontsize)
    need_in = 0.25 + (wrapped.count("\n") + 1) * fontsize * 1.25 / 72
    if 1 - box.y1 < need_in / height:
        fig.subplots_adjust(top=1 - need_in / height)
    ax.set_title(wrapped, fontsize=fontsize, x=x, y=TITLE_Y)


def set_suptitle(fig, text: str, fontsize: float = 12) -> None:
    """A figure title across the whole width, wrapped to it, with room made for its lines."""
    width, height = fig.get_size_inches()
    wrapped = wrap_text(text, width - 0.4, fontsize)
    need_in = 0.45 + (wrapped.count("\n") + 1) * fontsize * 1.25 / 72
    if 1 - fig.subplotpars.top < need_in / height:
        fig.subplots_adjust(top=1 - need_in / height)
    fig.suptitle(wrapped, fontsize=fontsize)


def _drawn_tick_labels(axis) -> list:
    """The tick labels matplotlib draws: those of ticks inside the view (an axis keeps others)."""
    low, high = sorted(axis.get_view_interval())
    slack = 1e-9 * (high - low)
    labels = []
    for ticks, locs in ((axis.get_major_ticks(), axis.get_majorticklocs()),
                        (axis.get_minor_ticks(), axis.get_minorticklocs())):
        for tick, loc in zip(ticks, locs):
            if low - slack <= loc <= high + slack:
                labels += [tick.label1, tick.label2]
    return labels


def texts_outside(fig) -> list[str]:
    """The texts of `fig` (titles, axis and tick labels, legends, annotations) that reach outside
    its canvas once drawn: what a reader would see cut off. Lays the figure out as Agg draws it, without
    painting a pixel (a third of the time of a draw, the same boxes); for tests."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = canvas.get_renderer()
    texts = list(fig.texts) + [t for legend in fig.legends for t in legend.get_texts()]
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts,
                  *_drawn_tick_labels(ax.xaxis), *_drawn_tick_labels(ax.yaxis)]
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
    frame = fig.bbox
    outside = []
    for text in texts:
        if not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        if box.x0 < frame.x0 - 0.5 or box.y0 < frame.y0 - 0.5 or box.x1 > frame.x1 + 0.5 or box.y1 > frame.y1 + 0.5:
            outside.append(text.get_text())
    return outside


def log_axis(ax, which: str, subs: Sequence[float] = (1.0, 2.0, 5.0)) -> None:
    """Log scale with ticks at 1-2-5 (or `subs`) and plain labels. The default labels minor ticks
    too: dozens of text layouts per axis, which was the slowest part of drawing a report."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(LogLocator(base=10, subs=tuple(subs)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.6g}"))
    axis.set_minor_locator(NullLocator())


def figure_to_png(fig) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def figure_to_svg(fig) -> bytes:
    """SVG with text left as text: for text-heavy charts it is a third of the PNG's drawing time
    (no glyph rasterising) and stays sharp when zoomed."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    FigureCanvasSVG(fig)
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "tpubench"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def encode_figure(fig, kind: str) -> tuple[str, bytes]:
    """(MIME type, bytes) of a figure as 'png' or 'svg'."""
    if kind == "svg":
        return "image/svg+xml", figure_to_svg(fig)
    return "image/png", figure_to_png(fig)


def encode_drawing(drawing: Drawing, kind: str) -> tuple[str, bytes]:
    """encode_figure of the drawing's figure; one drawn before from equal inputs is neither built
    nor drawn again (report/figure_cache.py)."""
    return encode_drawings([(drawing, kind)])[0]


def _import_matplotlib() -> None:
    """What drawing needs, imported once before workers are forked to draw (they inherit it, its
    font list included) rather than once in each worker."""
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.backends.backend_svg  # noqa: F401
    import matplotlib.figure  # noqa: F401
    from matplotlib import font_manager

    font_manager.findfont("DejaVu Sans")


def encode_drawings(items: list[tuple[Drawing, str]]) -> list[tuple[str, bytes]]:
    """encode_drawing of each (drawing, kind), those not cached drawn side by side on a report's CPUs."""
    from tpubench.output.report.figure_cache import cached_drawings

    return cached_drawings(items, encode_figure, before_workers=_import_matplotlib)


def built(drawings: list[tuple[str, str, Drawing, str]]) -> list[tuple[str, str, object, str]]:
    """(id, caption, Figure, kind) of each (id, caption, Drawing, kind): the figures themselves."""
    return [(fig_id, caption, drawing.figure(), kind) for fig_id, caption, drawing, kind in drawings]


def cost_by_platform(summary: pd.DataFrame, title: str = ""):
    """Horizontal bars: blended $/Mtok per platform (one colour per plan) with 95% CI whiskers."""
    rows = summary.sort_values("blended_usd_per_mtok", ascending=False).tail(MAX_BARS)
    # Name the stack when a platform's bars come from several (offline and a server, say).
    stacks = {(stack_label(r), kind_label(r)) for _, r in rows.iterrows()}
    labels = [f"{platform_label(r)} · {plan_label(r['plan'])}"
              + (f" · {stack_label(r)} ({kind_label(r)})" if len(stacks) > 1 else "") for _, r in rows.iterrows()]
    left = label_margin(labels, 8, 10)
    labels = [fit_label(t, left * 10 - 0.3, 8) for t in labels]
    fig = new_figure(10, max(2.5, 0.3 * len(rows) + 1.2), left=left)
    ax = fig.add_subplot()
    plans = list(pd.unique(rows["plan"]))
    colours = {plan: f"C{i}" for i, plan in enumerate(plans)}
    y = np.arange(len(rows))
    value = rows["blended_usd_per_mtok"].to_numpy(float)
    low = np.nan_to_num(value - rows["blended_usd_per_mtok_ci95_low"].to_numpy(float), nan=0.0)
    high = np.nan_to_num(rows["blended_usd_per_mtok_ci95_high"].to_numpy(float) - value, nan=0.0)
    invalid = ~usable_mask(rows).to_numpy()
    ax.barh(y, value, xerr=np.vstack([low, high]), color=[colours[p] for p in rows["plan"]],
            capsize=3, ecolor="black")
    for yi in y[invalid]:
        ax.text(value[yi], yi, "  invalid run", va="center", fontsize=8, color="crimson")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("blended $ per million tokens (time-attributed), 95% CI")
    set_title(fig, ax, title or "Cost per million tokens by platform")
    from matplotlib.patches import Patch

    handles = [Patch(color=colours[p], label=plan_label(p)) for p in plans]
    # Bars run dearest (bottom) to cheapest (top): the upper right corner stays clear of whiskers.
    ax.legend(handles=handles, fontsize=8, loc="upper right")
    finite = (value + high)[np.isfinite(value + high)]
    if finite.size:
        ax.set_xlim(0, finite.max() * 1.3)
    ax.grid(axis="x", alpha=0.3)
    return fig


def _nearest_nice(value: float) -> float:
    """The 1-2-5 number nearest `value` on a log scale (value > 0)."""
    exp = math.floor(math.log10(value))
    candidates = [step * 10.0 ** e for e in (exp - 1, exp, exp + 1) for step in _ISO_COST_STEPS]
    return min(candidates, key=lambda c: abs(math.log(c / value)))


def throughput_vs_interactivity(points: pd.DataFrame, chip_prices: dict[str, float] | None = None,
                                price_label: str = "on-demand", price_names: dict[str, str] | None = None):
    """Output tokens/s per chip against interactivity (tokens/s per user: 1 / median TPOT; a
    server's own `interactivity_tokens_per_s` where it has one, see cost.cost_figures), one
    colour per `label` (e.g. 'torch on H100 (offline)', 'vllm 0.11 on H100 (serve)').

    Points on the Pareto front (not beaten in both) are ringed and joined. Dashed lines are
    iso-cost lines: at a chip-hour price p the InferenceX cost is p*1e6/(3600*y) $/Mtok, the same
    all along a horizontal line, so each accelerator's lines sit at its own price. `chip_prices`
    maps a label to its chip-hour price; `price_names` to the accelerator its line is for (default:
    the label up to ' ('): labels of one accelerator and price (two stacks on it) share one line.
    """
    fig = new_figure(10, 5.5, left=0.08)
    ax = fig.add_subplot()
    x = points["interactivity_tokens_per_s_per_user"].to_numpy(float)
    y = points["output_tokens_per_s_per_chip"].to_numpy(float)
    labels = points["label"].astype(str).to_numpy(dtype=object)
    groups = list(pd.unique(labels))
    colours = {g: f"C{i % 10}" for i, g in enumerate(groups)}
    for g in groups:
        m = labels == g
        ax.scatter(x[m], y[m], s=22, color=colours[g], label=g, alpha=0.8, zorder=3)
    front = pareto_front(x, y)
    if front.any():
        order = np.argsort(x[front])
        ax.plot(x[front][order], y[front][order], color="black", lw=1, zorder=4, label="Pareto front")
        ax.scatter(x[front], y[front], s=70, facecolors="none", edgecolors="black", zorder=5)
    finite = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if finite.any():
        log_axis(ax, "x")
        log_axis(ax, "y")
        ylo, yhi = y[finite].min() / 1.5, y[finite].max() * 1.5
        ax.set_ylim(ylo, yhi)
        xlo, xhi = x[finite].min() / 1.3, x[finite].max() * 1.3
        ax.set_xlim(xlo, xhi)
        # One iso-cost line per accelerator and price (at most MAX_ISO_LINES, those with the
        # fastest points first), at the 1-2-5 cost nearest its median point, so the lines stay
        # readable; the stacks that ran on it share the line.
        lines: dict[tuple[str, float], np.ndarray] = {}
        for g in groups:
            if g in (chip_prices or {}):
                key = ((price_names or {}).get(g) or g.split(" (")[0], chip_prices[g])
                lines[key] = lines.get(key, np.zeros(labels.size, dtype=bool)) | ((labels == g) & finite)
        fastest = sorted(((np.max(y[m]), key) for key, m in lines.items() if m.any()), reverse=True)
        for n, (_, (name, price)) in enumerate(fastest[:MAX_ISO_LINES]):
            median_y = float(np.median(y[lines[(name, price)]]))
            if not (price > 0 and median_y > 0):
                continue
            colour = colours[next(g for g in groups if lines[(name, price)][labels == g].any())]
            level = _nearest_nice(price * 1e6 / (3600 * median_y))
            yy = price * 1e6 / (3600 * level)
            ax.axhline(yy, color=colour, ls="--", lw=0.9, alpha=0.8, zorder=1)
            at_right = n % 2 == 1
            ax.text(xhi if at_right else xlo, yy, f" ${level:g}/Mtok on {name} ",
                    color=colour, fontsize=7, va="bottom", ha="right" if at_right else "left")
    ax.set_xlabel("interactivity: 1 / median TPOT (tokens/s per user)")
    ax.set_ylabel("output tokens/s per chip")
    # Say which price the iso-cost lines use: InferenceX's own tables use TCO tiers, not list prices.
    set_title(fig, ax, f"Throughput per chip vs interactivity; dashed: InferenceX-style iso-cost at the cheapest "
                       f"{price_label} chip-hour price in the price table (list unless --prices / --discount)", 9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="best")
    return fig


def published_beside_yours(rows: pd.DataFrame, title: str):
    """Your points over the published Pareto fronts they were compared with (report/published.py):
    one dashed line per publisher, accelerator and precision, your points ringed, each labelled
    with its deviation from the front."""
    fig = new_figure(10, 5.0, left=0.08)
    ax = fig.add_subplot()
    fronts = rows.drop_duplicates(["publisher", "published_accelerator", "published_precision"])
    for i, (_, r) in enumerate(fronts.iterrows()):
        fx, fy = zip(*r["front"])
        ax.plot(fx, fy, ls="--", marker="s", ms=4, lw=1, color=f"C{i % 10}",
                label=f"{r['publisher']} {r['published_accelerator']} {r['published_precision']} "
                      f"({r['published_frameworks']})")
    points = rows.drop_duplicates("file")
    x = points["interactivity_tokens_per_s"].to_numpy(float)
    y = points["output_tokens_per_s_per_chip"].to_numpy(float)
    ax.scatter(x, y, s=60, color="black", zorder=5, label="yours")
    for _, r in rows.iterrows():
        if math.isfinite(r["deviation"]):
            ax.annotate(f"{r['deviation']:+.0%}", (r["interactivity_tokens_per_s"], r["output_tokens_per_s_per_chip"]),
                        textcoords="offset points", xytext=(6, 6), fontsize=8)
    log_axis(ax, "x")
    log_axis(ax, "y")
    ax.set_xlabel("interactivity: 1 / median TPOT (tokens/s per user)")
    ax.set_ylabel("output tokens/s per chip")
    set_title(fig, ax, title, 9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="best")
    return fig


def published_drawings(data) -> list[tuple[str, str, Drawing, str]]:
    """(id, caption, Drawing, kind) per workload with a published comparison (ReportData.published),
    not drawn yet (figure_cache.Drawing)."""
    rows = data.published
    if rows is None or rows.empty:
        return []
    out = []
    for n, ((workload, scale), group) in enumerate(rows.groupby(["workload", "scale"], sort=False, dropna=False)):
        if n >= MAX_WORKLOADS:
            break
        tag = workload_label({"workload": workload, "scale": scale})
        caption = f"Yours beside published results, {tag}"
        out.append((f"published-{n}", caption, Drawing(published_beside_yours, (group, caption)), "svg"))
    return out


def _ms(row, column: str) -> float:
    value = row.get(column, math.nan)
    return float(value) * 1e3 if value is not None else math.nan


def latency_distributions(rows: pd.DataFrame):
    """Per run, TTFT and TPOT as boxes from summary percentiles: box p50–p90, whiskers min–p99,
    a dot at the max (the result files' summaries, so no raw samples are needed)."""
    rows = rows.head(MAX_BOXES)
    left = label_margin(rows["label"].astype(str), 8, 10, cap=0.45)
    labels = [fit_label(t, left * 10 - 0.3, 8) for t in rows["label"].astype(str)]
    fig = new_figure(10, max(3.0, 0.35 * len(rows) + 1.4), left=left, top_in=0.6)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, metric, title in ((axes[0], "ttft", "TTFT (ms)"), (axes[1], "tpot", "TPOT (ms)")):
        stats = []
        for (_, r), label in zip(rows.iterrows(), labels):
            p50, p90, p99, lo, hi = (_ms(r, f"{metric}_{k}_s") for k in ("p50", "p90", "p99", "min", "max"))
            stats.append({"label": label, "med": p50, "q1": p50, "q3": p90,
                          "whislo": lo if math.isfinite(lo) else p50, "whishi": p99 if math.isfinite(p99) else p90,
                          "fliers": [hi] if math.isfinite(hi) else []})
        if stats:
            ax.bxp(stats, orientation="horizontal", showfliers=True, widths=0.6)
        ax.set_xlabel(title)
        values = [v for st in stats for v in (st["whislo"], st["whishi"], *st["fliers"]) if v > 0]
        if values and max(values) / min(values) > 20:
            log_axis(ax, "x")
        ax.grid(axis="x", alpha=0.3, which="both")
    axes[0].tick_params(axis="y", labelsize=8)
    set_suptitle(fig, "Latency per run: box p50–p90, whiskers min–p99, dot = max")
    return fig


MAX_WORKLOADS = 4


def _canonical_accelerators(results: pd.DataFrame, known: Sequence[str]) -> pd.Series:
    from tpubench.money.accelerator_map import map_accelerators

    canonical = map_accelerators(results["accelerator"], results["device"], known)
    return canonical.where(canonical.notna(), results["accelerator"].astype(str))


def point_group_label(row, accelerator: str) -> str:
    """The Pareto figure's series: 'vllm 0.11.0 on H100 (serve)', 'torch on H100 (offline)'."""
    return f"{stack_label(row)} on {accelerator} ({kind_label(row)})"


def _same(frame: pd.DataFrame, column: str, value) -> pd.Series:
    """frame[column] == value, where a missing value (a result without a scale) matches missing."""
    if pd.isna(value):
        return frame[column].isna()
    return frame[column] == value


def report_figures(data, unit=None) -> list[tuple[str, str, object, str]]:
    """(id, caption, Figure, 'svg' | 'png') for a ReportData: per workload, cost by platform,
    throughput vs interactivity and latency distributions. Charts of text and bars are SVG; the
    scatter, which may hold thousands of points, is PNG. Every scenario kind is drawn alike from its
    columns: a server's points sit beside the offline runs, labelled with their serving stack."""
    return built(report_drawings(data, unit))


# What throughput_vs_interactivity reads of its points: the drawing (and its cache key) holds no more.
_PARETO_COLUMNS = ["interactivity_tokens_per_s_per_user", "output_tokens_per_s_per_chip", "label"]
# What report_drawings reads of the results, and the columns it makes of them.
_INPUT_COLUMNS = ["workload", "scale", "accelerator", "device", "chips", "server_name", "server_version",
                  "backend", "scenario_kind", "output_tokens_per_s", "tpot_p50_s", "interactivity_tokens_per_s"]
_MADE_COLUMNS = ["canonical", "label", "output_tokens_per_s_per_chip", "interactivity_tokens_per_s_per_user"]


def report_drawings(data, unit=None) -> list[tuple[str, str, Drawing, str]]:
    """report_figures, not drawn yet (figure_cache.Drawing): what the HTML report encodes."""
    results = data.results
    if results.empty or "status" not in results:
        return []
    # The rows of the token unit (the first registered one, report/tokens.py draws these) only:
    # other units (training, images) have their own sections, and no TTFT, TPOT or output tokens.
    measured = unit_rows(results, unit or registry.units()[0]) & (results["status"] == "ok")
    use = measured & usable_mask(results)
    if not use.any():
        use = measured
    if not use.any():
        return []
    # The columns the inputs are made of, not a copy of every column of 10,000 results.
    ok = results.loc[use, [c for c in _INPUT_COLUMNS if c in results]]
    prices = data.priced_rows.used_prices()        # the price rows used, each once
    known = list(prices["priced_accelerator"].dropna().unique()) if len(prices) else []
    ok["canonical"] = _canonical_accelerators(ok, known)
    # The label reads four columns: records of those, not iterrows over every column (10,000 results: 1 s).
    label_columns = [c for c in ("server_name", "server_version", "backend", "scenario_kind") if c in ok]
    # Thousands of points share a few labels: each distinct one is made once, from the first row
    # of its group (groups numbered in order of first appearance, as drop_duplicates keeps them).
    keyed = ok[label_columns].assign(_canonical=ok["canonical"])
    group_of = keyed.groupby(list(keyed.columns), sort=False, dropna=False).ngroup().to_numpy()
    first = keyed.drop_duplicates()
    names = [point_group_label(r, c) for r, c in zip(records(first[label_columns]),
                                                      first["_canonical"].to_numpy(dtype=object))]
    ok["label"] = np.array(names, dtype=object)[group_of].tolist()
    chips = pd.to_numeric(ok["chips"], errors="coerce")
    ok["output_tokens_per_s_per_chip"] = pd.to_numeric(ok.get("output_tokens_per_s"), errors="coerce") / chips
    ok["interactivity_tokens_per_s_per_user"] = interactivity_tokens_per_s(ok)

    chip_prices: dict[str, float] = {}
    label_pairs = list(zip(ok["label"].to_numpy(dtype=object), ok["canonical"].to_numpy(dtype=object)))
    price_names = dict(label_pairs)
    primary = data.primary_plan
    if len(prices) and primary:
        priced = prices.loc[prices["plan"] == primary, ["priced_accelerator", "usd_per_chip_hour"]]
        cheapest_of = priced.groupby("priced_accelerator")["usd_per_chip_hour"].min().to_dict()
        for label, canonical in dict.fromkeys(label_pairs):
            if canonical in cheapest_of and not data.what_if_instance:
                chip_prices[label] = float(cheapest_of[canonical])

    figures = []
    pairs = list(ok[["workload", "scale"]].drop_duplicates().itertuples(index=False, name=None))[:MAX_WORKLOADS]
    for n, (workload, scale) in enumerate(pairs):
        tag = workload_label({"workload": workload, "scale": scale})
        summary = data.summary
        if len(summary):
            summary = summary[_same(summary, "workload", workload) & _same(summary, "scale", scale)]
            if len(summary):
                figures.append((f"cost-{n}", f"Blended $/Mtok by platform and plan, {tag}",
                                Drawing(cost_by_platform, (summary, f"Cost per million tokens, {tag}")), "svg"))
        points = ok[_same(ok, "workload", workload) & _same(ok, "scale", scale)]
        figures.append((f"pareto-{n}", f"Throughput per chip vs interactivity, {tag}",
                        Drawing(throughput_vs_interactivity, (points[_PARETO_COLUMNS], chip_prices,
                                                              plan_label(primary or "on_demand"), price_names)),
                        "png"))
        if len(summary):
            rows = (summary.assign(_other=summary["plan"] != primary)
                    .sort_values(["_other", "blended_usd_per_mtok"], kind="stable").drop_duplicates("file")
                    .head(MAX_BOXES))      # what latency_distributions draws: only these need a label
            rows = rows.assign(label=[f"{stack_label(r)} on {r['priced_accelerator']} ×{number(r['chips'])} "
                                      f"{load_label(r)}" for _, r in rows.iterrows()])
        else:
            top = points.sort_values("output_tokens_per_s_per_chip", ascending=False).head(MAX_BOXES)
            rows = results.loc[top.index].assign(**{c: top[c] for c in _MADE_COLUMNS})   # whole rows
            rows = rows.assign(label=[f"{r['label']} ×{number(r['chips'])} {load_label(r)}"
                                      for _, r in rows.iterrows()])
        figures.append((f"latency-{n}", f"Latency distributions, {tag}",
                        Drawing(latency_distributions, (rows,)), "svg"))
    return figures + moe_drawings(data) + profile_drawings(data)


def expert_load_heatmap(load: Sequence[Sequence[float]], title: str = ""):
    """Per-layer heat map of expert load (models/routing.py expert_load): one row per MoE layer,
    one column per expert, colour = the expert's share of its layer's load over the mean share
    (1 = balanced), so layers and runs of any length read on one scale."""
    counts = np.asarray(load, dtype=float)
    mean = counts.mean(axis=1, keepdims=True)
    ratio = np.divide(counts, mean, out=np.zeros_like(counts), where=mean > 0)
    layers, experts = ratio.shape
    fig = new_figure(min(12.0, 3 + experts * 0.08), min(9.0, 1.8 + layers * 0.18), left=0.1)
    ax = fig.add_subplot()
    image = ax.imshow(ratio, aspect="auto", cmap="magma", vmin=0, vmax=max(2.0, float(ratio.max())),
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, label="load / mean load")
    ax.set_xlabel("expert")
    ax.set_ylabel("MoE layer")
    set_title(fig, ax, title, 9)
    return fig


def moe_figures(data) -> list[tuple[str, str, object, str]]:
    """(id, caption, Figure, 'png') of the expert-load heat map of each MoE result that recorded one
    (at most MAX_BOXES: one per point, labelled with its routing and shape)."""
    return built(moe_drawings(data))


def moe_drawings(data) -> list[tuple[str, str, Drawing, str]]:
    """moe_figures, not drawn yet (figure_cache.Drawing)."""
    results = data.results
    if results.empty or "expert_load_json" not in results:
        return []
    import json

    rows = results[results["expert_load_json"].notna() & (results["status"] == "ok")].head(MAX_BOXES)
    figures = []
    for n, (_, row) in enumerate(rows.iterrows()):
        routing = row.get("routing") if isinstance(row.get("routing"), str) else "natural"
        imbalance = row.get("expert_load_imbalance")
        tag = (f"{workload_label(row)} {row['backend']}:{row['device']} b{number(row['batch_size'])} "
               f"routing {routing}" + (f", max/mean {imbalance:.2f}" if isinstance(imbalance, float)
                                       and math.isfinite(imbalance) else ""))
        figures.append((f"expert-load-{n}", f"Expert load per layer, {tag}",
                        Drawing(expert_load_heatmap, (json.loads(row["expert_load_json"]), tag)), "png"))
    return figures


def profile_breakdown(labels: Sequence[str], profiles: Sequence[dict], title: str = ""):
    """One horizontal stacked bar per profiled point (run --profile, measure/profile.py): the
    milliseconds of its profiled pass by category, in report/profile.py's order and names."""
    from tpubench.output.report.profile import LABELS

    fig = new_figure(10.0, 1.9 + 0.35 * len(labels), left=0.3, bottom_in=1.25)
    ax = fig.add_subplot()
    y = np.arange(len(labels))
    left = np.zeros(len(labels))
    colours = ["#b2182b", "#ef8a62", "#fddbc7", "#67a9cf", "#2166ac", "#a6dba0", "#762a83", "#bababa", "#f7f7f7"]
    for colour, (category, label) in zip(colours, LABELS.items()):
        widths = np.array([(p.get("categories") or {}).get(category, 0.0) * 1e3 for p in profiles])
        ax.barh(y, widths, left=left, color=colour, edgecolor="#555555", linewidth=0.4, label=label)
        left += widths
    ax.set_yticks(y, [fit_label(str(x), 0.3 * 10 - 0.3, 8) for x in labels], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms in the profiled pass (one iteration)")
    set_title(fig, ax, title, 9)
    fig.legend(loc="lower center", ncol=5, fontsize=7, frameon=False)
    return fig


def profile_figures(data) -> list[tuple[str, str, object, str]]:
    """(id, caption, Figure, 'svg') of the stacked bars of the profiled points, if any."""
    return built(profile_drawings(data))


def profile_drawings(data) -> list[tuple[str, str, Drawing, str]]:
    """profile_figures, not drawn yet (figure_cache.Drawing)."""
    from tpubench.output.report.profile import profiled

    rows = profiled(data.results)
    if rows.empty:
        return []
    caption = "Where the time goes: the profiled pass of each point by category (run --profile)"
    labels = [f"{r['profile_label']} {r['backend']}:{r['device']}" for _, r in rows.iterrows()]
    return [("profile", caption, Drawing(profile_breakdown, (labels, list(rows["profile"]), caption)), "svg")]


def training_cost_vs_throughput(rows: pd.DataFrame, title: str = ""):
    """Training tokens/s per chip (x) against $ per million training tokens (y), one point per
    platform and plan with 95% CI whiskers on both, one colour per platform and one marker per plan,
    MFU written beside each point. On one price the points of a platform lie on y = p*1e6/(3600*x):
    faster per chip is cheaper, and a dearer chip must be that much faster to match."""
    rows = rows.head(MAX_BARS)
    fig = new_figure(10, 5.5, left=0.08)
    ax = fig.add_subplot()
    x = rows["train_tokens_per_s_per_chip"].to_numpy(float)
    y = rows["train_usd_per_mtok"].to_numpy(float)
    platforms = [platform_label(r) for _, r in rows.iterrows()]
    colours = {p: f"C{i % 10}" for i, p in enumerate(dict.fromkeys(platforms))}
    markers = {plan: m for plan, m in zip(pd.unique(rows["plan"]), "osD^v<>PX*")}
    x_err = np.vstack([np.nan_to_num(x - rows["train_tokens_per_s_per_chip_ci95_low"].to_numpy(float), nan=0.0),
                       np.nan_to_num(rows["train_tokens_per_s_per_chip_ci95_high"].to_numpy(float) - x, nan=0.0)])
    y_err = np.vstack([np.nan_to_num(y - rows["train_usd_per_mtok_ci95_low"].to_numpy(float), nan=0.0),
                       np.nan_to_num(rows["train_usd_per_mtok_ci95_high"].to_numpy(float) - y, nan=0.0)])
    labelled: set[str] = set()
    for i, (_, r) in enumerate(rows.iterrows()):
        if not (math.isfinite(x[i]) and math.isfinite(y[i])):
            continue
        name = f"{platforms[i]} · {plan_label(r['plan'])}"
        ax.errorbar(x[i], y[i], xerr=np.clip(x_err[:, i:i + 1], 0, None), yerr=np.clip(y_err[:, i:i + 1], 0, None),
                    fmt=markers.get(r["plan"], "o"), color=colours[platforms[i]], capsize=3, ms=6,
                    label=name if name not in labelled else None, zorder=3)
        labelled.add(name)
        mfu = r.get("mfu")
        if mfu is not None and math.isfinite(float(mfu)):
            ax.annotate(f"MFU {share(mfu)}", (x[i], y[i]), xytext=(5, 4), textcoords="offset points",
                        fontsize=7, color=colours[platforms[i]])
    finite = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if finite.any():
        log_axis(ax, "x")
        log_axis(ax, "y")
        ax.set_xlim(x[finite].min() / 1.5, x[finite].max() * 1.5)
        ax.set_ylim(y[finite].min() / 1.5, y[finite].max() * 1.5)
    ax.set_xlabel("training tokens/s per chip, 95% CI")
    ax.set_ylabel("$ per million training tokens, 95% CI")
    set_title(fig, ax, title or "Training: throughput per chip vs cost per million training tokens")
    ax.grid(alpha=0.3, which="both")
    if labelled:
        ax.legend(fontsize=7, loc="best")
    return fig


def training_drawings(training: pd.DataFrame) -> list[tuple[str, str, Drawing, str]]:
    """(id, caption, Drawing, 'svg') per workload of a training summary (report/training.py), not
    drawn yet (figure_cache.Drawing)."""
    if training is None or training.empty:
        return []
    figures = []
    pairs = list(training[["workload", "scale"]].drop_duplicates().itertuples(index=False, name=None))
    for n, (workload, scale) in enumerate(pairs[:MAX_WORKLOADS]):
        tag = workload_label({"workload": workload, "scale": scale})
        rows = training[_same(training, "workload", workload) & _same(training, "scale", scale)]
        figures.append((f"train-{n}", f"Training tokens/s per chip vs $ per million training tokens, {tag}",
                        Drawing(training_cost_vs_throughput, (rows, f"Training: throughput per chip vs cost, {tag}")),
                        "svg"))
    return figures


def answer_tradeoff(sweeps: pd.DataFrame, tpot_bound_s: float | None, title: str):
    """One workload's options along their sweeps: blended $/Mtok against output tokens/s per user
    (both log scales), one panel per plan (the first two), a line per option through its loads,
    its operating point at the SLO ringed; the TPOT bound drawn as the per-user speed the SLO asks
    for (points left of it miss it)."""
    plans = list(pd.unique(sweeps["plan"]))[:2]
    fig = new_figure(10 if len(plans) > 1 else 6.5, 4.2, top_in=0.6)
    axes = fig.subplots(1, len(plans), squeeze=False, sharey=True)[0]
    for ax, plan in zip(axes, plans):
        mine = sweeps[sweeps["plan"] == plan]
        for n, (option, rows) in enumerate(mine.groupby("option", sort=False)):
            line = rows[~rows["chosen"].astype(bool)].sort_values("load")
            colour = f"C{n % 10}"
            ax.plot(line["tokens_per_s_per_user"], line["usd_per_mtok"], marker=".", color=colour, linewidth=1,
                    label=f"{option} ({line['source'].iloc[0] if len(line) else ''})")
            chosen = rows[rows["chosen"].astype(bool)]
            ax.scatter(chosen["tokens_per_s_per_user"], chosen["usd_per_mtok"], s=90, facecolors="none",
                       edgecolors=colour, linewidths=1.5, zorder=3)
        if tpot_bound_s:
            ax.axvline(1 / tpot_bound_s, color="black", linestyle="--", linewidth=0.8)
            ax.text(1 / tpot_bound_s, 1.0, " SLO", transform=ax.get_xaxis_transform(), fontsize=8, va="top")
        log_axis(ax, "x")
        log_axis(ax, "y")
        ax.set_title(plan_label(plan), fontsize=9, loc="left", y=TITLE_Y)
        ax.set_xlabel("output tokens/s per user (1 / TPOT)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("blended $ per million tokens")
    axes[-1].legend(fontsize=7, loc="upper right", frameon=False)
    set_suptitle(fig, title, fontsize=11)
    return fig


def answer_drawings(data) -> list[tuple[str, str, Drawing, str]]:
    """(id, caption, Drawing, kind) per workload of the answer with a sweep to draw."""
    sweeps = data.answer.sweeps
    if sweeps.empty:
        return []
    out = []
    for n, (workload, rows) in enumerate(sweeps.groupby("workload", sort=False)):
        rows = rows[np.isfinite(rows["usd_per_mtok"].astype(float)) & np.isfinite(rows["tokens_per_s_per_user"].astype(float))]
        if rows.empty or n >= MAX_WORKLOADS:
            continue
        slo = data.answer.slos.get(workload)
        caption = (f"{workload}: $/Mtok against tokens/s per user along each option's loads, its operating point "
                   f"at the SLO ringed")
        out.append((f"answer-{n}", caption,
                    Drawing(answer_tradeoff, (rows.reset_index(drop=True), slo.tpot_s if slo else None, caption)), "svg"))
    return out


