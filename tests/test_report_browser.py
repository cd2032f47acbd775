"""The HTML report in a real browser (issues 34 and 52): Debian's Chromium driven by Playwright's
Python package (its own browser downloads are never used) renders a report over the committed
results, a few wide synthetic points and the shipped published rows at 1280, 1400 and 1920 px, with
the network off. The page must not scroll sideways, a wide table scrolls inside its own box with its
first column stuck at the left, every figure is drawn (by the Vega scripts inlined in the page) and
fits its box. The figures are interactive: hovering a point shows its configuration, interval and
source; a filter narrows a chart; a legend entry picks its series; and the page asks for nothing
over the network. Screenshots (the whole page at 1400 px, the top of it at the other widths, a wide
table scrolled, a tooltip) go to $TPUBENCH_ARTIFACTS/report-browser (.ci/run sets it outside the
checkout and keeps them) or to pytest's temporary folder."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest
from helpers_browser import chromium_path
from test_report_layout import wide_results

from tpubench.output.report import build_report, render

pytestmark = pytest.mark.slow

WIDTHS = (1280, 1400, 1920)
FULL_PAGE_WIDTH = 1400     # the whole page at the width of issue 34; the top of the page at the others

# One JSON answer per page: sizes in CSS pixels, read after the page (and its images) loaded.
MEASURE = """() => {
  const page = {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth};
  const tables = [...document.querySelectorAll("table")].map(t => {
    const box = t.parentElement, r = box.getBoundingClientRect();
    return {wrapped: box.classList.contains("scroll"), overflowX: getComputedStyle(box).overflowX,
            boxLeft: r.left, boxRight: r.right, boxWidth: box.clientWidth, tableWidth: t.scrollWidth,
            firstCellPosition: t.rows.length ? getComputedStyle(t.rows[0].cells[0]).position : ""};
  });
  const images = [...document.querySelectorAll("figure.chart")].map(f => {
    const box = f.querySelector("div.vis"), drawing = box.querySelector("canvas, svg");
    const r = f.getBoundingClientRect(), d = drawing ? drawing.getBoundingClientRect() : null;
    return {id: f.id, right: r.right, boxRight: box.getBoundingClientRect().right, drawn: !!drawing,
            width: d ? d.width : 0, height: d ? d.height : 0, boxWidth: box.clientWidth,
            scrolls: box.scrollWidth > box.clientWidth,
            overflowX: getComputedStyle(box).overflowX};
  });
  const glance = document.querySelector("section.glance");
  const firstTableHeading = [...document.querySelectorAll("h2")].find(h => h.textContent.includes("cheapest point"));
  const glanceFirst = !!glance && !!firstTableHeading
      && !!(glance.compareDocumentPosition(firstTableHeading) & Node.DOCUMENT_POSITION_FOLLOWING);
  return {page, tables, images, glanceFirst};
}"""

# Scroll the widest table's box to its end: its first column must stay at the box's left edge
# while the second column moves out of sight.
SCROLL_WIDEST = """() => {
  const boxes = [...document.querySelectorAll("div.scroll")];
  const box = boxes.reduce((a, b) => (b.scrollWidth - b.clientWidth > a.scrollWidth - a.clientWidth ? b : a));
  box.scrollIntoView();
  const row = box.querySelector("tbody tr") || box.querySelector("tr");
  const before = [row.cells[0].getBoundingClientRect().left, row.cells[1].getBoundingClientRect().left];
  box.scrollLeft = box.scrollWidth;
  const after = [row.cells[0].getBoundingClientRect().left, row.cells[1].getBoundingClientRect().left];
  return {scrolled: box.scrollLeft, boxLeft: box.getBoundingClientRect().left, before, after};
}"""


def _required() -> bool:
    """In CI (.ci/run sets TPUBENCH_ARTIFACTS) a missing browser is a failure, elsewhere a skip."""
    return bool(os.environ.get("CI") or os.environ.get("TPUBENCH_ARTIFACTS"))


@pytest.fixture(scope="module")
def browser():
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = ("chromium is not installed (apt-get install -y chromium)" if executable is None else
               "playwright is not installed (pip install -e '.[dev]')" if sync_playwright is None else None)
    if missing:
        if _required():
            pytest.fail(f"CI needs the browser test: {missing}")
        pytest.skip(missing)
    with sync_playwright() as p:
        # The system Chromium: Playwright's own browser downloads are not used (nor reachable in CI).
        chrome = p.chromium.launch(executable_path=executable,
                                   args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield chrome
        chrome.close()


def open_report(browser, page_path: Path, width: int):
    """A page of the report in a context with the network off, the URLs it asked for recorded,
    its figures drawn."""
    context = browser.new_context(viewport={"width": width, "height": 900}, offline=True)
    page = context.new_page()
    page.requested = []
    page.on("request", lambda request: page.requested.append(request.url))
    page.goto(page_path.as_uri(), wait_until="load")
    page.wait_for_selector("body[data-charts=drawn]", timeout=60_000)
    return page


@pytest.fixture(scope="module")
def report_data(tmp_path_factory):
    folder = wide_results(tmp_path_factory.mktemp("browser-results"))
    data = build_report(folder, today=date(2026, 12, 2), warn=lambda _: None)
    assert data.published_rows >= 100        # the shipped published rows are on by default
    return data


@pytest.fixture(scope="module")
def page_path(tmp_path_factory, report_data) -> Path:
    out = tmp_path_factory.mktemp("browser-report") / "report.html"
    out.write_text(render(report_data, "html"), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    where = os.environ.get("TPUBENCH_ARTIFACTS")
    folder = Path(where) / "report-browser" if where else tmp_path_factory.mktemp("report-browser")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("width", WIDTHS)
def test_report_fits_the_window(browser, page_path, artifacts, width):
    page = open_report(browser, page_path, width)
    try:
        m = page.evaluate(MEASURE)
        page.screenshot(path=str(artifacts / f"report-{width}px.png"), full_page=width == FULL_PAGE_WIDTH)
        page_width = m["page"]["innerWidth"]
        assert m["page"]["scrollWidth"] <= page_width, "the page scrolls sideways"
        assert m["glanceFirst"], "the summary is not at the top"

        assert m["tables"]
        wide = 0
        for t in m["tables"]:
            assert t["wrapped"] and t["overflowX"] == "auto", t
            assert t["boxLeft"] >= 0 and t["boxRight"] <= page_width + 0.5, t
            assert t["firstCellPosition"] == "sticky", t
            wide += t["tableWidth"] > t["boxWidth"] + 1
        assert wide, "no table is wider than its box: the scrolling is not exercised"

        assert len(m["images"]) >= 6
        for image in m["images"]:
            assert image["drawn"] and image["width"] > 200 and image["height"] > 50, image
            assert image["right"] <= page_width + 0.5 and image["boxRight"] <= page_width + 0.5, image
            # A chart of panels side by side wider than the page scrolls inside its own box.
            assert not image["scrolls"] or image["overflowX"] == "auto", image

        s = page.evaluate(SCROLL_WIDEST)
        assert s["scrolled"] > 0
        assert abs(s["after"][0] - s["boxLeft"]) <= 1.5, f"first column not sticky: {s}"
        assert s["after"][1] < s["before"][1] - 10, s
        if width == 1400:
            page.screenshot(path=str(artifacts / f"report-{width}px-table-scrolled.png"))
    finally:
        page.context.close()


# The points of a chart as drawn: every symbol whose datum is a row of the chart's table (it names
# its configuration), where it is on the page (scene graph coordinates plus the view's origin and
# the drawing's place), its row, and its opacity (the legend fades the series it did not pick).
POINTS = """(id) => {
  const chart = window.tpubenchCharts[id], view = chart.view;
  const drawing = document.querySelector("#" + id + " div.vis canvas, #" + id + " div.vis svg");
  const box = drawing.getBoundingClientRect(), pad = view.padding(), out = [];
  const origin = [view.origin()[0] + pad.left, view.origin()[1] + pad.top];     // where the scene's (0, 0) is drawn
  (function walk(mark, x, y) {
    for (const item of mark.items || []) {
      if (mark.marktype === "group") {
        for (const child of item.items || []) walk(child, x + (item.x || 0), y + (item.y || 0));
      } else if (mark.marktype === "symbol" && item.datum && item.datum.config !== undefined && mark.role === "mark") {
        const drawn = item._svg ? item._svg.getBoundingClientRect() : null;     // SVG: the element drawn; canvas: computed
        out.push({x: drawn ? drawn.x + drawn.width / 2 : box.left + origin[0] + x + item.x,
                  y: drawn ? drawn.y + drawn.height / 2 : box.top + origin[1] + y + item.y, row: item.datum,
                  opacity: item.opacity === undefined ? 1 : item.opacity, filled: item.fill !== "transparent"});
      }
    }
  })(view.scenegraph().root, 0, 0);
  return out;
}"""

# The legend's entries of a chart (drawn as SVG: a small chart): where each symbol is, and its label.
LEGEND = """(id) => [...document.querySelectorAll("#" + id + " g.role-legend-symbol path")].map(e => {
  const r = e.getBoundingClientRect();
  return {x: r.x + r.width / 2, y: r.y + r.height / 2, label: e.__data__ && e.__data__.datum && e.__data__.datum.label};
})"""


def _scatter(page) -> str:
    """The id of the report's throughput-against-interactivity chart with the most chips."""
    ids = page.evaluate("() => Object.keys(window.tpubenchCharts).filter(id => id.startsWith('pareto'))")
    return max(ids, key=lambda i: len({p["row"]["chip"] for p in page.evaluate(POINTS, i)}))


