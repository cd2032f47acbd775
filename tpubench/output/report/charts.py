"""Figures as data: a Vega-Lite specification and the tables it draws (docs/commands.md#figures).

A `Chart` is what a report figure is: its id and caption, a Vega-Lite spec whose data are named
tables (`{"name": "table"}`), and those tables as columns. The HTML report embeds both and the
browser draws them (report/chart_page.py, Vega, Vega-Lite and vega-embed vendored under
report/vendor/); `--figures` draws the same spec to SVG or PNG (report/chart_images.py). Nothing
here imports a charting library: a spec is a dict.

Every chart can be narrowed by the page's filters (FILTERS: workload, chip, plan, precision): a
table column of that name is filtered on a parameter `f_<name>` ('' for all) that the page sets;
a chart without the column ignores that filter. A chart's series legend toggles them
(`legend_toggle`), and every mark a reader can point at has a tooltip.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"   # a name, never fetched: vega-embed reads its version
# The page's filters, in the order the page shows them; the column a table names each by.
FILTERS = ("workload", "chip", "plan", "precision")
MAIN = "table"            # the name of a chart's main table, the one the filters narrow
WIDTH = 760               # a chart's width where it is drawn without a page (images), in pixels
DIGITS = 5                # significant digits a number keeps in a chart's table (the tooltip shows 3)
PICK = "pick"             # the legend's selection parameter


@dataclass
class Chart:
    """One figure: `spec` draws `tables` (name -> {column: values}); `facets` are the page filters'
    values that hold for the whole figure (its workload, or the several labels one workload goes by),
    which the page hides it by."""

    id: str
    caption: str
    spec: dict
    tables: dict[str, dict[str, list]]
    facets: dict[str, str | list[str]] = field(default_factory=dict)

    def filters(self) -> list[str]:
        """The page filters the chart's main table can be narrowed by."""
        return filters_of(self.tables.get(MAIN, {}))

    def vega_lite(self, width: int | None = None) -> dict:
        """The whole spec with its tables inline as rows (`datasets`): what an image is drawn from.
        `width` replaces a width that follows the page's ("container")."""
        spec = {**self.spec, "datasets": {name: rows(table) for name, table in self.tables.items()}}
        if width is not None:
            spec = _fixed_width(spec, width)
        return spec


def _fixed_width(spec, width: int):
    if isinstance(spec, dict):
        return {k: (width if k == "width" and v == "container" else _fixed_width(v, width)) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_fixed_width(v, width) for v in spec]
    return spec


def rows(table: dict[str, list]) -> list[dict]:
    """A table's columns as rows (dicts), as Vega-Lite reads inline data."""
    names = list(table)
    return [dict(zip(names, values)) for values in zip(*table.values())] if names else []


# --- tables ------------------------------------------------------------------------------------------


def numbers(values, digits: int = DIGITS) -> list:
    """Floats rounded to `digits` significant digits (a chart needs no more, the file is smaller),
    None for a missing or infinite one."""
    series = values if isinstance(values, pd.Series) else pd.Series(list(values), dtype=object)
    array = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return [float(f"{v:.{digits}g}") if math.isfinite(v) else None for v in array.tolist()]


def texts(values) -> list:
    """Text cells as str, None for a missing one."""
    out = []
    for v in (values.tolist() if hasattr(values, "tolist") else list(values)):
        missing = v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA
        out.append(None if missing else str(v))
    return out


def flags(values) -> list:
    return [bool(v) for v in (values.tolist() if hasattr(values, "tolist") else list(values))]


def unique_labels(labels: Sequence[str], *more: Sequence[str]) -> list[str]:
    """`labels` made unique: a label two rows share gets the first of `more` that tells them apart
    (each a sequence of words per row), else its position: a chart's rows never read alike."""
    out = list(labels)
    for extra in [*more, [f"#{i + 1}" for i in range(len(out))]]:
        counts = pd.Series(out).value_counts()
        shared = set(counts[counts > 1].index)
        if not shared:
            break
        out = [f"{label} · {word}" if label in shared and word else label for label, word in zip(out, extra)]
    return out


# --- spec parts -------------------------------------------------------------------------------------


def filter_params(chart_filters: Iterable[str]) -> list[dict]:
    """The page filters' parameters (value '' = every value), declared at the top of a spec."""
    return [{"name": f"f_{name}", "value": ""} for name in chart_filters]


def filter_transform(chart_filters: Iterable[str]) -> list[dict]:
    """A transform keeping the rows every set filter allows (placed on layers reading the main table)."""
    terms = [f"(f_{name} === '' || datum['{name}'] === f_{name})" for name in chart_filters]
    return [{"filter": " && ".join(terms)}] if terms else []


