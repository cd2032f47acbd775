"""The HTML report's figures, drawn by the browser: each `charts.Chart` as a <figure> holding its
spec and tables as JSON, the page's filters (workload, chip, plan, precision) above them, and the
scripts that draw them, all inline: Vega, Vega-Lite and vega-embed as vendored (report/vendor/, with
their licences; no CDN, nothing fetched), then ours (SCRIPT), which rebuilds each chart's rows from
its compact tables (charts.compact), embeds it, and applies the filters.

`window.tpubenchCharts` maps a figure's id to its Vega view and the filters it takes: what the
browser test drives.
"""

from __future__ import annotations

import functools
import json
import re
from html import escape as _escape
from importlib import resources

from tpubench.output.report.charts import FILTERS, MAIN, Chart, page_json

# In the order a page loads them: vega-lite needs vega, vega-embed both.
VENDORED = ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js")
# A chart with more rows than this is drawn on a canvas (thousands of SVG nodes slow a page down).
CANVAS_ROWS = 2000

SCRIPT = r"""(function () {
  "use strict";
  var charts = {};
  window.tpubenchCharts = charts;
  function inflate(t) {
    var rows = [], i;
    for (i = 0; i < t.n; i++) rows.push({});
    Object.keys(t.columns).forEach(function (name) {
      var col = t.columns[name], j;
      if (Array.isArray(col)) { for (j = 0; j < t.n; j++) rows[j][name] = col[j]; }
      else if (col.folders) {
        for (j = 0; j < t.n; j++) rows[j][name] = col.codes[j] < 0 ? null : col.folders[col.codes[j]] + col.names[j];
      }
      else { for (j = 0; j < t.n; j++) rows[j][name] = col.codes[j] < 0 ? null : col.text[col.codes[j]]; }
    });
    return rows;
  }
  function chosen() {
    var out = {};
    document.querySelectorAll("#chart-filters select").forEach(function (s) { out[s.name] = s.value; });
    return out;
  }
  function narrow(fig, f) {
    var facets = JSON.parse(fig.getAttribute("data-facets") || "{}");
    fig.hidden = Object.keys(facets).some(function (k) { return f[k] && [].concat(facets[k]).indexOf(f[k]) < 0; });
    var chart = charts[fig.id];
    if (!chart) return Promise.resolve();
    chart.filters.forEach(function (k) { chart.view.signal("f_" + k, f[k] || ""); });
    return chart.view.runAsync();
  }
  function apply() {
    var f = chosen();
    var done = [].map.call(document.querySelectorAll("figure.chart"), function (fig) { return narrow(fig, f); });
    window.dispatchEvent(new Event("resize"));     // a figure shown again takes its box's width
    return Promise.all(done).then(function () { return null; });
  }
  window.tpubenchApplyFilters = apply;
  var drawn = [].map.call(document.querySelectorAll("figure.chart"), function (fig) {
    var payload = JSON.parse(fig.querySelector("script.chart-spec").textContent);
    var spec = payload.spec;
    spec.datasets = {};
    Object.keys(payload.tables).forEach(function (n) { spec.datasets[n] = inflate(payload.tables[n]); });
    var box = fig.querySelector("div.vis");
    return vegaEmbed(box, spec, {actions: false, renderer: payload.renderer}).then(function (result) {
      charts[fig.id] = {view: result.view, filters: payload.filters};
      return narrow(fig, chosen());
    }).catch(function (error) {
      box.textContent = "This figure could not be drawn: " + error;
    });
  });
  Promise.all(drawn).then(function () { document.body.setAttribute("data-charts", "drawn"); });
  var form = document.getElementById("chart-filters");
  if (form) form.addEventListener("change", apply);
})();"""


@functools.lru_cache(maxsize=1)
def library() -> str:
    """The vendored scripts, each as shipped but for its source-map comment (a map is never shipped,
    and a browser's developer tools would otherwise ask for it)."""
    folder = resources.files("tpubench.output.report") / "vendor"
    parts = []
    for name in VENDORED:
        text = (folder / name).read_text(encoding="utf-8")
        parts.append(re.sub(r"\n?//# sourceMappingURL=\S*\s*$", "", text))
    return "\n;\n".join(parts)


def escape_html(text) -> str:
    """Text safe in HTML, quotes included (every section's, through html_parts)."""
    return _escape(str(text), quote=True)


def figure_html(chart: Chart) -> str:
    """One figure: a box the browser draws into, the chart's JSON and its caption."""
    rows = len(next(iter(chart.tables.get(MAIN, {}).values()), []))
    payload = page_json(chart, renderer="canvas" if rows > CANVAS_ROWS else "svg")
    facets = escape_html(json.dumps(chart.facets, ensure_ascii=False))
    return (f'<figure class="chart" id="{escape_html(chart.id)}" data-facets="{facets}">'
            f'<div class="vis" role="img" aria-label="{escape_html(chart.caption)}"></div>'
            f'<script type="application/json" class="chart-spec">{payload}</script>'
            f'<figcaption>{escape_html(chart.caption)}</figcaption></figure>')


def filter_values(charts: list[Chart]) -> dict[str, list[str]]:
    """Per page filter, every value the page's charts hold (their main tables and facets), sorted."""
    values: dict[str, set] = {name: set() for name in FILTERS}
    for chart in charts:
        for name in FILTERS:
            values[name].update(v for v in chart.tables.get(MAIN, {}).get(name, []) if v)
            facet = chart.facets.get(name) or []
            values[name].update([facet] if isinstance(facet, str) else facet)
    return {name: sorted(found) for name, found in values.items() if found}


def filter_bar(values_of: dict[str, list[str]]) -> str:
    """The page's filters over its figures (the values its charts hold: filter_values), a select
    per filter, 'all' first."""
    selects = []
    for name, values in values_of.items():
        options = '<option value="">all</option>' + "".join(
            f'<option value="{escape_html(v)}">{escape_html(v)}</option>' for v in values)
        selects.append(f'<label>{escape_html(name)} <select name="{name}">{options}</select></label>')
    return ('<form id="chart-filters" class="chart-filters" aria-label="Figure filters"><strong>Figures:</strong> '
            + " ".join(selects) + ' <span class="note">hover a point for its configuration, interval, source and '
            "price date; click a legend entry to show that series alone (shift-click for more)</span></form>")


def scripts() -> str:
    """The scripts that draw the page's figures, to end its body with."""
    return f"<script>{library()}</script><script>{SCRIPT}</script>"


__all__ = ["SCRIPT", "VENDORED", "figure_html", "filter_bar", "filter_values", "library", "scripts"]