@pytest.fixture
def report(browser, page_path):
    """The report at 1400 px, the network off, its figures drawn."""
    page = open_report(browser, page_path, 1400)
    yield page
    page.context.close()


def test_a_point_tells_its_configuration_interval_source_and_price_date(report, page_path, artifacts):
    _hover_a_point(report, page_path, artifacts / "report-tooltip.png")


@pytest.fixture(scope="module")
def canvas_page_path(tmp_path_factory, report_data) -> Path:
    """The same report with every chart drawn on a canvas, as a large chart (thousands of points) is."""
    from tpubench.output.report import chart_page

    out = tmp_path_factory.mktemp("browser-canvas") / "report.html"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chart_page, "CANVAS_ROWS", 0)
        out.write_text(render(report_data, "html"), encoding="utf-8")
    return out


def test_a_point_on_a_canvas_tells_the_same(browser, canvas_page_path, artifacts):
    page = open_report(browser, canvas_page_path, 1400)
    try:
        assert page.evaluate("() => document.querySelectorAll('figure.chart canvas').length") > 0
        _hover_a_point(page, canvas_page_path, artifacts / "report-tooltip-canvas.png")
    finally:
        page.context.close()


def _hover_a_point(page, page_path: Path, screenshot: Path) -> None:
    """Hover a point of the scatter and read its tooltip: configuration, interval, source, price date."""
    chart = _scatter(page)
    page.locator(f"#{chart}").scroll_into_view_if_needed()
    point = next(p for p in page.evaluate(POINTS, chart) if p["filled"] and not p["row"]["front"])
    page.mouse.move(point["x"], point["y"])
    tooltip = page.locator("#vg-tooltip-element")
    tooltip.wait_for(state="visible", timeout=10_000)
    text = tooltip.inner_text()
    page.screenshot(path=str(screenshot))
    row = point["row"]
    assert "configuration" in text and row["config"] in text
    assert "95% CI" in text and "source" in text and row["source"] in text
    assert "price" in text and (row["price"] == "not priced" or "as of" in text)
    assert page.requested == [page_path.as_uri()]           # nothing but the page itself, network off