def legend_toggle(series: str) -> dict:
    """A selection of series bound to the legend: clicking an entry shows it alone, shift-click adds."""
    return {"name": PICK, "select": {"type": "point", "fields": [series]}, "bind": "legend"}


def toggled(on: float = 1.0, off: float = 0.08) -> dict:
    """Opacity that fades the series the legend has not picked (all shown while none is)."""
    return {"condition": {"param": PICK, "value": on}, "value": off}


def tip(name: str, title: str, fmt: str | None = None) -> dict:
    out = {"field": name, "title": title}
    if fmt:
        out.update(type="quantitative", format=fmt)
    return out


def interval_expr(low: str, high: str, prefix: str = "", suffix: str = "") -> str:
    """A Vega expression for 'low–high' of two fields, 'none' where either is missing."""
    part = "{prefix}' + format(datum['{f}'], ',.3~g') + '{suffix}"
    lo = part.format(prefix=prefix, f=low, suffix=suffix)
    hi = part.format(prefix=prefix, f=high, suffix=suffix)
    return f"isValid(datum['{low}']) && isValid(datum['{high}']) ? '{lo}–{hi}' : 'none'"


def log_scale() -> dict:
    """A log scale fitted to the data, with a few pixels to spare at each end (no point on an axis)."""
    return {"type": "log", "nice": False, "padding": 8}


def axis(title: str, fmt: str = ",.3~g") -> dict:
    return {"title": title, "format": fmt, "labelFlush": True}


def spec(title: str, chart_filters: Sequence[str], body: dict, width="container", height: int | None = 320) -> dict:
    """A whole spec: title, the page filters' parameters, `body` (layer, mark, concat ...)."""
    out = {"$schema": SCHEMA, "title": {"text": title, "anchor": "start", "fontSize": 13},
           "config": {"legend": {"labelLimit": 320, "orient": "bottom", "columns": 2},
                      "axis": {"labelLimit": 360}, "range": {"category": {"scheme": "tableau20"}}}}
    if "hconcat" not in body and "facet" not in body:
        out["width"] = width
        # The width follows the page's; a height of so many pixels per row stays as it is.
        out["autosize"] = {"type": "fit-x", "contains": "padding"}
        if height is not None:
            out["height"] = height
    params = filter_params(chart_filters) + body.get("params", [])
    out.update(body)
    if params:
        out["params"] = params
    return out


# --- the page's copy ---------------------------------------------------------------------------------


def compact(table: dict[str, list]) -> dict:
    """A table as the page carries it: numbers and flags as they are, text columns as a list of
    their distinct values and one index per row (a few labels repeat over thousands of points),
    and paths that are nearly all distinct (result files) as their folders coded so, each with its
    file name (10,000 points: a third of the page's data was the same folder over and over)."""
    out: dict = {"n": len(next(iter(table.values()), [])), "columns": {}}
    for name, values in table.items():
        if not any(isinstance(v, str) for v in values):
            out["columns"][name] = values
            continue
        distinct: dict = {}
        codes = [distinct.setdefault(v, len(distinct)) if v is not None else -1 for v in values]
        if len(distinct) * 2 > len(values) and all(v is None or "/" in v for v in values):
            parts = [v.rpartition("/") if v is not None else None for v in values]
            folders: dict = {}
            out["columns"][name] = {"folders": None, "names": [p[2] if p else None for p in parts],
                                    "codes": [folders.setdefault(p[0] + p[1], len(folders)) if p else -1
                                              for p in parts]}
            out["columns"][name]["folders"] = list(folders)
        else:
            out["columns"][name] = {"text": list(distinct), "codes": codes}
    return out


def filters_of(table: dict[str, list]) -> list[str]:
    """The page filters a main table (column -> values) can be narrowed by."""
    return [f for f in FILTERS if f in table]


def page_json(chart: Chart, **extra) -> str:
    """The JSON the page draws `chart` from (spec, compact tables, filters, and `extra`), safe inside <script>."""
    payload = {"spec": chart.spec, "tables": {name: compact(t) for name, t in chart.tables.items()},
               "filters": chart.filters(), **extra}
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # No '<' at all: the text of a result can then never close the script element it sits in.
    return text.replace("<", "\\u003c")


__all__ = ["Chart", "FILTERS", "MAIN", "compact", "filter_params", "filters_of", "filter_transform", "flags", "interval_expr",
           "legend_toggle", "log_scale", "numbers", "page_json", "rows", "spec", "texts", "tip", "toggled",
           "unique_labels"]