def test_a_filter_narrows_the_charts_and_all_brings_them_back(report):
    page = report
    chart = _scatter(page)
    before = page.evaluate(POINTS, chart)
    chips = sorted({p["row"]["chip"] for p in before})
    assert len(chips) >= 2
    page.select_option("#chart-filters select[name=chip]", chips[0])
    page.evaluate("() => window.tpubenchApplyFilters()")
    after = page.evaluate(POINTS, chart)
    assert after and {p["row"]["chip"] for p in after} == {chips[0]}
    assert len(after) == sum(p["row"]["chip"] == chips[0] for p in before)
    page.select_option("#chart-filters select[name=chip]", "")
    page.evaluate("() => window.tpubenchApplyFilters()")
    assert len(page.evaluate(POINTS, chart)) == len(before)
    # A workload chosen hides the figures of the others.
    workloads = page.evaluate("() => [...document.querySelectorAll('#chart-filters select[name=workload] option')]"
                              ".map(o => o.value).filter(Boolean)")
    page.select_option("#chart-filters select[name=workload]", workloads[0])
    page.evaluate("() => window.tpubenchApplyFilters()")
    hidden = page.evaluate("() => [...document.querySelectorAll('figure.chart')].filter(f => f.hidden)"
                           ".map(f => JSON.parse(f.dataset.facets).workload)")
    assert hidden and workloads[0] not in hidden


def test_a_legend_entry_picks_its_series(report):
    page = report
    chart = _scatter(page)
    page.locator(f"#{chart}").scroll_into_view_if_needed()
    entries = page.evaluate(LEGEND, chart)
    series = {p["row"]["series"] for p in page.evaluate(POINTS, chart)}
    entry = next(e for e in entries if e["label"] in series)
    page.mouse.click(entry["x"], entry["y"])
    page.wait_for_timeout(300)
    points = [p for p in page.evaluate(POINTS, chart) if p["filled"]]
    picked = {p["opacity"] for p in points if p["row"]["series"] == entry["label"]}
    others = {p["opacity"] for p in points if p["row"]["series"] != entry["label"]}
    assert picked and others and min(picked) > max(others)
